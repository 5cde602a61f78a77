"""examples/torch_kda_layer.py end to end: a small torch KDA layer served by kda-decode
(64 decode steps of a prompt, then 8 speculative verify rounds of q = 4 with drafts,
acceptance and commit) matches the pure-torch float64 reference of the same layer:

* attention output per step within SPEC §8 (|out − ref| ≤ 2⁻⁸·|ref| + 2e-3·max|ref|);
* layer output o_proj(out) within 2e-2·max|ref| (bf16 GEMM on both sides);
* final committed states within 1e-3 relative (SPEC §8 long runs);
* pad rows exactly zero, no caller-error flags.

CPU always (torch needed); CUDA when a device and a CUDA build are present, eagerly and
with the decode step captured in a CUDA graph.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

torch = pytest.importorskip("torch")

import kda_decode as kd  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch_kda_layer.py")
CUDA = bool(torch.cuda.is_available() and kd.cuda_built())


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("torch_kda_layer", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    # The tensors are tiny: one torch thread. Otherwise torch's OpenMP workers, spinning
    # between the small ops, compete with the CPU backend's worker threads on a 2-core CI
    # machine and the run takes 10-20x longer (timing-dependent).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield mod
    torch.set_num_threads(threads)


def _check(rep):
    assert rep.decode_steps == 64 and rep.verify_rounds == 8
    assert 1 in rep.accepted and 4 in rep.accepted  # rejections and full acceptances both happen
    assert rep.passed, rep.describe()


@pytest.mark.parametrize("scheme,lower_bound", [("record", -5.0), ("fused", None), ("per_token", -5.0)])
def test_example_cpu(example, scheme, lower_bound):
    _check(example.run_example("cpu", steps=64, rounds=8, scheme=scheme, lower_bound=lower_bound))


def test_example_main_cpu(example, capsys):
    assert example.main(["--device", "cpu", "--steps", "4", "--rounds", "2"]) == 0
    assert "PASS" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device visible to torch and a CUDA build of kda_decode")
@pytest.mark.parametrize("scheme,cuda_graph", [("record", False), ("fused", True), ("per_token", True)])
def test_example_cuda(example, scheme, cuda_graph):
    _check(example.run_example("cuda", steps=64, rounds=8, scheme=scheme, heads=4, cuda_graph=cuda_graph))
