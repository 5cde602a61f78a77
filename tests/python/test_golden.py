"""The golden cases of tests/golden (SPEC §10) through the public API on the CPU, DS and
SD window layouts, via kda_decode.golden (function and CLI)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kda_decode import golden

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
CASES = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(GOLDEN_DIR, "*", "case.json")))


def test_six_cases_present():
    assert len(CASES) == 6, CASES


@pytest.mark.parametrize("layout", ["ds", "sd"])
@pytest.mark.parametrize("case_dir", CASES, ids=[os.path.basename(c) for c in CASES])
def test_golden_case(case_dir, layout, record_property):
    res = golden.run_case(case_dir, device="cpu", layout=layout)
    record_property("state_rel_err", res.state_rel_err)
    record_property("out_worst_ratio", res.out_worst_ratio)
    print(res.summary())
    assert res.passed, res.summary()
    assert res.conv_bitwise and res.untouched_bitwise and res.status == "ok"
    assert res.state_rel_err <= 1e-5 * res.steps and res.out_worst_ratio <= 1.0


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kda_decode.golden", *args], capture_output=True, text=True,
                          timeout=300)


def test_golden_cli_pass():
    case = next(c for c in CASES if "verify" in c)
    r = _cli(case, "--device", "cpu", "--layout", "sd")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("PASS"), r.stdout


def test_golden_cli_detects_wrong_reference(tmp_path):
    """A case whose reference output was tampered with must FAIL (exit code 1)."""
    src = next(c for c in CASES if "decode_softplus" in c)
    dst = tmp_path / "tampered"
    shutil.copytree(src, dst)
    case = json.loads((dst / "case.json").read_text())
    out = np.fromfile(dst / case["tensors"]["out"]["file"], dtype="<f4")
    out[5] += 0.05 * np.abs(out).max()
    out.tofile(dst / case["tensors"]["out"]["file"])
    r = _cli(str(dst))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("FAIL"), r.stdout


def test_golden_cli_detects_wrong_window(tmp_path):
    src = next(c for c in CASES if "verify_q4" in c)
    dst = tmp_path / "tampered"
    shutil.copytree(src, dst)
    case = json.loads((dst / "case.json").read_text())
    f = dst / case["tensors"]["conv_state_out"]["file"]
    w = np.fromfile(f, dtype="<u2")
    w[17] ^= 1
    w.tofile(f)
    r = _cli(str(dst), "--layout", "ds")
    assert r.returncode == 1 and "conv windows" in r.stdout, r.stdout + r.stderr


def test_golden_cli_bad_folder(tmp_path):
    r = _cli(str(tmp_path / "nothing"))
    assert r.returncode == 2 and r.stdout.startswith("ERROR"), r.stdout + r.stderr
