"""Progress of long runs (kda_decode._progress, used by python -m kda_decode.main): a line per
stage with the stage's time, the elapsed time and an ETA weighted by the stages' costs; on at
a terminal, off in CI or when redirected."""
from __future__ import annotations

import io
import os
import subprocess
import sys

from kda_decode._progress import Progress, auto_enabled

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_lines_and_weighted_eta():
    now = [100.0]
    out = io.StringIO()
    p = Progress(10.0, 3, enabled=True, stream=out, clock=lambda: now[0])
    with p.stage("first", 2.0):
        now[0] += 4.0  # 2 s per unit of weight
    with p.stage("second", 3.0):
        now[0] += 6.0
    with p.stage("last", 5.0):
        now[0] += 1.0
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/3] first ..."
    assert lines[1] == "[1/3] first: 4.0 s (elapsed 4.0 s, ETA 16 s)"  # 8 units left at 2 s each
    assert lines[3] == "[2/3] second: 6.0 s (elapsed 10 s, ETA 10 s)"  # 5 units left
    assert lines[5] == "[3/3] last: 1.0 s (elapsed 11 s, done)"


def test_on_at_a_terminal_off_in_ci_or_redirected(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert auto_enabled(Tty()) and not auto_enabled(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not auto_enabled(Tty())
    monkeypatch.setenv("CI", "0")
    assert auto_enabled(Tty())
    out = io.StringIO()
    p = Progress(1.0, 1, stream=out)  # redirected: decides off by itself
    with p.stage("quiet"):
        pass
    assert out.getvalue() == ""


def test_main_job_prints_stages_only_when_asked():
    cmd = [sys.executable, "-m", "kda_decode.main", "--device", "cpu", "--steps", "1", "--golden", GOLDEN]
    on = subprocess.run(cmd + ["--progress", "on"], capture_output=True, text=True, timeout=600)
    assert on.returncode == 0, on.stdout + on.stderr
    stages = [l for l in on.stderr.splitlines() if l.startswith("[") and ": " in l and "elapsed" in l]
    assert len(stages) == 6 + 6, on.stderr  # six layer/gate stages and six golden cases
    assert "ETA" in stages[0] and stages[-1].endswith("done)")
    assert "main job: PASS" in on.stdout and "[1/" not in on.stdout  # the report stays on stdout
    off = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # captured: not a terminal
    assert off.returncode == 0 and "[1/" not in off.stderr and "ETA" not in off.stderr
