"""torch CPU tensors through DLPack on the CPU backend (skipped without torch): the same
step with torch tensors (real bfloat16) and with numpy arrays (uint16 bit patterns) must
give bitwise identical results; torch is not imported by the package itself."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kda_decode as kd
from harness import Inputs, Layer, Pool, bits_of

torch = pytest.importorskip("torch")


def t_of(a, bf16=False):
    if a is None:
        return None
    a = np.ascontiguousarray(a)
    if bf16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def np_of(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.contiguous().numpy()


def test_package_does_not_import_torch():
    code = "import sys, kda_decode, kda_decode.golden; print('torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr


@pytest.mark.parametrize("mode", ["decode", "per_token", "fused"])
def test_torch_cpu_matches_numpy_bitwise(mode):
    H, B = 3, 4
    q = 1 if mode == "decode" else 2
    layer = Layer(H, seed=3)
    n = B * q + 2
    pool_np = Pool(layer, n, 4 - 2 + q, records=(n, q) if mode == "fused" else None, layout="sd", seed=4)
    pool_t = Pool(layer, n, 4 - 2 + q, records=(n, q) if mode == "fused" else None, layout="sd", seed=4)
    caches_t = kd.Caches(t_of(pool_t.conv, True), t_of(pool_t.state), t_of(pool_t.correction),
                         t_of(pool_t.key_gate), t_of(pool_t.pending))
    k_np = layer.prepared()
    k_t = layer.prepared(t_of)
    inp = Inputs(layer, B * q)
    slots = np.arange(1, 1 + B * q, dtype=np.int32).reshape(B, q)
    if mode != "per_token":
        slots = slots[:, 0].copy()
    acc = np.array([1, 2, 1, 2][:B], np.int32) if q > 1 else None
    if mode == "fused":
        pool_np.pending[slots] = acc
        caches_t.pending[torch.from_numpy(slots).long()] = torch.from_numpy(acc)
    o_np = np.zeros((B * q, layer.D), np.uint16)
    o_t = torch.zeros(B * q, layer.D, dtype=torch.bfloat16)
    k_np.run(inp.projected, o_np, pool_np.caches(), slots, q=q, accepted=acc, mode=mode)
    k_t.run(t_of(inp.projected, True), o_t, caches_t, t_of(slots), q=q, accepted=t_of(acc), mode=mode)
    assert k_np.status().ok and k_t.status().ok
    assert np.array_equal(np_of(o_t), o_np)
    assert np.array_equal(bits_of(np_of(caches_t.conv_state)), bits_of(pool_np.conv))
    assert np.array_equal(bits_of(np_of(caches_t.state)), bits_of(pool_np.state))
    if mode == "fused":
        assert np.array_equal(np_of(caches_t.correction), pool_np.correction)
        assert np.array_equal(np_of(caches_t.pending), pool_np.pending)


def test_torch_errors_name_the_operand():
    layer = Layer(2, seed=5)
    kda = layer.prepared(t_of)
    conv = torch.zeros(4, 3, 768, dtype=torch.bfloat16)
    state = torch.zeros(4, 2, 128, 128)
    out = torch.zeros(2, 256, dtype=torch.bfloat16)
    proj = torch.zeros(2, 4 * 256 + 128 + 2, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match="slots"):
        kda.run(proj, out, kd.Caches(conv, state), torch.tensor([1, 2]))  # int64
    with pytest.raises(TypeError, match="out"):
        kda.run(proj, out.float(), kd.Caches(conv, state), torch.tensor([1, 2], dtype=torch.int32))
    with pytest.raises(ValueError, match="state"):
        kda.run(proj, out, kd.Caches(conv, state.transpose(2, 3)), torch.tensor([1, 2], dtype=torch.int32))
