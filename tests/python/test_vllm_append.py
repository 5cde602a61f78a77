"""kda_decode.vllm.AppendState: append decode (SPEC §4 append) behind vLLM's decode call, with
the per-layer records rows and pending counts it owns.

CPU (torch CPU tensors, in CI): the adapter's append trajectory against its decode
trajectory on a twin pool, bitwise (fp32 state) — outputs and windows after every step, the
state after the flush, the checkpoint written only when a row is full — with vLLM's pad rows
(NULL_BLOCK_ID 0 and -1) and slots the batch does not own bitwise untouched; the flush that
happens before a plain decode, a prefill and a slot's release (and what goes wrong without
it); the records' size; errors. CUDA (skipped without a GPU and a CUDA build): the same
trajectory per forced variant, and a CUDA-graph capture of the append step replayed with new
inputs (bitwise vs eager).
"""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import kda_decode as kd  # noqa: E402
import kda_decode.vllm as kv  # noqa: E402

K = 128
W = 4
QR = 4
CUDA = bool(torch.cuda.is_available() and kd.cuda_built())
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device visible to torch and a CUDA build of kda_decode")


def layer(H, *, seed=0, device="cpu", norm=True):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    return dict(
        weight=(torch.randn(3, W, D, generator=g) * 0.4).to(device),  # vLLM's decode_conv1d_weight
        bias=(torch.randn(3 * D, generator=g) * 0.1).to(device),
        A_log=(torch.rand(H, generator=g) * 2 - 1).to(device),
        dt_bias=(torch.randn(D, generator=g) * 0.5).to(device),
        lower_bound=-5.0,
        norm_weight=(torch.rand(K, generator=g) + 0.5).to(device) if norm else None,
        norm_eps=1e-5,
    )


def pools(H, slots, *, seed=1, device="cpu"):
    """Two identical pools (conv SD as vLLM stores it, fp32 state): decode twin and append."""
    g = torch.Generator().manual_seed(seed)
    D = H * K
    conv = torch.randn(slots, W - 1, 3 * D, generator=g).to(torch.bfloat16).to(device)
    state = (torch.randn(slots, H, K, K, generator=g) * 0.3).to(device)
    return (conv, state), (conv.clone(), state.clone())


def inputs(H, N, *, seed, device="cpu", norm=True):
    g = torch.Generator().manual_seed(seed)
    D = H * K
    x = torch.randn(N, 3 * D + 9, generator=g).to(torch.bfloat16)[:, :3 * D]
    raw_g = (torch.randn(1, N, H, K, generator=g) * 2).to(torch.bfloat16)
    raw_beta = torch.randn(1, N, H + 3, generator=g).to(torch.bfloat16)[:, :, :H]
    og = torch.randn(N, D + 5, generator=g).to(torch.bfloat16)[:, :D].view(N, H, K) if norm else None
    return [None if t is None else t.to(device) for t in (x, raw_g, raw_beta, og)]


def call(fn, w, inp, conv, state, idx, out):
    """fn: fused_kda_decode-shaped (a FusedKdaDecode, AppendState.step or .decode)."""
    x, raw_g, raw_beta, og = inp
    return fn(x, w["weight"], w["bias"], conv.transpose(1, 2), raw_g, raw_beta, w["A_log"], w["dt_bias"], idx,
              state, out, w["lower_bound"], og, w["norm_weight"], w["norm_eps"])


def new_out(N, H, device="cpu"):
    return torch.full((1, N, H, K), 9.0, dtype=torch.bfloat16, device=device)


IDX = [3, 0, 5, -1, 1]  # vLLM's graph pads: NULL_BLOCK_ID (0) and -1
LIVE = [3, 5, 1]


def twin(H, *, device="cpu", variant="auto", norm=True, seed=0):
    w = layer(H, seed=seed, device=device, norm=norm)
    (dconv, dstate), (aconv, astate) = pools(H, 8, seed=seed + 1, device=device)
    dec = kv.FusedKdaDecode(variant=variant)
    app = kv.AppendState(8, H, records_per_row=QR, device=device, adapter=kv.FusedKdaDecode(variant=variant))
    idx = torch.tensor(IDX, dtype=torch.int32, device=device)
    return w, dec, app, idx, (dconv, dstate), (aconv, astate)


