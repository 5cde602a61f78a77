"""kda_decode.sglang: SGLang's KDA decode backend call on kda-decode, with inputs built the
way SGLang builds them (docs/ENGINES.md):

- the fused ``qkvbfg`` projection split into ``mixed_qkv`` (pre-conv q|k|v) and beta (column
  slices: row stride = the projection width), beta ``unsqueeze(0)`` → ``[1, N, H]``;
- the forget gate and the output gate from the batched ``fg_b`` projection (``[2, N, D]``);
- the layer's ``RadixLinearAttention`` attributes: ``conv_weights = qkv_conv1d.weight.squeeze(1)``
  ``[3D, W]``, ``A_log`` ``[1, 1, H, 1]``, ``dt_bias`` ``[D]``, ``lower_bound``;
- a ``MambaPool``: per layer a conv pool ``[slots, W-1, 3D]`` and a temporal pool
  ``[slots, H, V, K]``, layer-major or page-major (slot stride spanning every layer);
- ``mamba_cache_indices``: int32, real slots from 1, CUDA-graph pad rows -1, slot 0 reserved.

CPU (the CPU backend, in CI when torch is installed): every case against the float64
reference (SPEC §8: out per element, state ≤ 1e-5 relative, windows bitwise, every slot and
layer not written bitwise unchanged, pad rows exactly zero in a poisoned output), padded
batches, batch sizes planned on first use, ``out`` handling, errors naming the argument,
``covered()``, weight reloads. CUDA (skipped without a GPU and a CUDA build): CUDA vs CPU
(SPEC §8 backend vs backend) and a CUDA-graph capture of an unseen batch size replayed with
new inputs (bitwise vs eager, no allocation per replay).
"""
from __future__ import annotations

import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kda_decode as kd  # noqa: E402
import kda_decode.sglang as ks  # noqa: E402

import harness as hn  # noqa: E402
import reference as ref  # noqa: E402

K = 128
CUDA = bool(torch.cuda.is_available() and kd.cuda_built())
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device visible to torch and a CUDA build of kda_decode")
POISON = 0x7FC1  # a NaN bf16 pattern: a row left unwritten cannot pass for zeros or values


def bits(t: "torch.Tensor") -> np.ndarray:
    """Raw bits of a tensor as a numpy array (bf16 -> uint16)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    if t.dtype == torch.float32:
        return t.view(torch.int32).numpy().view(np.uint32).copy()
    return t.numpy().copy()


def f64(t: "torch.Tensor") -> np.ndarray:
    """A tensor's exact values as float64 (bf16 decoded exactly)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return ref.bf16_bits_to_f64(bits(t))
    return t.double().numpy()


# ---------------------------------------------------------------------------------------
# the layer, pools and step inputs, built as SGLang builds them
# ---------------------------------------------------------------------------------------
class SglLayer:
    """A Kimi KDA layer's SGLang-side tensors and its float64 mirror."""

    def __init__(self, H, *, W=4, lower_bound=-5.0, bias=False, norm_dtype=torch.bfloat16, eps=1e-5, seed=0,
                 device="cpu"):
        g = torch.Generator().manual_seed(seed)
        D = H * K
        self.H, self.W, self.D, self.eps = H, W, D, eps
        # qkv_conv1d: MergedColumnParallelLinear(W -> 3D) fp32, weight unsqueezed to [3D, 1, W]
        self.conv1d_weight = (torch.randn(3 * D, 1, W, generator=g) * 0.4).to(device)
        self.bias = (torch.randn(3 * D, generator=g) * 0.1).to(device) if bias else None
        self.A_log = (torch.rand(1, 1, H, 1, generator=g) * 2 - 1).to(device)
        self.dt_bias = (torch.randn(D, generator=g) * 0.5).to(device)
        self.norm_weight = (torch.rand(K, generator=g) + 0.5).to(norm_dtype).to(device)
        self.attn = types.SimpleNamespace(  # RadixLinearAttention's attributes
            layer_id=0, conv_weights=self.conv1d_weight.squeeze(1), bias=self.bias, A_log=self.A_log,
            dt_bias=self.dt_bias, lower_bound=lower_bound, num_q_heads=H, num_k_heads=H, num_v_heads=H,
            head_q_dim=K, head_k_dim=K, head_v_dim=K)
        self.lower_bound = lower_bound

    def ref(self) -> "ref.RefLayer":
        return ref.RefLayer(H=self.H, W=self.W, conv_w=f64(self.conv1d_weight[:, 0, :]),
                            conv_b=None if self.bias is None else f64(self.bias), f_b=None,
                            A_log=f64(self.A_log).reshape(-1), dt_bias=f64(self.dt_bias),
                            norm_w=f64(self.norm_weight.float()), eps=self.eps, lower_bound=self.lower_bound)


