"""The differential fuzzer (fuzz.py) in CI: a CPU-only subset (the CPU backend against the
float64 reference on 200 random configurations), a self-test of its device path with torch CPU
tensors, and — on a GPU — a short CUDA run. The full GPU run (10,000 configurations in chunks
with distinct seeds) is in scripts/gpu_run.sh; a failure line names the seed that replays it:
    python tests/python/fuzz.py --device cuda --replay S:I
"""
from __future__ import annotations

import io
import os

import pytest

import fuzz


def _run(n, seed, device, **kw):
    buf = io.StringIO()
    ran, mismatches, failures = fuzz.fuzz(n, seed, device, out=buf, **kw)
    text = buf.getvalue()
    print(text.splitlines()[-1])
    assert ran == n, text
    assert mismatches == 0, text
    assert text.splitlines()[-1].startswith(f"fuzz: {n} configs, 0 mismatches"), text


def test_fuzz_cpu_subset():
    """200 configurations, the CPU backend vs float64 at every operation (~15 s on 2 cores)."""
    _run(200, 20261130, "cpu")


def test_fuzz_device_path_selftest():
    """The cuda code path (stride-preserving device copies, downloads, backend-vs-backend
    checks) with torch CPU tensors on the CPU backend."""
    pytest.importorskip("torch")
    _run(30, 7, "torch-cpu", sample_f64=10)


def test_fuzz_replay_and_summary_line():
    buf = io.StringIO()
    ran, m, _ = fuzz.fuzz(1, 5, "cpu", out=buf, first_index=17)
    assert (ran, m) == (1, 0)
    assert buf.getvalue().startswith("fuzz: 1 configs, 0 mismatches")
    # the same (seed, index) always gives the same configuration
    assert fuzz.random_config(5, 17).describe() == fuzz.random_config(5, 17).describe()
    assert fuzz.random_config(5, 17).describe() != fuzz.random_config(5, 18).describe()
    assert fuzz.main(["--replay", "5:17"]) == 0


@pytest.mark.cuda
def test_fuzz_cuda_short():
    torch = pytest.importorskip("torch")
    import kda_decode as kd

    if not torch.cuda.is_available() or not kd.cuda_built():
        pytest.skip("needs a CUDA device and the CUDA backend")
    _run(int(os.environ.get("KDA_FUZZ_CUDA_CONFIGS", "300")), 424242, "cuda", sample_f64=30)


def test_fuzz_large_grids_drawn_apart():
    """On CUDA one configuration in fuzz.LARGE_EVERY is a large grid (the forms for grids beyond
    four CTAs per SM); its generator is its own, so every other configuration is drawn as before."""
    large = 0
    for i in range(400):
        c = fuzz.random_config(20261204, i, "cuda")
        plain = fuzz.random_config(20261204, i, "cuda", large_every=0)
        if not c.large:
            assert c.describe() == plain.describe()
            continue
        large += 1
        assert c.H == 4 and c.gate_policy in ("1", "2") and c.variant in ("wide", "auto"), c.describe()
        for op in c.ops:
            assert op.kind in ("decode", "append", "record", "fused") and op.q <= 4, c.describe()
            assert op.B == 0 or 133 <= op.B <= 170, c.describe()
    assert 1 <= large <= 20, large
    forced = fuzz.random_config(3, 0, "torch-cpu", large_every=1)
    assert forced.large and forced.describe().endswith("]")