def run_trajectory(H, n, *, device="cpu", variant="auto", norm=True, seed=0):
    """n decode steps on one pool, n append steps on its twin; checks every step. Returns the
    pieces for further steps."""
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = twin(H, device=device, variant=variant, norm=norm, seed=seed)
    N = len(IDX)
    history = [dstate.clone()]
    untouched = [s for s in range(8) if s not in LIVE]
    a_untouched = (aconv[untouched].clone(), astate[untouched].clone())
    for i in range(n):
        inp = inputs(H, N, seed=100 + i, device=device, norm=norm)
        od, oa = new_out(N, H, device), new_out(N, H, device)
        call(dec, w, inp, dconv, dstate, idx, od)
        call(app.step, w, inp, aconv, astate, idx, oa)
        assert torch.equal(od, oa), f"outputs of step {i}"
        assert torch.equal(dconv, aconv), f"windows after step {i}"
        assert bool((oa[0, 1] == 0).all()) and bool((oa[0, 3] == 0).all()), "pad rows are zero"
        history.append(dstate.clone())
        # the checkpoint is written only when a full row is folded (every Qr steps)
        assert torch.equal(astate, history[(i // QR) * QR]), f"checkpoint after step {i}"
        assert app.pending[LIVE].tolist() == [i % QR + 1] * 3 and int(app.pending[0]) == 0
    assert torch.equal(aconv[untouched], a_untouched[0]) and torch.equal(astate[untouched], a_untouched[1])
    return w, dec, app, idx, (dconv, dstate), (aconv, astate)


# ---------------------------------------------------------------------------------------
# CPU
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,norm", [(1, True), (QR, True), (2 * QR + 3, True), (QR + 1, False)])
def test_append_trajectory_then_flush_equals_decode_bitwise(n, norm):
    H = 2
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, n, norm=norm)
    app.flush(idx)
    assert torch.equal(dstate, astate), "state after flush"
    assert int(app.pending.abs().sum()) == 0
    app.flush(idx)  # nothing pending: a no-op
    assert torch.equal(dstate, astate)
    assert all(s.ok for s in app.adapter.status())


def test_flush_before_a_plain_decode():
    H, n = 2, QR + 2
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, n)
    inp = inputs(H, len(IDX), seed=500)
    od, oa = new_out(len(IDX), H), new_out(len(IDX), H)
    call(dec, w, inp, dconv, dstate, idx, od)
    call(app.decode, w, inp, aconv, astate, idx, oa)  # flushes the batch's rows, then decodes
    assert torch.equal(od, oa) and torch.equal(dstate, astate) and torch.equal(dconv, aconv)
    assert int(app.pending.abs().sum()) == 0


def test_a_plain_decode_without_flush_is_wrong():
    """What the flush is for: a plain decode from a checkpoint with pending records starts
    from a stale state."""
    H, n = 2, 3
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, n)
    inp = inputs(H, len(IDX), seed=501)
    od, oa = new_out(len(IDX), H), new_out(len(IDX), H)
    call(dec, w, inp, dconv, dstate, idx, od)
    call(app.adapter, w, inp, aconv, astate, idx, oa)
    assert not torch.equal(od, oa) and not torch.equal(dstate, astate)


@pytest.mark.parametrize("hook", ["prefill", "release", "flush_all"])
def test_flush_before_prefill_and_release(hook):
    """prefill(slots) / release(slots) / flush_all(): the pool holds what the decode trajectory
    holds (a prefill continues from it; a released slot's final state stays in the pool), the
    rows are empty for the next step or owner; only the given rows are folded."""
    H, n = 2, QR + 3
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, n)
    some = torch.tensor([3, 1], dtype=torch.int32)
    if hook == "flush_all":
        app.flush_all()
        assert torch.equal(dstate, astate)
        assert int(app.pending.abs().sum()) == 0
        return
    getattr(app, hook)(some)
    assert torch.equal(dstate[[3, 1]], astate[[3, 1]])
    assert app.pending[[3, 1]].tolist() == [0, 0]
    assert int(app.pending[5]) == (n - 1) % QR + 1  # slot 5 still pending
    assert not torch.equal(dstate[5], astate[5])
    if hook == "release":
        app.assign(torch.tensor([3], dtype=torch.int32))  # a new owner: the row is empty already
        assert int(app.pending[3]) == 0


