"""Serving-engine integration through torch: the ``kda_decode`` custom ops
(``kda_decode.torch``), ``PreparedKda.from_module`` / ``process_weights_after_loading``
with a vLLM-style attention module, and the vLLM ``fused_kda_decode`` adapter
(``kda_decode.vllm``).

CPU (run in CI when torch is installed): ``torch.library.opcheck`` of every op and step mode
(``append`` included; ``run_views`` with and without ``out_gate`` for a layer without the
output norm), ops vs the PreparedKda methods bitwise, ``torch.compile(fullgraph=True)`` of
functions that call ``run`` / ``commit`` / ``flush`` (bitwise vs eager), n compiled append
steps + flush == n decode steps bitwise, from_module (with and without the output norm),
weight reloads, and the adapter vs ``run_views`` (gate mode 2, with and without the norm)
bitwise.

CUDA (skipped without a CUDA device and a CUDA build): opcheck on CUDA tensors, capture and
replay in ``torch.cuda.CUDAGraph`` with new inputs copied into the captured buffers (bitwise
vs eager; every step mode, and decode / append without the output norm), a weight reload after capture changing the replayed result correctly,
``torch.compile(fullgraph=True)`` on CUDA, and the adapter inside a CUDA graph (unseen batch
size planned on the host during capture).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import kda_decode as kd  # noqa: E402
import kda_decode.torch as kt  # noqa: E402
import kda_decode.vllm as kv  # noqa: E402

K = 128
R = 128
W = 4
CUDA = bool(torch.cuda.is_available() and kd.cuda_built())
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device visible to torch and a CUDA build of kda_decode")


# ---------------------------------------------------------------------------------------
# a layer, its vLLM-style module, caches and inputs (torch tensors)
# ---------------------------------------------------------------------------------------
class Norm(torch.nn.Module):
    def __init__(self, w, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(w)
        self.eps = eps


class Attention(torch.nn.Module):
    """The attributes vLLM's KimiK3DeltaAttention has (values random)."""

    def __init__(self, H, *, seed=0, conv_bias=True, lower_bound=-5.0, eps=1e-5, device="cpu"):
        super().__init__()
        D = H * K
        self.conv1d = torch.nn.Conv1d(3 * D, 3 * D, W, groups=3 * D, bias=conv_bias)
        self.f_b_proj = torch.nn.Linear(R, D, bias=False, dtype=torch.bfloat16)
        self.A_log = torch.nn.Parameter(torch.empty(H))
        self.dt_bias = torch.nn.Parameter(torch.empty(D))
        self.o_norm = Norm(torch.empty(K), eps)
        self.gate_lower_bound = lower_bound
        self.load(seed)
        self.to(device)

    def load(self, seed):
        """Loads new random weights in place (same tensors: what a weight reload does)."""
        g = torch.Generator().manual_seed(1000 + seed)
        D = self.dt_bias.numel()
        H = self.A_log.numel()
        with torch.no_grad():
            self.conv1d.weight.copy_(torch.randn(3 * D, 1, W, generator=g) * 0.5)
            if self.conv1d.bias is not None:
                self.conv1d.bias.copy_(torch.randn(3 * D, generator=g) * 0.1)
            self.f_b_proj.weight.copy_(torch.randn(D, R, generator=g) * R ** -0.5)
            self.A_log.copy_(torch.rand(H, generator=g) * 2 - 1)
            self.dt_bias.copy_(torch.randn(D, generator=g) * 0.5)
            self.o_norm.weight.copy_(torch.rand(K, generator=g) + 0.5)


def make_caches(H, slots, window, Qr, *, device="cpu", seed=1, dim_first=False):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    conv = torch.randn(slots, 3 * D, window, generator=g).to(torch.bfloat16)
    if not dim_first:
        conv = conv.transpose(1, 2).contiguous()  # SD storage [slots, window, 3D]
    state = torch.randn(slots, H, K, K, generator=g) * 0.5
    corr = torch.randn(slots, H, Qr, K, generator=g) * 0.3
    kg = torch.randn(slots, H, Qr, 2 * K, generator=g) * 0.1
    kg[..., K:] = -kg[..., K:].abs()
    pend = torch.zeros(slots, dtype=torch.int32)
    return kd.Caches(*(t.to(device) for t in (conv, state, corr, kg, pend)))


def clone_caches(c):
    return kd.Caches(*(None if t is None else t.clone() for t in (c.conv_state, c.state, c.correction, c.key_gate,
                                                                    c.pending)))


def caches_equal(a, b):
    return all((x is None and y is None) or torch.equal(x, y) for x, y in zip(
        (a.conv_state, a.state, a.correction, a.key_gate, a.pending),
        (b.conv_state, b.state, b.correction, b.key_gate, b.pending)))