class SglPool:
    """A MambaPool's conv and temporal tensors for ``layers`` layers; ``pool(i)`` is layer i's
    (conv [slots, W-1, 3D], temporal [slots, H, V, K]) as ``mamba2_layer_cache`` gives them."""

    def __init__(self, H, slots, *, W=4, layers=2, page_major=False, conv_dtype=torch.bfloat16,
                 state_dtype=torch.float32, seed=1, device="cpu"):
        g = torch.Generator().manual_seed(seed)
        D = H * K
        self.page_major = page_major
        if page_major:  # one page per slot holding every layer's entries
            conv = torch.randn(slots, layers, W - 1, 3 * D, generator=g).to(conv_dtype)
            state = (torch.randn(slots, layers, H, K, K, generator=g) * 0.3).to(state_dtype)
        else:  # layer-major: [layers, slots, ...]
            conv = torch.randn(layers, slots, W - 1, 3 * D, generator=g).to(conv_dtype)
            state = (torch.randn(layers, slots, H, K, K, generator=g) * 0.3).to(state_dtype)
        self.conv_all, self.state_all = conv.to(device), state.to(device)

    def pool(self, layer: int):
        if self.page_major:
            return self.conv_all[:, layer], self.state_all[:, layer]
        return self.conv_all[layer], self.state_all[layer]


def step_inputs(H, N, *, seed=2, device="cpu", garbage_rows=()):
    """(mixed_qkv, a, b, output_gate) for N decode rows, sliced as SGLang slices them."""
    g = torch.Generator().manual_seed(seed)
    D = H * K
    fused = torch.randn(N, 3 * D + H + 2 * K, generator=g).to(torch.bfloat16)  # qkv | beta | f_a, g_a
    fg = (torch.randn(2, N, D, generator=g) * 1.5).to(torch.bfloat16)  # fused_fg_b_proj output
    for r in garbage_rows:  # CUDA-graph pad rows hold whatever the buffer had
        fused[r] = float("nan")
        fg[:, r] = float("inf")
    fused, fg = fused.to(device), fg.to(device)
    mixed_qkv = fused[:, :3 * D]
    b = fused[:, 3 * D:3 * D + H].unsqueeze(0)  # beta.unsqueeze(0): [1, N, H], row stride = width
    return mixed_qkv, fg[0], b, fg[1]


def reference_step(layer: SglLayer, conv, state, inputs, idx, *, null_slot=0, state_bf16=False):
    """The float64 step on copies of the layer's pools; returns (result, ref caches)."""
    mixed_qkv, a, b, og = inputs
    rc = ref.RefCaches(conv=f64(conv.transpose(1, 2)), state=f64(state), state_bf16=state_bf16)
    res = ref.step(layer.ref(), dict(qkv=f64(mixed_qkv), out_gate=f64(og), gate_in=f64(a), beta=f64(b[0])), rc,
                   mode="decode", q=1, slots=idx.cpu().numpy(), null_slot=null_slot, gate_mode=2)
    return res, rc


