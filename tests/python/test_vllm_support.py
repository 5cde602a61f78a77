"""kda_decode.vllm.is_fused_kda_decode_supported (vLLM's support query, answered for
kda-decode) and the adapter on the argument patterns of vLLM's decode path that the query
claims: conv cache and state sharing one page per slot (SD and DS), state indices as a
block-table column slice with CUDA-graph pad rows (NULL_BLOCK_ID 0 and -1), odd row pitches
of x / raw_beta / output_gate, any H — each against the float64 reference (SPEC §8), with
every slot the step does not own bitwise unchanged. CPU always (when torch is installed);
the CUDA rows skip without a GPU and a CUDA build.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import kda_decode as kd  # noqa: E402
import kda_decode.vllm as kv  # noqa: E402
from kda_decode._support import output_norm_in_core  # noqa: E402

import harness as hn  # noqa: E402
import reference as ref  # noqa: E402

K = 128
W = 4
CUDA = bool(torch.cuda.is_available() and kd.cuda_built())
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device visible to torch and a CUDA build of kda_decode")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.cuda, needs_cuda])]


def bits(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16).copy()
    return t.view(torch.int32).numpy().view(np.uint32).copy()


def f64(t):
    t = t.detach().cpu()
    return ref.bf16_bits_to_f64(bits(t)) if t.dtype == torch.bfloat16 else t.double().numpy()


# ---------------------------------------------------------------------------------------
# the query
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("H", [12, 24, 48, 96, 1, 3, 6, 32])
def test_vllm_call_shapes_supported_on_cpu(H):
    # vLLM's positional call: (local heads, head_dim, conv_size, num_spec, model dtype, conv state dtype)
    s = kv.is_fused_kda_decode_supported(H, 128, 4, 0, torch.bfloat16, torch.bfloat16, device="cpu")
    assert s and s.supported and isinstance(s, kv.Support)
    ok, why = s
    assert ok and f"H={H}" in why and "CPU backend" in why


@pytest.mark.parametrize("kw,pattern", [
    (dict(head_dim=64), "head_dim"),
    (dict(num_spec=2), "num_spec"),
    (dict(input_dtype=torch.float16), "input_dtype.*float16"),
    (dict(conv_state_dtype=torch.float16), "conv_state_dtype.*float16"),
    (dict(state_dtype=torch.float16), "state_dtype.*float16"),
    (dict(conv_width=1), "conv_width"),
])
def test_refusals_say_why(kw, pattern):
    s = kv.is_fused_kda_decode_supported(12, **{"device": "cpu", **kw})
    assert not s and s.supported is False
    assert __import__("re").search(pattern, s.reason), s.reason
    assert s == (False, s.reason)


def test_bad_head_counts():
    for H in (0, -3, 2.5, True):
        s = kv.is_fused_kda_decode_supported(H, device="cpu")
        assert not s and "num_heads" in s.reason


def test_dtype_choices_beyond_vllm():
    # fp32 conv caches and bf16 state: not in vLLM's op, supported here
    s = kv.is_fused_kda_decode_supported(12, 128, 4, 0, torch.bfloat16, torch.float32, state_dtype=torch.bfloat16,
                                         device="cpu")
    assert s, s.reason
    assert kv.is_fused_kda_decode_supported(12, conv_width=3, device="cpu")  # the CPU backend takes any W >= 2


def test_no_norm_mode_supported():
    # the core has SPEC §9's optional output norm: vLLM's fuse_output_norm=False is served
    assert output_norm_in_core()
    s = kv.is_fused_kda_decode_supported(12, fuse_output_norm=False, device="cpu")
    assert s and "no output norm" in s.reason
    s = kv.is_fused_kda_decode_supported(12, device="cpu")
    assert s and "output norm fused" in s.reason


def test_cuda_device_answer():
    s = kv.is_fused_kda_decode_supported(12, device="cuda")
    if not kd.cuda_built():
        assert not s and "without the CUDA backend" in s.reason
    elif not torch.cuda.is_available():
        assert not s and "no CUDA device" in s.reason
    else:
        cap = torch.cuda.get_device_capability()
        assert bool(s) == (cap >= (9, 0)), s.reason
        if s:
            assert "CUDA backend" in s.reason
            w3 = kv.is_fused_kda_decode_supported(12, conv_width=3, device="cuda")
            assert not w3 and "W = 4" in w3.reason


# ---------------------------------------------------------------------------------------
# vLLM's cache patterns
# ---------------------------------------------------------------------------------------
def paged_caches(H, slots, layout, *, seed, device="cpu", conv_dtype=torch.bfloat16):
    """vLLM's hybrid page: per slot, the conv window then the fp32 state, in one byte buffer.
    Returns (conv as vLLM passes it: the logical [slots, 3D, W-1] view, state, the page
    bytes)."""
    g = torch.Generator().manual_seed(seed)
    D = H * K
    esz = torch.tensor([], dtype=conv_dtype).element_size()
    conv_slot_bytes = 3 * D * (W - 1) * esz
    conv_slot_bytes += (-conv_slot_bytes) % 16  # keep the state 16-byte aligned
    page_bytes = conv_slot_bytes + H * K * K * 4
    storage = torch.randint(0, 255, (slots * page_bytes,), dtype=torch.uint8, generator=g).to(device)
    conv = torch.as_strided(storage.view(conv_dtype), size=(slots, 3 * D, W - 1),
                            stride=(page_bytes // esz, (W - 1) if layout == "DS" else 1, 1 if layout == "DS" else 3 * D))
    state = torch.as_strided(storage.view(torch.float32), size=(slots, H, K, K), stride=(page_bytes // 4, K * K, K, 1),
                             storage_offset=conv_slot_bytes // 4)
    conv.copy_((torch.randn(slots, 3 * D, W - 1, generator=g) * 0.5).to(conv_dtype).to(device))
    state.copy_((torch.randn(slots, H, K, K, generator=g) * 0.1).to(device))
    return conv, state, storage


def vllm_step(H, N, *, seed, device="cpu"):
    """Decode-step tensors with vLLM's odd pitches (its own test's storage widths)."""
    g = torch.Generator().manual_seed(seed)
    D = H * K
    x = torch.randn(N, 3 * D + 17, generator=g).to(torch.bfloat16)[:, :3 * D]
    raw_g = (torch.randn(1, N, H, K, generator=g) * 2).to(torch.bfloat16)
    raw_beta = torch.randn(1, N, H + 1, generator=g).to(torch.bfloat16)[:, :, :H]
    og = torch.randn(N, D + 7, generator=g).to(torch.bfloat16)[:, :D].view(N, H, K)
    return [t.to(device) for t in (x, raw_g, raw_beta, og)]


def vllm_weights(H, *, seed, lower_bound, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    weight = 0.3 * torch.randn(3 * D, W, generator=g)  # the conv1d weight [3D, W]
    return dict(
        conv_w=weight,
        weight=weight.reshape(3, D, W).transpose(1, 2).contiguous().to(device),  # decode_conv1d_weight [3, W, D]
        A_log=(0.5 * torch.randn(H, generator=g)).to(device),
        dt_bias=(0.1 * torch.randn(D, generator=g)).to(device),
        norm_weight=torch.randn(K, generator=g).to(device),
        lower_bound=lower_bound,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("H,layout,lb,norm", [(12, "SD", -5.0, True), (12, "DS", None, True), (24, "SD", None, True),
                                              (3, "DS", -2.0, True), (12, "SD", -5.0, False), (3, "DS", None, False)])
def test_paged_caches_block_table_slices_padded_rows(device, H, layout, lb, norm):
    """norm=False: vLLM's fuse_output_norm=False (output_gate and norm_weight None), out = o."""
    N, slots = 6, 9
    w = vllm_weights(H, seed=H, lower_bound=lb, device=device)
    conv, state, storage = paged_caches(H, slots, layout, seed=H + 1, device=device)
    s = kv.is_fused_kda_decode_supported(H, 128, 4, 0, torch.bfloat16, torch.bfloat16, device=device, conv_state=conv,
                                         state=state, fuse_output_norm=norm)
    assert s, s.reason
    # vLLM: non_spec_state_indices_tensor = block_table[:, 0]; graph pad rows: NULL_BLOCK_ID (0) or -1
    block_table = torch.full((N, 5), 77, dtype=torch.int32)
    block_table[:, 0] = torch.tensor([3, 8, 0, 1, -1, 5], dtype=torch.int32)
    idx = block_table.to(device)[:, 0]
    x, raw_g, raw_beta, og = vllm_step(H, N, seed=H + 2, device=device)
    rl = ref.RefLayer(H=H, W=W, conv_w=w["conv_w"].double().numpy(), conv_b=None, f_b=None,
                      A_log=f64(w["A_log"]), dt_bias=f64(w["dt_bias"]), norm_w=f64(w["norm_weight"]), eps=1e-5,
                      lower_bound=lb, output_norm=norm)
    rc = ref.RefCaches(conv=f64(conv), state=f64(state))
    res = ref.step(rl, dict(qkv=f64(x), out_gate=f64(og.reshape(N, H * K)), gate_in=f64(raw_g.reshape(N, H * K)),
                            beta=f64(raw_beta[0])), rc, mode="decode", q=1, slots=idx.cpu().numpy(), null_slot=0,
                   gate_mode=2)
    assert sorted(res.pads) == [2, 4]
    before = bits(storage.view(torch.int32)) if storage.numel() % 4 == 0 else None
    out = torch.full((1, N, H, K), float("nan"), dtype=torch.bfloat16, device=device)
    fn = kv.FusedKdaDecode()
    r = fn(x, w["weight"], None, conv, raw_g, raw_beta, w["A_log"], w["dt_bias"], idx, state, out, lb,
           og if norm else None, w["norm_weight"] if norm else None, 1e-5)
    assert r is out
    hn.check_out(bits(out.reshape(N, H * K)), res.out, res.pads, 1, what="out")
    ws = sorted(rc.written_state)
    hn.check_rel(f64(state[ws]), rc.state[ws], 1e-5, "state")  # SPEC §8: each backend vs float64
    assert np.array_equal(bits(conv[ws]), ref.f64_to_bf16_bits(rc.conv[ws])), "windows"
    # the pages of the slots the step does not own: bitwise as before (conv, state and padding)
    page = storage.numel() // slots
    now = bits(storage.view(torch.int32)).reshape(slots, page // 4)
    was = before.reshape(slots, page // 4)
    for sl in range(slots):
        if sl not in ws:
            assert np.array_equal(now[sl], was[sl]), f"page of slot {sl} changed"
    assert all(st.ok for st in fn.status())


def test_query_checks_layouts():
    H = 2
    conv, state, _ = paged_caches(H, 3, "SD", seed=1)
    D = H * K
    assert kv.is_fused_kda_decode_supported(H, device="cpu", conv_state=conv, state=state)
    bad_conv = torch.zeros(3, 3 * D, 2 * (W - 1), dtype=torch.bfloat16)[:, :, ::2]  # neither SD nor DS
    s = kv.is_fused_kda_decode_supported(H, device="cpu", conv_state=bad_conv)
    assert not s and "conv_state" in s.reason
    s = kv.is_fused_kda_decode_supported(H, device="cpu", conv_state=conv[:, :, :2])
    assert not s and "window" in s.reason
    s = kv.is_fused_kda_decode_supported(H, device="cpu", conv_state=conv.float())
    assert not s and "conv_state_dtype" in s.reason
    s = kv.is_fused_kda_decode_supported(H, device="cpu", state=state.transpose(2, 3))
    assert not s and "state" in s.reason
    s = kv.is_fused_kda_decode_supported(H, device="cpu", state=state[:, :1])
    assert not s and "state" in s.reason