def projection(H, rows, *, seed=2, device="cpu", gate_mode=0):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    gate = D if gate_mode == 2 else R
    pitch = -(-(4 * D + gate + H) // 8) * 8
    return (torch.randn(rows, pitch, generator=g)).to(torch.bfloat16).to(device)


def views(proj, H, gate_mode=0):
    D = H * K
    gate = D if gate_mode == 2 else R
    return (proj[:, :3 * D], proj[:, 3 * D:4 * D], proj[:, 4 * D:4 * D + gate], proj[:, 4 * D + gate:4 * D + gate + H])


def step_args(mode, B, q, device="cpu"):
    """(slots, accepted, pending values) for a step of B requests in slots 1.. (B·q + 2 pool)."""
    if mode == "per_token":
        slots = torch.arange(1, 1 + B * q, dtype=torch.int32).reshape(B, q)
    else:
        slots = torch.arange(1, 1 + B, dtype=torch.int32)
    acc = None
    if q > 1:
        acc = torch.tensor([1 + (b % q) for b in range(B)], dtype=torch.int32)
    return slots.to(device), None if acc is None else acc.to(device)


STEPS = [("decode", 1), ("append", 1), ("per_token", 2), ("record", 3), ("fused", 2)]
APPEND_QR = 4  # records per row of the append steps' caches


def setup(mode, q, *, H=2, B=3, device="cpu", gate_mode=0, seed=0, output_norm=True):
    att = Attention(H, seed=seed, device=device)
    kda = kd.PreparedKda.from_module(att, precomputed_gate=gate_mode == 2, output_norm=output_norm)
    n = B * q + 2
    caches = make_caches(H, n, W - 2 + q, APPEND_QR if mode == "append" else q, device=device)
    slots, acc = step_args(mode, B, q, device)
    if mode == "fused":
        caches.pending[slots.long()] = acc
    if mode == "append":  # rows part-filled, empty and full (a full row is folded and written back)
        caches.pending[slots.long()] = torch.tensor([(2 * b) % (APPEND_QR + 1) for b in range(B)],
                                                    dtype=torch.int32, device=device)
    kda.prepare(caches)
    return att, kda, caches, slots, acc


# ---------------------------------------------------------------------------------------
# import hygiene
# ---------------------------------------------------------------------------------------
def test_plain_import_stays_torch_free():
    code = "import sys, kda_decode; print('torch' in sys.modules, 'kda_decode.torch' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["False", "False"], r.stdout + r.stderr


def test_ops_registered_with_mutations_declared():
    s = str(torch.ops.kda_decode.run.default._schema)
    for name in ("out", "conv_state", "state", "correction", "key_gate", "pending"):
        assert f"!) {name}" in s or f"!)? {name}" in s, (name, s)
    assert "!" not in s.split("Tensor slots")[1]  # inputs after the caches are read-only
    v = str(torch.ops.kda_decode.run_views.default._schema)
    assert "Tensor? out_gate" in v  # absent for a layer without the output norm
    c = str(torch.ops.kda_decode.commit.default._schema)
    assert "!) state" in c and "!) conv_state" not in c
    f = str(torch.ops.kda_decode.flush.default._schema)
    assert "!) state" in f and "!) pending" in f


# ---------------------------------------------------------------------------------------
# opcheck (CPU)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,q", STEPS)
def test_opcheck_run(mode, q):
    att, kda, c, slots, acc = setup(mode, q)
    B = slots.shape[0]
    proj = projection(2, B * q)
    out = torch.zeros(B * q, 2 * K, dtype=torch.bfloat16)
    args = (kda._handle, proj, out, c.conv_state, c.state, c.correction, c.key_gate, c.pending, slots, q, mode, acc,
            None, None)
    torch.library.opcheck(kt.OPS["run"], args)
    assert kda.status().ok


def test_opcheck_run_views_gate_mode_2():
    att, kda, c, slots, acc = setup("per_token", 2, gate_mode=2)
    proj = projection(2, 6, gate_mode=2)
    out = torch.zeros(6, 2 * K, dtype=torch.bfloat16)
    args = (kda._handle, *views(proj, 2, 2), out, c.conv_state, c.state, None, None, None, slots, 2, "per_token", acc,
            None, None)
    torch.library.opcheck(kt.OPS["run_views"], args)


@pytest.mark.parametrize("with_gate", [False, True])
def test_opcheck_run_views_without_output_norm(with_gate):
    """A layer without the output norm: out_gate None (vLLM's fuse_output_norm=False) or given
    (not read); opcheck runs the op on these arguments several ways, then the output is o."""
    att, kda, c, slots, acc = setup("decode", 1, gate_mode=2, output_norm=False)
    assert not kda.output_norm
    proj = projection(2, 3, gate_mode=2)
    qkv, og, gi, beta = views(proj, 2, 2)
    out = torch.zeros(3, 2 * K, dtype=torch.bfloat16)
    args = (kda._handle, qkv, og if with_gate else None, gi, beta, out, c.conv_state, c.state, None, None, None,
            slots, 1, "decode", None, None, None)
    torch.library.opcheck(kt.OPS["run_views"], args)
    assert kda.status().ok


def test_opcheck_commit_and_flush():
    att, kda, c, slots, acc = setup("record", 3)
    c.pending[slots.long()] = acc
    torch.library.opcheck(kt.OPS["commit"], (kda._handle, c.conv_state, c.state, c.correction, c.key_gate, None,
                                             slots, None, acc))
    torch.library.opcheck(kt.OPS["flush"], (kda._handle, c.conv_state, c.state, c.correction, c.key_gate, c.pending,
                                            slots, None))


# ---------------------------------------------------------------------------------------
# ops vs methods, torch.compile (CPU)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,q", STEPS)
def test_ops_equal_methods_bitwise(mode, q):
    att, kda, c1, slots, acc = setup(mode, q)
    c2 = clone_caches(c1)
    B = slots.shape[0]
    proj = projection(2, B * q, seed=5)
    o1 = torch.zeros(B * q, 2 * K, dtype=torch.bfloat16)
    o2 = o1.clone()
    kda.run(proj, o1, c1, slots, q=q, accepted=acc, mode=mode)
    kt.run(kda, proj, o2, c2, slots, q=q, accepted=acc, mode=mode)
    assert torch.equal(o1, o2) and caches_equal(c1, c2)
    if mode == "record":
        kda.commit(c1, slots, None, acc)
        kt.commit(kda, c2, slots, None, acc)
        c1.pending[slots.long()] = acc
        c2.pending[slots.long()] = acc
        kda.flush(c1, slots)
        kt.flush(kda, c2, slots)
        assert caches_equal(c1, c2)
    assert kda.status().ok


def test_compile_fullgraph_cpu_methods():
    """A verify round (fused step, then record step + commit, then flush) through the
    PreparedKda methods, compiled with fullgraph=True (inductor), equals eager bitwise."""
    att, kda, c1, slots, acc = setup("fused", 2)
    c2 = clone_caches(c1)
    proj = projection(2, 6, seed=7)
    proj2 = projection(2, 6, seed=8)

    def round_(proj, proj2, out, caches, slots, acc):
        kda.run(proj, out[0], caches, slots, q=2, accepted=acc, mode="fused")
        kda.run(proj2, out[1], caches, slots, q=2, accepted=acc, mode="record")
        kda.commit(caches, slots, None, acc)
        caches.pending[slots.long()] = acc
        kda.flush(caches, slots)

    o1 = torch.zeros(2, 6, 2 * K, dtype=torch.bfloat16)
    o2 = o1.clone()
    round_(proj, proj2, o1, c1, slots, acc)
    torch._dynamo.reset()
    import torch._inductor.config as inductor_config

    # no pool of compile workers: they would compete with the rest of the suite (CI: 2 cores)
    with inductor_config.patch(compile_threads=1):
        compiled = torch.compile(round_, fullgraph=True)
        compiled(proj, proj2, o2, c2, slots, acc)
        assert torch.equal(o1, o2) and caches_equal(c1, c2)
        # again with new data in the same buffers: same graph, still equal
        proj.copy_(projection(2, 6, seed=9))
        round_(proj, proj2, o1, c1, slots, acc)
        compiled(proj, proj2, o2, c2, slots, acc)
        assert torch.equal(o1, o2) and caches_equal(c1, c2)
    assert kda.status().ok


def test_append_steps_then_flush_equal_decode_bitwise_compiled():
    """SPEC §8: n append steps then flush == n decode steps (fp32 state: state, outputs,
    windows), bitwise, with the append step and the flush compiled (fullgraph, inductor) and
    the decode steps eager. n = 2·Qr + 1 crosses two full rows (fold and write-back)."""
    H, B, n = 2, 3, 2 * APPEND_QR + 1
    att = Attention(H, seed=70)
    kda = kd.PreparedKda.from_module(att)
    dec = make_caches(H, B + 2, W - 1, APPEND_QR, seed=71)
    app = clone_caches(dec)
    app.pending.zero_()
    slots = torch.tensor([1, 0, 3], dtype=torch.int32)  # request 1 is a pad (the null slot)
    kda.prepare(app)

    def append_step(proj, out, caches, slots):
        kda.run(proj, out, caches, slots, mode="append")

    def flush(caches, slots):
        kda.flush(caches, slots)

    torch._dynamo.reset()
    import torch._inductor.config as inductor_config

    with inductor_config.patch(compile_threads=1):
        c_step = torch.compile(append_step, fullgraph=True)
        c_flush = torch.compile(flush, fullgraph=True)
        history = [dec.state.clone()]  # the decode state after 0, 1, ... steps
        for i in range(n):
            proj = projection(H, B, seed=80 + i)
            od = torch.full((B, H * K), 3.0, dtype=torch.bfloat16)
            oa = od.clone()
            kda.run(proj, od, dec, slots)
            c_step(proj, oa, app, slots)
            assert torch.equal(od, oa), f"outputs of step {i}"
            assert torch.equal(dec.conv_state, app.conv_state), f"windows after step {i}"
            assert int(app.pending[1]) == i % APPEND_QR + 1 and int(app.pending[0]) == 0
            history.append(dec.state.clone())
            # the checkpoint is written only when a full row is folded: it holds the state after
            # the last multiple of Qr steps before this one
            assert torch.equal(app.state, history[(i // APPEND_QR) * APPEND_QR]), f"checkpoint after step {i}"
        c_flush(app, slots)
    assert torch.equal(dec.state, app.state), "state after flush"
    assert (app.pending == 0).all()
    assert kda.status().ok


def test_compile_fullgraph_cpu_wrappers_views():
    """kda_decode.torch.run_views (gate mode 2, separate views) inside a compiled function
    with torch work around it (aot_eager backend)."""
    att, kda, c1, slots, acc = setup("decode", 1, gate_mode=2)
    c2 = clone_caches(c1)
    proj = projection(2, 3, seed=11, gate_mode=2)

    def f(proj, caches, slots):
        qkv, og, gi, beta = views(proj, 2, 2)
        out = torch.empty(proj.shape[0], 2 * K, dtype=torch.bfloat16)
        kt.run_views(kda, qkv, og, gi, beta, out, caches, slots)
        return out.float() * 2

    r1 = f(proj, c1, slots)
    torch._dynamo.reset()
    r2 = torch.compile(f, fullgraph=True, backend="aot_eager")(proj, c2, slots)
    assert torch.equal(r1, r2) and caches_equal(c1, c2)


# ---------------------------------------------------------------------------------------
# from_module / process_weights_after_loading
# ---------------------------------------------------------------------------------------
def _ctor(att, **kw):
    d = lambda t: None if t is None else t.detach()  # noqa: E731
    return kd.PreparedKda(conv_weight=d(att.conv1d.weight), conv_bias=d(att.conv1d.bias), A_log=d(att.A_log),
                          dt_bias=d(att.dt_bias), norm_weight=d(att.o_norm.weight), f_b_weight=d(att.f_b_proj.weight),
                          eps=att.o_norm.eps, lower_bound=att.gate_lower_bound, **kw)


def _one_step(kda, H=2, B=3, seed=3, mode="decode", q=1, gate_mode=0, dim_first=False):
    c = make_caches(H, B * q + 2, W - 2 + q, q, seed=seed, dim_first=dim_first)
    slots, acc = step_args(mode, B, q)
    proj = projection(H, B * q, seed=seed + 1, gate_mode=gate_mode)
    out = torch.zeros(B * q, H * K, dtype=torch.bfloat16)
    kda.run(proj, out, c, slots, q=q, accepted=acc, mode=mode)
    assert kda.status().ok
    return out, c


@pytest.mark.parametrize("conv_bias,lower_bound", [(True, -5.0), (False, None)])
def test_from_module_matches_constructor(conv_bias, lower_bound):
    att = Attention(2, seed=4, conv_bias=conv_bias, lower_bound=lower_bound, eps=3e-6)
    assert att.A_log.requires_grad  # parameters: from_module detaches them
    a = kd.PreparedKda.from_module(att, {("per_token", 3, 2): kd.Policy()}, conv_dim_first=True)
    b = _ctor(att, conv_dim_first=True)
    assert a.heads == 2 and a.taps == W and a.conv_dim_first and a.eps == 3e-6 and a.lower_bound == lower_bound
    assert ("per_token", 3, 2) in a.policies
    oa, ca = _one_step(a, mode="per_token", q=2, dim_first=True)
    ob, cb = _one_step(b, mode="per_token", q=2, dim_first=True)
    assert torch.equal(oa, ob) and caches_equal(ca, cb)
    assert kt.from_module(att).heads == 2


def test_from_module_shapes_and_errors():
    att = Attention(1, seed=5)
    ref_out, _ = _one_step(kd.PreparedKda.from_module(att), H=1)
    # an older [1, 1, H, 1] A_log and a Linear-shaped [3D, W] conv weight are accepted
    att.A_log = torch.nn.Parameter(att.A_log.detach().reshape(1, 1, 1, 1).clone())
    att.conv1d.weight = torch.nn.Parameter(att.conv1d.weight.detach()[:, 0, :].clone())
    out, _ = _one_step(kd.PreparedKda.from_module(att), H=1)
    assert torch.equal(out, ref_out)
    # precomputed gate: f_b_proj is not read (may be absent), gate mode 2
    del att.f_b_proj
    k2 = kd.PreparedKda.from_module(att, precomputed_gate=True)
    _one_step(k2, H=1, gate_mode=2)
    with pytest.raises(AttributeError, match="f_b_proj"):
        kd.PreparedKda.from_module(att)
    del att.o_norm
    with pytest.raises(AttributeError, match="o_norm.*output_norm=False"):
        kd.PreparedKda.from_module(att, precomputed_gate=True)
    # an engine that applies o_norm itself: the module needs none
    k3 = kd.PreparedKda.from_module(att, precomputed_gate=True, output_norm=False)
    assert not k3.output_norm
    o3, c3 = _one_step(k3, H=1, gate_mode=2)
    d = lambda t: None if t is None else t.detach()  # noqa: E731
    k4 = kd.PreparedKda(conv_weight=d(att.conv1d.weight)[:, None, :], conv_bias=d(att.conv1d.bias), A_log=d(att.A_log).view(-1),
                        dt_bias=d(att.dt_bias), lower_bound=att.gate_lower_bound, output_norm=False)
    o4, c4 = _one_step(k4, H=1, gate_mode=2)
    assert torch.equal(o3, o4) and caches_equal(c3, c4)
    k3.process_weights_after_loading(att)  # o_norm is not read again either


def test_process_weights_after_loading_module():
    att = Attention(2, seed=6)
    kda = kd.PreparedKda.from_module(att)
    before, _ = _one_step(kda)
    att.load(seed=7)  # in place: A_log, dt_bias, f_b, conv bias are seen at once; conv/norm are derived
    stale, _ = _one_step(kda)
    kda.process_weights_after_loading(att)
    after, _ = _one_step(kda)
    fresh, _ = _one_step(kd.PreparedKda.from_module(att))
    assert torch.equal(after, fresh)
    assert not torch.equal(after, before) and not torch.equal(stale, fresh)
    # the module's gate / eps are read again unless given
    att.gate_lower_bound = -2.0
    kda.process_weights_after_loading(att)
    assert kda.lower_bound == -2.0
    kda.process_weights_after_loading(att, eps=1e-4)
    assert kda.eps == 1e-4
    with pytest.raises(TypeError, match="not both"):
        kda.process_weights_after_loading(att, A_log=att.A_log.detach())
    with pytest.raises(TypeError, match="missing"):
        kda.process_weights_after_loading()


# ---------------------------------------------------------------------------------------
# the vLLM adapter (CPU)
# ---------------------------------------------------------------------------------------
def vllm_inputs(H, N, *, seed=0, device="cpu", pads=True):
    """Tensors shaped as vLLM's Kimi K3 decode passes them."""
    g = torch.Generator().manual_seed(seed)
    D = H * K
    pitch = -(-(4 * D + R + H) // 16) * 16
    proj = torch.randn(N, pitch, generator=g).to(torch.bfloat16).to(device)
    x = proj[:, :3 * D]
    output_gate = proj[:, 3 * D:4 * D].view(N, H, K)
    raw_beta = proj[:, 4 * D + R:4 * D + R + H].unsqueeze(0)  # [1, N, H], row stride = pitch
    raw_g = (torch.randn(1, N, H, K, generator=g) * 2).to(torch.bfloat16).to(device)
    idx = torch.arange(1, N + 1, dtype=torch.int32)
    if pads and N >= 3:
        idx[1] = 0  # vLLM's NULL_BLOCK_ID
        idx[N - 1] = -1  # PAD_SLOT_ID
    return dict(x=x, raw_g=raw_g, raw_beta=raw_beta, output_gate=output_gate, state_indices=idx.to(device))


def vllm_layer(H, *, device="cpu", seed=0, bias=True, weight_form="decode", lower_bound=-5.0):
    att = Attention(H, seed=seed, conv_bias=bias, lower_bound=lower_bound, device=device)
    cw = att.conv1d.weight.detach()
    if weight_form == "decode":  # vLLM's decode_conv1d_weight [3, W, D] fp32
        weight = torch.from_numpy(kd.decode_conv_weight(cw.cpu())).to(device)
    else:
        weight = cw
    return att, dict(weight=weight, bias=None if att.conv1d.bias is None else att.conv1d.bias.detach(),
                     A_log=att.A_log.detach(), dt_bias=att.dt_bias.detach(),
                     norm_weight=att.o_norm.weight.detach().float(), lower_bound=att.gate_lower_bound,
                     norm_eps=att.o_norm.eps)


def vllm_caches(H, slots, *, dim_first=False, device="cpu", seed=3):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    conv = torch.randn(slots, 3 * D, W - 1, generator=g).to(torch.bfloat16).to(device)
    if not dim_first:
        conv = conv.transpose(1, 2).contiguous()  # SD storage [slots, W-1, 3D]
    state = (torch.randn(slots, H, K, K, generator=g) * 0.5).to(device)
    return conv, state


def conv_arg(conv, dim_first):
    """What vLLM passes: the logical [slots, 3D, W-1] view."""
    return conv if dim_first else conv.transpose(1, 2)


def adapter_vs_run_views(H, N, *, dim_first, weight_form, bias, lower_bound, seed=0, adapter=None, layer=None,
                         norm=True):
    """The adapter's call against the same step through run_views, bitwise. norm=False: vLLM's
    fuse_output_norm=False (output_gate and norm_weight None; a layer with output_norm=False)."""
    att, w = layer if layer is not None else vllm_layer(H, seed=seed, bias=bias, weight_form=weight_form,
                                                       lower_bound=lower_bound)
    inp = vllm_inputs(H, N, seed=seed + 1)
    conv, state = vllm_caches(H, N + 2, dim_first=dim_first, seed=seed + 2)
    conv2, state2 = conv.clone(), state.clone()
    out = torch.full((1, N, H, K), 7.0, dtype=torch.bfloat16)
    fn = adapter or kv.FusedKdaDecode()
    og, nw = (inp["output_gate"], w["norm_weight"]) if norm else (None, None)
    r = fn(inp["x"], w["weight"], w["bias"], conv_arg(conv, dim_first), inp["raw_g"], inp["raw_beta"], w["A_log"],
           w["dt_bias"], inp["state_indices"], state, out, w["lower_bound"], og, nw, w["norm_eps"])
    assert r is out
    # the same step through run_views with gate mode 2
    kda = kd.PreparedKda(conv_weight=att.conv1d.weight.detach(), conv_bias=w["bias"], A_log=w["A_log"],
                         dt_bias=w["dt_bias"], norm_weight=nw, eps=w["norm_eps"],
                         lower_bound=w["lower_bound"], conv_dim_first=dim_first, output_norm=norm,
                         default_policy=kd.Policy(gate_mode=2))
    D = H * K
    out2 = torch.full((N, D), 7.0, dtype=torch.bfloat16)
    kda.run_views(inp["x"], None if og is None else og.reshape(N, D), inp["raw_g"].reshape(N, D),
                  inp["raw_beta"].reshape(N, H), out2, kd.Caches(conv2, state2), inp["state_indices"])
    assert kda.status().ok
    assert torch.equal(out.view(N, D), out2)
    assert torch.equal(conv, conv2) and torch.equal(state, state2)
    return out, fn


@pytest.mark.parametrize("dim_first,weight_form,bias,lower_bound,norm", [
    (False, "decode", True, -5.0, True),   # vLLM's default: SD cache, [3, W, D] weight
    (True, "decode", False, None, True),   # DS cache, softplus gate, no conv bias
    (False, "conv1d", True, -3.0, True),   # nn.Conv1d [3D, 1, W] weight
    (False, "decode", True, -5.0, False),  # fuse_output_norm=False: out = o
    (True, "conv1d", False, None, False),
])
def test_vllm_adapter_matches_run_views_bitwise(dim_first, weight_form, bias, lower_bound, norm):
    out, fn = adapter_vs_run_views(2, 5, dim_first=dim_first, weight_form=weight_form, bias=bias,
                                   lower_bound=lower_bound, norm=norm)
    assert fn.prepared[0].output_norm == norm
    assert (out[0, 1] == 0).all() and (out[0, 4] == 0).all()  # pad rows (ids 0 and -1)
    assert not (out[0, 0] == 0).all()
    assert len(fn.prepared) == 1 and all(s.ok for s in fn.status())


def test_vllm_adapter_norm_and_no_norm_are_two_layers():
    """The same weights called with and without output_gate / norm_weight: two prepared layers
    (the norm mode is part of a layer's identity), same caches written, different outputs."""
    layer = vllm_layer(2, seed=14)
    fn = kv.FusedKdaDecode()
    o1, _ = adapter_vs_run_views(2, 4, dim_first=False, weight_form="decode", bias=True, lower_bound=-5.0, seed=15,
                                 adapter=fn, layer=layer, norm=True)
    o2, _ = adapter_vs_run_views(2, 4, dim_first=False, weight_form="decode", bias=True, lower_bound=-5.0, seed=15,
                                 adapter=fn, layer=layer, norm=False)
    assert [k.output_norm for k in fn.prepared] == [True, False]
    assert not torch.equal(o1, o2)
    fn.process_weights_after_loading()  # the no-norm layer reloads without a norm weight
    with pytest.raises(ValueError, match="both.*neither"):
        inp = vllm_inputs(2, 4, seed=16)
        conv, state = vllm_caches(2, 6)
        fn(inp["x"], layer[1]["weight"], None, conv.transpose(1, 2), inp["raw_g"], inp["raw_beta"],
           layer[1]["A_log"], layer[1]["dt_bias"], inp["state_indices"], state, None, None, None,
           layer[1]["norm_weight"])


def test_vllm_adapter_reuses_layer_and_plans_new_batch_sizes():
    layer = vllm_layer(3, seed=4)
    fn = kv.FusedKdaDecode()
    for N in (4, 7, 1, 4):  # unseen batch sizes are planned on first use
        adapter_vs_run_views(3, N, dim_first=False, weight_form="decode", bias=True, lower_bound=-5.0, seed=N,
                             adapter=fn, layer=layer)
    assert len(fn.prepared) == 1
    plan = fn.prepared[0].plan("decode", 7, 1, kd.Caches(*vllm_caches(3, 9)))
    assert plan["gate_mode"] == 2


def test_vllm_adapter_weight_reload():
    H, N = 2, 4
    att, w = vllm_layer(H, seed=8)
    fn = kv.FusedKdaDecode()
    inp = vllm_inputs(H, N, seed=9)

    def call(fn, weight):
        conv, state = vllm_caches(H, N + 2, seed=10)
        out = torch.empty(1, N, H, K, dtype=torch.bfloat16)
        fn(inp["x"], weight, w["bias"], conv.transpose(1, 2), inp["raw_g"], inp["raw_beta"], w["A_log"],
           w["dt_bias"], inp["state_indices"], state, out, w["lower_bound"], inp["output_gate"], w["norm_weight"],
           w["norm_eps"])
        return out, conv, state

    o_old = call(fn, w["weight"])[0]
    # reload in place (as vLLM's weight loaders do)
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():
        w["weight"].copy_(torch.randn(w["weight"].shape, generator=g) * 0.5)
        w["norm_weight"].copy_(torch.rand(K, generator=g) + 0.5)
        w["A_log"].copy_(torch.rand(H, generator=g) - 0.5)
    stale = call(fn, w["weight"])[0]
    kv.FusedKdaDecode.process_weights_after_loading(fn)
    new = call(fn, w["weight"])
    fresh = call(kv.FusedKdaDecode(), w["weight"])
    assert torch.equal(new[0], fresh[0]) and torch.equal(new[1], fresh[1]) and torch.equal(new[2], fresh[2])
    assert not torch.equal(new[0], o_old) and not torch.equal(stale, fresh[0])
    assert len(fn.prepared) == 1


def test_vllm_adapter_default_instance_and_errors():
    H, N = 1, 3
    att, w = vllm_layer(H, seed=12)
    inp = vllm_inputs(H, N, seed=13, pads=False)
    conv, state = vllm_caches(H, N + 1)
    args = dict(x=inp["x"], weight=w["weight"], bias=w["bias"], conv_state=conv.transpose(1, 2), raw_g=inp["raw_g"],
                raw_beta=inp["raw_beta"], A_log=w["A_log"], dt_bias=w["dt_bias"],
                state_indices=inp["state_indices"], state=state, lower_bound=w["lower_bound"],
                output_gate=inp["output_gate"], norm_weight=w["norm_weight"], norm_eps=w["norm_eps"])
    kv.fused_kda_decode.clear()
    out = kv.fused_kda_decode(**args)  # out=None: allocated [1, N, H, 128]
    assert out.shape == (1, N, H, K) and out.dtype == torch.bfloat16
    kv.process_weights_after_loading()
    assert all(s.ok for s in kv.status())
    # a data error is flagged, not raised (the row is treated as a pad)
    bad = dict(args, state_indices=torch.tensor([1, 99, 2], dtype=torch.int32))
    o = kv.fused_kda_decode(**bad)
    st = kv.status()[0]
    assert st.flags & kd.SLOT_RANGE and st.first_request == 1 and (o[0, 1] == 0).all()
    kv.fused_kda_decode.clear()
    with pytest.raises(ValueError, match="output_gate"):
        kv.fused_kda_decode(**dict(args, output_gate=None))
    with pytest.raises(TypeError, match="slots"):
        kv.fused_kda_decode(**dict(args, state_indices=inp["state_indices"].long()))
    with pytest.raises(ValueError, match="raw_g"):
        kv.fused_kda_decode(**dict(args, raw_g=torch.cat([inp["raw_g"]] * 2, -1)[..., ::2]))
    with pytest.raises(ValueError, match="out"):
        kv.fused_kda_decode(**dict(args, out=torch.empty(1, N, H, K + 1, dtype=torch.bfloat16)))
    with pytest.raises(ValueError, match="weight"):
        kv.fused_kda_decode(**dict(args, weight=w["weight"][:2]))
    with pytest.raises(ValueError, match="conv_state"):
        kv.fused_kda_decode(**dict(args, conv_state=conv.transpose(1, 2)[:, ::2]))
    kv.fused_kda_decode.clear()


# ---------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("mode,q", STEPS)
def test_cuda_opcheck(mode, q):
    att, kda, c, slots, acc = setup(mode, q, device="cuda")
    B = slots.shape[0]
    proj = projection(2, B * q, device="cuda")
    out = torch.zeros(B * q, 2 * K, dtype=torch.bfloat16, device="cuda")
    torch.library.opcheck(kt.OPS["run"], (kda._handle, proj, out, c.conv_state, c.state, c.correction, c.key_gate,
                                          c.pending, slots, q, mode, acc, None, None))
    assert kda.status().ok


def _capture(fn):
    """Warm-up on a side stream, then capture fn() into a CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("mode,q", STEPS)
def test_cuda_graph_replay_new_inputs(mode, q):
    H, B = 4, 6
    att, kda, cg, slots, acc = setup(mode, q, H=H, B=B, device="cuda")
    ce = clone_caches(cg)  # eager twin
    proj = projection(H, B * q, device="cuda")
    out = torch.zeros(B * q, H * K, dtype=torch.bfloat16, device="cuda")
    acc_buf = None if acc is None else acc.clone()

    def step():
        kda.run(proj, out, cg, slots, q=q, accepted=acc_buf, mode=mode)

    # the warm-up and the capture ran the step (warm-up only, capture does not execute):
    # restore the graph caches to the twin's state
    g = _capture(step)
    for t_g, t_e in zip((cg.conv_state, cg.state, cg.correction, cg.key_gate, cg.pending),
                        (ce.conv_state, ce.state, ce.correction, ce.key_gate, ce.pending)):
        t_g.copy_(t_e)
    for it in range(3):
        new = projection(H, B * q, seed=100 + it, device="cuda")
        new_acc = None if acc is None else torch.tensor([1 + (b + it) % q for b in range(B)], dtype=torch.int32,
                                                        device="cuda")
        if mode == "fused":
            cg.pending[slots.long()] = new_acc
            ce.pending[slots.long()] = new_acc
        proj.copy_(new)
        if new_acc is not None:
            acc_buf.copy_(new_acc)
        g.replay()
        oe = torch.zeros_like(out)
        kda.run(new, oe, ce, slots, q=q, accepted=new_acc, mode=mode)
        torch.cuda.synchronize()
        assert torch.equal(out, oe), f"replay {it}: out differs from eager"
        assert caches_equal(cg, ce), f"replay {it}: caches differ from eager"
    assert kda.status().ok


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("mode", ["decode", "append"])
def test_cuda_graph_replay_without_output_norm(mode):
    """A layer without the output norm, run_views with out_gate=None, captured and replayed with
    new inputs (their out-gate columns NaN: not read): bitwise vs eager, outputs finite."""
    H, B = 4, 6
    D = H * K
    att, kda, cg, slots, acc = setup(mode, 1, H=H, B=B, device="cuda", gate_mode=2, output_norm=False)
    ce = clone_caches(cg)
    proj = projection(H, B, device="cuda", gate_mode=2)
    qkv, _, gi, beta = views(proj, H, 2)
    out = torch.zeros(B, D, dtype=torch.bfloat16, device="cuda")

    def step():
        kda.run_views(qkv, None, gi, beta, out, cg, slots, mode=mode)

    g = _capture(step)
    for t_g, t_e in zip((cg.conv_state, cg.state, cg.correction, cg.key_gate, cg.pending),
                        (ce.conv_state, ce.state, ce.correction, ce.key_gate, ce.pending)):
        t_g.copy_(t_e)
    for it in range(APPEND_QR + 2):  # append: crosses a full row
        new = projection(H, B, seed=200 + it, device="cuda", gate_mode=2)
        new[:, 3 * D:4 * D] = float("nan")
        proj.copy_(new)
        g.replay()
        oe = torch.full_like(out, 5.0)
        nq, _, ng, nb = views(new, H, 2)
        kda.run_views(nq, None, ng, nb, oe, ce, slots, mode=mode)
        torch.cuda.synchronize()
        assert torch.equal(out, oe), f"replay {it}: out differs from eager"
        assert caches_equal(cg, ce), f"replay {it}: caches differ from eager"
        assert bool(torch.isfinite(out.float()).all())
    assert kda.status().ok


@pytest.mark.cuda
@needs_cuda
def test_cuda_graph_weight_reload_after_capture():
    H, B = 4, 5
    att = Attention(H, seed=20, device="cuda")
    kda = kd.PreparedKda.from_module(att, {("decode", B, 1): kd.Policy()})
    c0 = make_caches(H, B + 2, W - 1, 1, device="cuda", seed=21)
    cg = clone_caches(c0)
    kda.prepare(cg)
    slots = torch.arange(1, B + 1, dtype=torch.int32, device="cuda")
    proj = projection(H, B, device="cuda", seed=22)
    out = torch.zeros(B, H * K, dtype=torch.bfloat16, device="cuda")
    g = _capture(lambda: kda.run(proj, out, cg, slots))
    # reload every weight in place and refresh the derived copies; replay
    att.load(seed=23)
    kda.process_weights_after_loading(att)
    for t_g, t_0 in zip((cg.conv_state, cg.state), (c0.conv_state, c0.state)):
        t_g.copy_(t_0)
    g.replay()
    torch.cuda.synchronize()
    fresh = kd.PreparedKda.from_module(att, {("decode", B, 1): kd.Policy()})
    ce = clone_caches(c0)
    fresh.prepare(ce)
    oe = torch.zeros_like(out)
    fresh.run(proj, oe, ce, slots)
    torch.cuda.synchronize()
    assert torch.equal(out, oe) and torch.equal(cg.state, ce.state) and torch.equal(cg.conv_state, ce.conv_state)
    # and it really changed: the old weights give another result
    old = Attention(H, seed=20, device="cuda")
    oo = torch.zeros_like(out)
    kd.PreparedKda.from_module(old).run(proj, oo, clone_caches(c0), slots)
    assert not torch.equal(out, oo)


@pytest.mark.cuda
@needs_cuda
def test_cuda_compile_fullgraph():
    att, kda, c1, slots, acc = setup("fused", 2, H=4, B=4, device="cuda")
    c2 = clone_caches(c1)
    proj = projection(4, 8, seed=30, device="cuda")
    w_o = torch.randn(4 * K, 256, device="cuda").to(torch.bfloat16)

    def f(proj, caches, slots, acc):
        out = torch.empty(proj.shape[0], 4 * K, dtype=torch.bfloat16, device=proj.device)
        kda.run(proj, out, caches, slots, q=2, accepted=acc, mode="fused")
        return out, out @ w_o

    o1, r1 = f(proj, c1, slots, acc)
    torch._dynamo.reset()
    o2, r2 = torch.compile(f, fullgraph=True)(proj, c2, slots, acc)
    torch.cuda.synchronize()
    assert torch.equal(o1, o2) and caches_equal(c1, c2)
    torch.testing.assert_close(r1, r2)
    assert kda.status().ok


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("norm", [True, False])
def test_cuda_vllm_adapter_in_graph(norm):
    H, N1, N2 = 12, 8, 5
    att, w = vllm_layer(H, device="cuda", seed=40)
    fn = kv.FusedKdaDecode()
    conv, state = vllm_caches(H, 16, device="cuda", seed=41)
    conv_e, state_e = conv.clone(), state.clone()

    def call(fn, inp, conv, state, out):
        return fn(inp["x"], w["weight"], w["bias"], conv.transpose(1, 2), inp["raw_g"], inp["raw_beta"], w["A_log"],
                  w["dt_bias"], inp["state_indices"], state, out, w["lower_bound"],
                  inp["output_gate"] if norm else None, w["norm_weight"] if norm else None, w["norm_eps"])

    # first call (eager) prepares the layer with batch size N1
    first = vllm_inputs(H, N1, seed=42, device="cuda")
    call(fn, first, conv, state, None)
    call(fn, first, conv_e, state_e, None)
    # capture an unseen batch size N2 (planned on the host during capture)
    static = vllm_inputs(H, N2, seed=43, device="cuda")
    out = torch.empty(1, N2, H, K, dtype=torch.bfloat16, device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call(fn, static, conv, state, out)
    for it in range(3):
        new = vllm_inputs(H, N2, seed=50 + it, device="cuda")
        for k in ("x", "raw_g", "raw_beta", "output_gate", "state_indices"):
            static[k].copy_(new[k])
        g.replay()
        oe = torch.empty_like(out)
        call(fn, new, conv_e, state_e, oe)
        torch.cuda.synchronize()
        assert torch.equal(out, oe) and torch.equal(conv, conv_e) and torch.equal(state, state_e)
    assert all(s.ok for s in fn.status())
    # weight reload after capture: refresh, replay == eager with a fresh adapter
    with torch.no_grad():
        w["weight"].mul_(0.5)
        w["norm_weight"].add_(0.25)
    fn.process_weights_after_loading()
    g.replay()
    oe = torch.empty_like(out)
    call(kv.FusedKdaDecode(), static, conv_e, state_e, oe)
    torch.cuda.synchronize()
    assert torch.equal(out, oe) and torch.equal(state, state_e)
    # a first call during capture is refused
    g2 = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="eager"):
        with torch.cuda.graph(g2):
            call(kv.FusedKdaDecode(), static, conv, state, out)