def check_against_reference(layer, pool, li, before_conv, before_state, out, res, rc, what):
    """SPEC §8 on one step: out, written slots, windows bitwise, everything else unchanged."""
    H, D = layer.H, layer.D
    N = out.shape[1]
    hn.check_out(bits(out.reshape(N, D)), res.out, res.pads, 1, what=f"{what}: out")
    conv, state = pool.pool(li)
    ws = sorted(rc.written_state)
    assert sorted(rc.written_conv) == ws and ws, f"{what}: the reference wrote no slot"
    if state.dtype == torch.bfloat16:
        hn.check_bf16_state(bits(state[ws]), rc.state[ws], 1e-5, f"{what}: state (bf16)")
    else:
        hn.check_rel(f64(state[ws]), rc.state[ws], 1e-5, f"{what}: state")
    want = rc.conv[ws]
    want_bits = ref.f64_to_bf16_bits(want) if conv.dtype == torch.bfloat16 else want.astype(np.float32).view(np.uint32)
    assert np.array_equal(bits(conv.transpose(1, 2)[ws]), want_bits), f"{what}: windows not bitwise"
    # every slot of every layer the step did not write: bitwise as before
    conv_now, state_now = bits(pool.conv_all), bits(pool.state_all)
    conv_was, state_was = bits(before_conv), bits(before_state)
    for sl in range(conv.shape[0]):
        for lj in range(pool.conv_all.shape[1] if pool.page_major else pool.conv_all.shape[0]):
            if lj == li and sl in ws:
                continue
            c_now = conv_now[sl, lj] if pool.page_major else conv_now[lj, sl]
            c_was = conv_was[sl, lj] if pool.page_major else conv_was[lj, sl]
            s_now = state_now[sl, lj] if pool.page_major else state_now[lj, sl]
            s_was = state_was[sl, lj] if pool.page_major else state_was[lj, sl]
            assert np.array_equal(c_now, c_was), f"{what}: window of slot {sl} layer {lj} changed"
            assert np.array_equal(s_now, s_was), f"{what}: state of slot {sl} layer {lj} changed"


# ---------------------------------------------------------------------------------------
# CPU: against the float64 reference
# ---------------------------------------------------------------------------------------
CASES = [
    # H, lower_bound, conv dtype, state dtype, page-major pool, conv view, bias, norm dtype
    (2, -5.0, torch.bfloat16, torch.float32, False, "stored", False, torch.bfloat16),  # Kimi K3 defaults
    (3, None, torch.bfloat16, torch.float32, True, "transposed", True, torch.float32),  # Kimi Linear, softplus
    (1, -2.5, torch.float32, torch.bfloat16, True, "stored", False, torch.bfloat16),  # fp32 conv, bf16 state
    (12, -5.0, torch.bfloat16, torch.float32, False, "transposed", False, torch.bfloat16),  # K3 TP8 shard
]


@pytest.mark.parametrize("H,lb,conv_dt,state_dt,page_major,view,bias,norm_dt", CASES)
def test_matches_reference(H, lb, conv_dt, state_dt, page_major, view, bias, norm_dt):
    N, slots, li = 6, 9, 1
    layer = SglLayer(H, lower_bound=lb, bias=bias, norm_dtype=norm_dt, seed=H)
    pool = SglPool(H, slots, page_major=page_major, conv_dtype=conv_dt, state_dtype=state_dt, seed=H + 1)
    idx = torch.tensor([3, 1, -1, 8, 0, 5], dtype=torch.int32)  # -1: graph pad; 0: the reserved slot
    inputs = step_inputs(H, N, seed=H + 2, garbage_rows=(2, 4))
    conv, state = pool.pool(li)
    res, rc = reference_step(layer, conv, state, inputs, idx, state_bf16=state_dt == torch.bfloat16)
    assert sorted(res.pads) == [2, 4]
    before = pool.conv_all.clone(), pool.state_all.clone()
    out = torch.empty(1, N, H, K, dtype=torch.bfloat16)
    out.view(torch.int16).fill_(POISON)
    be = ks.KdaDecodeBackend()
    conv_arg = conv if view == "stored" else conv.transpose(-1, -2)  # what causal_conv1d_update is handed
    mixed_qkv, a, b, og = inputs
    got = be.forward_decode(layer.attn, mixed_qkv, a, b, conv_arg, state, idx, output_gate=og,
                            norm_weight=layer.norm_weight, norm_eps=layer.eps, out=out)
    assert got is out
    check_against_reference(layer, pool, li, *before, out, res, rc, f"H={H}")
    assert [s.ok for s in be.status()] == [True]


