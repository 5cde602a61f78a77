"""benchmarks/ladder/ladder_passes.sh (a ladder run in passes through scripts/gpu_run.sh's ladder stage) with stub
binaries: every pass's runs land in one folder numbered on after the previous pass's, none overwritten, and the
summary takes each rung's median over the passes."""

import os
import shutil
import subprocess
import tarfile

import pytest
from harness import TREE

HEADER = (
    "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,vs_peer,"
    "gate_plan"
)

STUB = """#!/usr/bin/env bash
# a kda_bench stand-in: one decode row whose time is the next of US (one value per call, in order)
csv=""
while [[ $# -gt 0 ]]; do [[ $1 == --csv ]] && csv=$2; shift; done
n=$(cat "$0.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.calls"
read -ra us <<< "$US"
printf '%s\\ndecode,1,12,8,auto,wide,1,f32,2,sd,0,%s,5.0,1.0,1,1,,,2\\n' "{header}" "${{us[$n]}}" > "$csv"
"""


def _passes(tmp_path, stubs, ladders):
    """Runs ladder_passes.sh with the stub binaries `stubs` ({file name: script}) over the ladder files `ladders`
    (one text each, written as L1.txt, L2.txt, …); returns its OUT folder."""
    script = os.path.join(TREE, "benchmarks/ladder/ladder_passes.sh")
    if not os.path.exists(script):
        pytest.skip("benchmarks/ladder/ladder_passes.sh is not in this tree")
    bin_dir, out = tmp_path / "bin", tmp_path / "out"
    bin_dir.mkdir()
    out.mkdir()
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    files = []
    for i, text in enumerate(ladders):
        files.append(tmp_path / f"L{i + 1}.txt")
        files[-1].write_text(text)
    env = dict(os.environ, BIN=str(bin_dir), OUT=str(out))
    subprocess.run(["bash", script, *map(str, files)], env=env, check=True, capture_output=True)
    return out


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_two_passes_numbered_on_and_summarized(tmp_path):
    times = {"a": "10.0 20.0", "b": "12.0 14.0"}
    stubs = {f"kda_bench_{name}": STUB.format(header=HEADER).replace('"$US"', f'"{us}"') for name, us in times.items()}
    out = _passes(tmp_path, stubs, ["a --H 12\nb --H 12\n", "b --H 12\na --H 12\n"])
    with tarfile.open(out / "ladder.tgz") as tf:
        names = sorted(os.path.basename(n) for n in tf.getnames() if n.endswith(".csv"))
        rows = {
            os.path.basename(m.name): tf.extractfile(m).read().decode().splitlines()[1].split(",")[11]
            for m in tf.getmembers()
            if m.name.endswith(".csv")
        }
    # pass 2's runs follow pass 1's two: a_0, b_1 then b_2, a_3
    assert names == ["ladder_a_0.csv", "ladder_a_3.csv", "ladder_b_1.csv", "ladder_b_2.csv"]
    assert rows == {
        "ladder_a_0.csv": "10.0",
        "ladder_b_1.csv": "12.0",
        "ladder_b_2.csv": "14.0",
        "ladder_a_3.csv": "20.0",
    }
    summary = (out / "ladder_summary.txt").read_text()
    row = next(ln for ln in summary.splitlines() if ln.startswith("decode"))
    assert row.split()[8:10] == ["15.00", "13.00"]  # a, b: medians of their two runs


RP_STUB = """#!/usr/bin/env bash
# a rows_prepared stand-in: its table for H = 12, B = 128, the rows rung's time the next of US
n=$(cat "$0.calls" 2>/dev/null || echo 0); echo $((n + 1)) > "$0.calls"
read -ra us <<< "$US"
echo "# rows_prepared: H = 12, B = 128, 4 steps per graph, pool 513 slots (0.4 GB)"
echo "rung   us/step     floor us        x     %ceil x step floor"
echo "rows   ${us[$n]}        48.70    1.148     87.1%        1.117"
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_rows_prepared_tables_numbered_on_and_judged_over_the_passes(tmp_path):
    kda_bench = (
        STUB.format(header=HEADER)
        .replace('"$US"', '"58.40 58.30"')
        .replace(
            "decode,1,12,8,auto,wide,1,f32,2,sd,0,%s,5.0,1.0,1,1,,,2",
            "decode,1,12,128,auto,wide,1,f32,2,sd,0,%s,50.04,1.0,1,1,62.59,,2",
        )
    )
    rows_prepared = RP_STUB.replace('"$US"', '"57.00 55.90"')  # pass 1 above the target, pass 2 below
    out = _passes(
        tmp_path,
        {"kda_bench": kda_bench, "rows_prepared": rows_prepared},
        [
            "rows_prepared 12 128 --io\nkda_bench --H 12 --B 128\n",
            "kda_bench --H 12 --B 128\nrows_prepared 12 128 --io\n",
        ],
    )
    with tarfile.open(out / "ladder.tgz") as tf:
        names = sorted(os.path.basename(n) for n in tf.getnames() if n.endswith(".txt"))
    # the text tables numbered on like the CSVs (the stage's own ladder_summary.txt left out)
    assert names == [
        "ladder_kda_bench_1.txt",
        "ladder_kda_bench_2.txt",
        "ladder_rows_prepared_0.txt",
        "ladder_rows_prepared_3.txt",
    ]
    # the verdict over both passes: rows' faster run (55.90) against 0.90 x 62.59 = 56.33
    verdict = [" ".join(x.split()) for x in (out / "bounds_verdict.txt").read_text().splitlines()]
    line = next(x for x in verdict if x.startswith("decode mode 2 <= 0.90 x vLLM 12 128"))
    assert "55.90" in line and "within reach (0.43 us left)" in line
