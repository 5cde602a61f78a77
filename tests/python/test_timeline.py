"""benchmarks/ladder/timeline.py (where a decode step's time goes across its grid) on a synthetic dump of a
KDA_TIMELINE build: the handoff between steps, the items resident at the release and the drain come out as
planted, and a dump with an item that wrote no timeline is refused."""

import re

import numpy as np
import pytest
from harness import load_tree_script

K = 128


def _dump(tmp_path, H=2, B=3, steps=4, handoff_ns=420, zero_item=False):
    """steps x B x H items, every item resident at its step's release, exits 5000 + 100·i ns after it."""
    out = np.zeros((steps, B, H, K), dtype=np.uint16)
    t = 1_000_000_000
    for s in range(steps):
        for i in range(B * H):
            b, h = divmod(i, H)
            rec = np.array([t - 100, t, t + 3000, t + 3100, t + 5000 + 100 * i, i % 2], dtype=np.uint64)
            out[s, b, h, :24] = rec.view(np.uint16)
        t += 5000 + 100 * (B * H - 1) + handoff_ns
    if zero_item:
        out[1, 0, 1, :24] = 0
    p = tmp_path / f"g2_decode_f32_H{H}_B{B}.bin"
    out.tofile(p)
    return str(p)


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