def test_padded_batches_and_new_batch_sizes():
    """One prepared layer serves every batch size; a CUDA-graph-padded batch (real rows then
    -1 rows holding garbage) writes zeros to the pad rows and touches only the real slots."""
    H, slots = 2, 12
    layer = SglLayer(H, seed=5)
    pool = SglPool(H, slots, layers=1, seed=6)
    be = ks.KdaDecodeBackend()
    for step, (real, padded) in enumerate([(3, 8), (5, 5), (1, 4), (7, 8)]):
        idx = torch.full((padded,), -1, dtype=torch.int32)
        idx[:real] = torch.randperm(slots - 1, generator=torch.Generator().manual_seed(step))[:real].to(torch.int32) + 1
        inputs = step_inputs(H, padded, seed=10 + step, garbage_rows=range(real, padded))
        conv, state = pool.pool(0)
        res, rc = reference_step(layer, conv, state, inputs, idx)
        before = pool.conv_all.clone(), pool.state_all.clone()
        out = be.forward_decode(layer.attn, *inputs[:3], conv, state, idx, output_gate=inputs[3],
                                norm_weight=layer.norm_weight, norm_eps=layer.eps)
        assert out.shape == (1, padded, H, K) and out.dtype == torch.bfloat16
        assert bool((out[0, real:] == 0).all()), "pad rows must be zero"
        check_against_reference(layer, pool, 0, *before, out, res, rc, f"step {step}")
    assert len(be.prepared) == 1
    assert be.prepared[0].plan("decode", 7, 1, kd.Caches(*(t for t in pool.pool(0))))["gate_mode"] == 2


def test_out_layouts_and_null_slot():
    H, N = 1, 3
    layer = SglLayer(H, seed=7)
    pool = SglPool(H, 5, layers=1, seed=8)
    inputs = step_inputs(H, N, seed=9)
    conv, state = pool.pool(0)
    idx = torch.tensor([1, 0, 2], dtype=torch.int32)
    kw = dict(output_gate=inputs[3], norm_weight=layer.norm_weight, norm_eps=layer.eps)
    # [N, D] out: the result is a [1, N, H, 128] view of it
    c0, s0 = conv.clone(), state.clone()
    out2 = torch.full((N, H * K), 3.0, dtype=torch.bfloat16)
    r = ks.KdaDecodeBackend().forward_decode(layer.attn, *inputs[:3], conv, state, idx, out=out2, **kw)
    assert r.shape == (1, N, H, K) and r.data_ptr() == out2.data_ptr()
    assert bool((out2[1] == 0).all()) and not bool((out2[0] == 0).all())
    # null_slot=-1: slot 0 is an ordinary slot (older pools handed it out)
    conv.copy_(c0)
    state.copy_(s0)
    r2 = ks.KdaDecodeBackend(null_slot=-1).forward_decode(layer.attn, *inputs[:3], conv, state, idx, **kw)
    assert not bool((r2[0, 1] == 0).all())
    assert not torch.equal(state[0], s0[0])
    assert torch.equal(r2[0, 0], r[0, 0]) and torch.equal(r2[0, 2], r[0, 2])
    with pytest.raises(ValueError, match="out"):
        ks.forward_decode(layer.attn, *inputs[:3], conv, state, idx, out=torch.empty(N, 2 * H * K,
                                                                                     dtype=torch.bfloat16)[:, ::2], **kw)


def test_slot_out_of_range_is_flagged_not_raised():
    H, N = 1, 3
    layer = SglLayer(H, seed=11)
    pool = SglPool(H, 4, layers=1, seed=12)
    inputs = step_inputs(H, N, seed=13)
    conv, state = pool.pool(0)
    be = ks.KdaDecodeBackend()
    out = be.forward_decode(layer.attn, *inputs[:3], conv, state, torch.tensor([1, 99, 2], dtype=torch.int32),
                            output_gate=inputs[3], norm_weight=layer.norm_weight)
    st = be.status()[0]
    assert st.flags & kd.SLOT_RANGE and st.first_request == 1
    assert bool((out[0, 1] == 0).all()) and not bool((out[0, 0] == 0).all())