def test_assign_discards_records():
    H = 2
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, 2)
    before = astate.clone()
    app.assign(torch.tensor([5], dtype=torch.int32))  # e.g. a request dropped without release
    assert int(app.pending[5]) == 0 and app.pending[[3, 1]].tolist() == [2, 2]
    app.flush_all()
    assert torch.equal(astate[5], before[5])  # nothing folded into slot 5
    assert torch.equal(astate[3], dstate[3])


def test_records_size_and_errors():
    app = kv.AppendState(10, 12, records_per_row=8, adapter=kv.FusedKdaDecode())
    assert app.bytes == 10 * 8 * 12 * (K + 2 * K) * 4 + 10 * 4  # Qr · H · 1.5 KiB per slot, + pending
    assert tuple(app.correction.shape) == (10, 12, 8, K) and tuple(app.key_gate.shape) == (10, 12, 8, 2 * K)
    with pytest.raises(ValueError, match="records_per_row"):
        kv.AppendState(10, 12, records_per_row=0)
    app.flush(torch.tensor([1], dtype=torch.int32))  # before any step: nothing pending, nothing to do
    w = layer(2)
    (conv, state), _ = pools(2, 10)
    inp = inputs(2, 2, seed=1)
    with pytest.raises(ValueError, match="heads"):
        call(app.step, w, inp, conv, state, torch.tensor([1, 2], dtype=torch.int32), new_out(2, 2))
    small = kv.AppendState(4, 2, adapter=kv.FusedKdaDecode())  # records rows < the state pool: a row id out of range is flagged
    out = call(small.step, w, inp, conv, state, torch.tensor([1, 7], dtype=torch.int32), new_out(2, 2))
    st = small.adapter.status()[-1]
    assert st.flags & kd.ROW_RANGE and st.first_request == 1 and bool((out[0, 1] == 0).all())


# ---------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("variant", ["split", "wide", "auto"])
def test_cuda_append_trajectory_then_flush_equals_decode_bitwise(variant):
    H = 12  # 5 requests of 12 heads: auto picks the same variant for decode and append
    w, dec, app, idx, (dconv, dstate), (aconv, astate) = run_trajectory(H, 2 * QR + 1, device="cuda",
                                                                          variant=variant)
    app.flush(idx)
    torch.cuda.synchronize()
    assert torch.equal(dstate, astate)
    assert all(s.ok for s in app.adapter.status()) and all(s.ok for s in dec.status())


@pytest.mark.cuda
@needs_cuda
def test_cuda_graph_append_step_and_flush():
    """The append step and a flush captured in CUDA graphs (after one eager step), replayed with
    new inputs copied into the captured buffers: bitwise equal to an eager twin."""
    H, N = 12, len(IDX)
    w, dec, app, idx, (gconv, gstate), (econv, estate) = twin(H, device="cuda", variant="wide")
    eager = kv.AppendState(8, H, records_per_row=QR, device="cuda", adapter=app.adapter)
    static = inputs(H, N, seed=300, device="cuda")
    out = new_out(N, H, "cuda")
    call(app.step, w, static, gconv, gstate, idx, out)  # eager first step: prepares the layer
    call(eager.step, w, static, econv, estate, idx, new_out(N, H, "cuda"))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call(app.step, w, static, gconv, gstate, idx, out)
    gf = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gf):
        app.flush(idx)
    for it in range(QR + 2):
        new = inputs(H, N, seed=310 + it, device="cuda")
        for s_t, n_t in zip(static, new):
            s_t.copy_(n_t)
        g.replay()
        oe = new_out(N, H, "cuda")
        call(eager.step, w, new, econv, estate, idx, oe)
        torch.cuda.synchronize()
        assert torch.equal(out, oe) and torch.equal(gconv, econv) and torch.equal(gstate, estate)
        assert torch.equal(app.pending, eager.pending) and torch.equal(app.correction, eager.correction)
    gf.replay()
    eager.flush(idx)
    torch.cuda.synchronize()
    assert torch.equal(gstate, estate) and int(app.pending.abs().sum()) == 0
