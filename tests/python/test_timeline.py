"""benchmarks/ladder/timeline.py (where a decode step's time goes across its grid) on a synthetic dump of a
KDA_TIMELINE build: the handoff between steps, the items resident at the release, the drain and the slots'
turnover (an exit -> the SM's next item past its wait) come out as planted, and a dump with an item that wrote no
timeline is refused."""

import re

import numpy as np
import pytest
from harness import load_tree_script

K = 128


def _write(tmp_path, H, B, recs):
    """recs [steps, B·H, 6] (entry, wait, rows, first chunk, exit in ns; SM) into the first 48 bytes of each item's
    output row of a dump named as kda_bench --dump-out names it."""
    steps = recs.shape[0]
    out = np.zeros((steps, B * H, K), dtype=np.uint16)
    out[:, :, :24] = np.ascontiguousarray(recs, dtype=np.uint64).view(np.uint16)
    p = tmp_path / f"g2_decode_f32_H{H}_B{B}.bin"
    out.tofile(p)
    return str(p)


def _dump(tmp_path, H=2, B=3, steps=4, handoff_ns=420, zero_item=False):
    """steps x B x H items, every item resident at its step's release, exits 5000 + 100·i ns after it."""
    recs = np.zeros((steps, B * H, 6), dtype=np.uint64)
    t = 1_000_000_000
    for s in range(steps):
        for i in range(B * H):
            recs[s, i] = [t - 100, t, t + 3000, t + 3100, t + 5000 + 100 * i, i % 2]
        t += 5000 + 100 * (B * H - 1) + handoff_ns
    if zero_item:
        recs[1, 1] = 0
    return _write(tmp_path, H, B, recs)


def test_planted_handoff_and_drain(tmp_path, capsys):
    tool = load_tree_script("benchmarks/ladder/timeline.py")
    tool.describe(_dump(tmp_path))
    out = capsys.readouterr().out
    line = {ln.split("  ")[1].strip(): ln for ln in out.splitlines() if ln.startswith("  ") and "  " in ln[2:]}
    assert "6 items, 4 steps, 2 SMs" in out
    assert float(line["period (median of the steps' last exits)"].split()[-2]) == pytest.approx(5.92)
    assert float(line["handoff (last exit -> next step's first item)"].split()[-2]) == pytest.approx(0.42)
    assert line["items resident at the release"].split()[-1] == "6"
    assert float(line["drain (last item past wait -> last exit)"].split()[-2]) == pytest.approx(5.5)


def test_item_without_timeline_refused(tmp_path):
    tool = load_tree_script("benchmarks/ladder/timeline.py")
    with pytest.raises(SystemExit, match="without a timeline"):
        tool.describe(_dump(tmp_path, zero_item=True))


def test_name_must_carry_the_shape(tmp_path):
    tool = load_tree_script("benchmarks/ladder/timeline.py")
    p = tmp_path / "dump.bin"
    p.write_bytes(b"\0" * 64)
    with pytest.raises(SystemExit, match=re.escape("_H<H>_B<B>.bin")):
        tool.describe(str(p))


def _dump_turnover(tmp_path, steps=3, gap_ns=300, pre_wait_ns=500):
    """One SM, two slots: items 0 and 1 resident at the release, items 2 and 3 each taking the slot
    gap_ns after its predecessor's exit and passing its wait pre_wait_ns after its entry."""
    recs = np.zeros((steps, 4, 6), dtype=np.uint64)
    t = 1_000_000_000
    for s in range(steps):
        recs[s, 0] = [t - 100, t, t + 1000, t + 1100, t + 4000, 0]
        recs[s, 1] = [t - 100, t, t + 1000, t + 1100, t + 5000, 0]
        for i, prev in ((2, 0), (3, 1)):
            e = int(recs[s, prev, 4]) + gap_ns
            recs[s, i] = [e, e + pre_wait_ns, e + pre_wait_ns + 1000, e + pre_wait_ns + 1100, e + pre_wait_ns + 4000, 0]
        t = int(recs[s, 3, 4]) + 420
    return _write(tmp_path, 1, 4, recs)


def test_planted_turnover(tmp_path, capsys):
    tool = load_tree_script("benchmarks/ladder/timeline.py")
    tool.describe(_dump_turnover(tmp_path))
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "turnover (an exit" in ln)
    p50, p90 = (float(x) for x in line.split("p50/90")[1].split()[:2])
    assert p50 == pytest.approx(0.8) and p90 == pytest.approx(0.8)
    assert "2 a step" in line
    assert "slot taken again 0.30 µs" in out
    share = next(ln for ln in out.splitlines() if "turnovers as a share" in ln)
    # two turnovers of 0.8 µs in two slots over a span of 0.3 + 0.5 + 4 + 5 = 9.8 µs
    assert float(share.split()[-1].rstrip("%")) == pytest.approx(100 * 1.6 / (2 * 9.8), abs=0.1)