def test_errors_name_the_argument_and_covered_agrees():
    H, N = 2, 3
    layer = SglLayer(H, seed=14)
    pool = SglPool(H, 5, layers=1, seed=15)
    x, a, b, og = step_inputs(H, N, seed=16)
    conv, state = pool.pool(0)
    idx = torch.tensor([1, 2, 3], dtype=torch.int32)
    good = dict(layer=layer.attn, mixed_qkv=x, a=a, b=b, conv_states=conv, ssm_states=state, cache_indices=idx,
                output_gate=og, norm_weight=layer.norm_weight)
    be = ks.KdaDecodeBackend()
    ok = be.covered(**good)
    assert ok and ok.supported and "CPU backend" in ok.reason
    bad = [
        (TypeError, "conv_states.*SGLANG_MAMBA_CONV_DTYPE", dict(conv_states=conv.half())),
        (TypeError, "ssm_states.*float16", dict(ssm_states=state.half())),
        (TypeError, "cache_indices.*int64", dict(cache_indices=idx.long())),
        (TypeError, "mixed_qkv", dict(mixed_qkv=x.float())),
        (ValueError, "cache_indices", dict(cache_indices=idx[:2])),
        (ValueError, "mixed_qkv.*3D", dict(mixed_qkv=x[:, :-K])),
        (ValueError, "a:", dict(a=torch.cat([a, a], 1)[:, ::2])),
        (ValueError, "b:", dict(b=b[..., :1])),
        (ValueError, "output_gate and norm_weight", dict(norm_weight=None)),
        (ValueError, "conv_states", dict(conv_states=conv[:, :1])),
        (ValueError, "conv_states.*channel stride", dict(conv_states=conv.transpose(1, 2).contiguous().transpose(1, 2))),
        (ValueError, "num_v_heads", dict(layer=types.SimpleNamespace(**{**vars(layer.attn), "num_v_heads": 3}))),
        (ValueError, "head_v_dim", dict(layer=types.SimpleNamespace(**{**vars(layer.attn), "head_v_dim": 64}))),
        (ValueError, "conv_weights", dict(layer=types.SimpleNamespace(**{**vars(layer.attn), "conv_weights": None}))),
    ]
    for exc, pattern, change in bad:
        kw = {**good, **change}
        with pytest.raises(exc, match=pattern):
            be.forward_decode(**kw)
        c = be.covered(**kw)
        assert not c and not c.supported and c.reason, (pattern, c)
    assert len(be.prepared) == 0  # nothing was prepared for a refused call


def test_no_norm_mode_matches_reference():
    """Without output_gate / norm_weight (SGLang's unfused decode; the model applies o_norm
    itself): out = bf16(o) against the float64 reference whose output is o, the caches as in
    the fused mode, and covered() says so."""
    H, N, li = 2, 5, 0
    layer = SglLayer(H, seed=17)
    pool = SglPool(H, 7, layers=2, seed=18)
    inputs = step_inputs(H, N, seed=19, garbage_rows=(3,))
    conv, state = pool.pool(li)
    idx = torch.tensor([1, 6, 2, -1, 0], dtype=torch.int32)
    c = ks.covered(layer.attn, *inputs[:3], conv, state, idx)
    assert c and "no output norm" in c.reason
    rl = layer.ref()
    rl.output_norm = False
    mixed_qkv, a, b, og = inputs
    rc = ref.RefCaches(conv=f64(conv.transpose(1, 2)), state=f64(state))
    res = ref.step(rl, dict(qkv=f64(mixed_qkv), out_gate=f64(og), gate_in=f64(a), beta=f64(b[0])), rc,
                   mode="decode", q=1, slots=idx.numpy(), null_slot=0, gate_mode=2)
    assert sorted(res.pads) == [3, 4]
    before = pool.conv_all.clone(), pool.state_all.clone()
    out = torch.empty(1, N, H, K, dtype=torch.bfloat16)
    out.view(torch.int16).fill_(POISON)
    be = ks.KdaDecodeBackend()
    got = be.forward_decode(layer.attn, mixed_qkv, a, b, conv, state, idx, out=out)
    assert got is out and not be.prepared[0].output_norm
    check_against_reference(layer, pool, li, *before, out, res, rc, "no norm")
    be.process_weights_after_loading()  # no norm weight to reload


def test_no_norm_mode_matches_core():
    """Without output_gate / norm_weight the output is bf16(o): the core's output_norm=False
    step on the same tensors, bitwise (the core's numerics are tested with the core)."""
    H, N = 2, 4
    layer = SglLayer(H, seed=20)
    pool = SglPool(H, 6, layers=1, seed=21)
    x, a, b, og = step_inputs(H, N, seed=22)
    conv, state = pool.pool(0)
    idx = torch.tensor([1, -1, 3, 5], dtype=torch.int32)
    c2, s2 = conv.clone(), state.clone()
    out = ks.KdaDecodeBackend().forward_decode(layer.attn, x, a, b, conv, state, idx)
    kda = kd.PreparedKda(conv_weight=layer.conv1d_weight, A_log=layer.A_log.view(-1), dt_bias=layer.dt_bias,
                         lower_bound=layer.lower_bound, output_norm=False,
                         conv_dim_first=False, default_policy=kd.Policy(gate_mode=2))
    o2 = torch.full((N, H * K), 5.0, dtype=torch.bfloat16)
    kda.run_views(x, None, a, b[0], o2, kd.Caches(c2, s2), idx)
    assert torch.equal(out.view(N, H * K), o2) and torch.equal(conv, c2) and torch.equal(state, s2)
    assert bool((out[0, 1] == 0).all())


def test_weight_reload_in_place():
    H, N = 2, 3
    layer = SglLayer(H, seed=23, bias=True)
    inputs = step_inputs(H, N, seed=24)
    idx = torch.tensor([1, 2, 3], dtype=torch.int32)

    def call(be):
        pool = SglPool(H, 5, layers=1, seed=25)
        conv, state = pool.pool(0)
        out = be.forward_decode(layer.attn, *inputs[:3], conv, state, idx, output_gate=inputs[3],
                                norm_weight=layer.norm_weight, norm_eps=layer.eps)
        return out, conv, state

    be = ks.KdaDecodeBackend()
    old = call(be)[0]
    g = torch.Generator().manual_seed(26)
    with torch.no_grad():  # as SGLang's loaders do: copy into the same parameters
        layer.conv1d_weight.copy_(torch.randn(layer.conv1d_weight.shape, generator=g) * 0.4)
        layer.norm_weight.copy_(torch.rand(K, generator=g) + 0.5)
        layer.A_log.copy_(torch.rand(layer.A_log.shape, generator=g) - 0.5)
    stale = call(be)[0]
    be.process_weights_after_loading()
    new = call(be)
    fresh = call(ks.KdaDecodeBackend())
    assert all(torch.equal(u, v) for u, v in zip(new, fresh))
    assert not torch.equal(new[0], old) and not torch.equal(stale, fresh[0])
    assert len(be.prepared) == 1


# ---------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------
def _to(t, device):
    return None if t is None else t.to(device)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("page_major,lb,norm", [(False, -5.0, True), (True, None, True), (False, -5.0, False)])
def test_cuda_matches_cpu(page_major, lb, norm):
    """SPEC §8 backend vs backend: out within 1 bf16 ulp + 2e-3·max|ref|, state within
    2e-5·max|ref|, windows bitwise; pad rows zero; H = 12 (a K3 shard) and H = 3; with the fused
    norm and without it (out = o)."""
    for H in (12, 3):
        N, slots = 9, 12
        cpu_layer = SglLayer(H, lower_bound=lb, seed=30 + H)
        gpu_layer = SglLayer(H, lower_bound=lb, seed=30 + H, device="cuda")
        pools = [SglPool(H, slots, page_major=page_major, seed=31, device=d) for d in ("cpu", "cuda")]
        idx = torch.tensor([4, 1, -1, 11, 7, 0, 2, 9, -1], dtype=torch.int32)
        outs = []
        for lay, pool in ((cpu_layer, pools[0]), (gpu_layer, pools[1])):
            dev = pool.conv_all.device
            x, a, b, og = step_inputs(H, N, seed=32, device=dev, garbage_rows=(2, 8))
            conv, state = pool.pool(1)
            kw = dict(output_gate=og, norm_weight=lay.norm_weight, norm_eps=lay.eps) if norm else {}
            outs.append(ks.KdaDecodeBackend().forward_decode(lay.attn, x, a, b, conv, state, idx.to(dev), **kw))
        torch.cuda.synchronize()
        o_cpu, o_gpu = f64(outs[0]), f64(outs[1])
        assert (o_gpu[0, [2, 5, 8]] == 0).all()
        ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(o_cpu), 1e-30))) - 7)
        assert (np.abs(o_gpu - o_cpu) <= ulp + 2e-3 * np.abs(o_cpu).max()).all(), f"H={H}: out"
        hn.check_rel(f64(pools[1].state_all), f64(pools[0].state_all), 2e-5, f"H={H}: state")
        assert torch.equal(pools[1].conv_all.cpu(), pools[0].conv_all), f"H={H}: windows"


@pytest.mark.cuda
@needs_cuda
def test_cuda_graph_capture_of_unseen_batch_size():
    """First call eager (N = 4); a call of an unseen N = 8 captured in a CUDA graph with
    static buffers, replayed with new inputs copied in: bitwise equal to eager calls on
    copies of the pools, and replays allocate nothing."""
    H, slots = 12, 20
    layer = SglLayer(H, seed=40, device="cuda")
    pool = SglPool(H, slots, layers=1, seed=41, device="cuda")
    conv, state = pool.pool(0)
    be = ks.KdaDecodeBackend()
    kw = dict(norm_weight=layer.norm_weight, norm_eps=layer.eps)
    first = step_inputs(H, 4, seed=42, device="cuda")
    be.forward_decode(layer.attn, *first[:3], conv, state, torch.tensor([1, 2, 3, 4], dtype=torch.int32,
                                                                        device="cuda"), output_gate=first[3], **kw)
    N = 8
    static = [t.clone() for t in step_inputs(H, N, seed=43, device="cuda")]
    static_idx = torch.tensor([5, 6, 7, 8, 9, 10, -1, -1], dtype=torch.int32, device="cuda")
    out = torch.empty(1, N, H, K, dtype=torch.bfloat16, device="cuda")
    x, a, bb, og = static
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph, stream=s):
        be.forward_decode(layer.attn, x, a, bb.view(1, N, H), conv, state, static_idx, output_gate=og, out=out, **kw)
    for it in range(3):
        new = [t.clone() for t in step_inputs(H, N, seed=50 + it, device="cuda")]  # the static buffers' layout:
        ref_conv, ref_state = conv.clone(), state.clone()  # the same plan (variant) as the captured call
        for dst, src in zip(static, new):
            dst.copy_(src)
        # distinct slots in every replay (live requests never share one: SPEC §2), two of them new
        static_idx.copy_(torch.tensor([11 + it, 6, 7, 8, 9, 14 + it, -1, -1], dtype=torch.int32))
        torch.cuda.synchronize()
        mem = torch.cuda.memory_allocated()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == mem
        eager = be.forward_decode(layer.attn, new[0], new[1], new[2], ref_conv, ref_state, static_idx.clone(),
                                  output_gate=new[3], **kw)
        torch.cuda.synchronize()
        assert torch.equal(out, eager), f"replay {it}: out"
        assert torch.equal(conv, ref_conv) and torch.equal(state, ref_state), f"replay {it}: caches"
        assert bool((out[0, 6:] == 0).all())
    assert len(be.prepared) == 1 and all(st.ok for st in be.status())


@pytest.mark.cuda
@needs_cuda
def test_cuda_first_call_during_capture_raises():
    H = 1
    layer = SglLayer(H, seed=60, device="cuda")
    pool = SglPool(H, 4, layers=1, seed=61, device="cuda")
    conv, state = pool.pool(0)
    x, a, b, og = step_inputs(H, 2, seed=62, device="cuda")
    idx = torch.tensor([1, 2], dtype=torch.int32, device="cuda")
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with pytest.raises(RuntimeError, match="eager"):
        with torch.cuda.graph(graph, stream=s):
            ks.KdaDecodeBackend().forward_decode(layer.attn, x, a, b, conv, state, idx, output_gate=og,
                                                 norm_weight=layer.norm_weight)
