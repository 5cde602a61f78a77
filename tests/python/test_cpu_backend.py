"""Property tests of the CPU backend, through the public Python API, against the float64
reference (reference.py) on fresh random inputs. Tolerances are SPEC §8:

* out, per element: |out − ref| ≤ 2⁻⁸·|ref| + 2e-3·max|ref| (max over the step's rows);
* state and records: max|err| / max|ref| ≤ 1e-5 per step, 1e-5·n after n chained steps
  (bf16 state: within 1 bf16 ulp of the reference rounded to bf16, + that);
* windows bitwise; untouched slots / rows bitwise; pad rows exactly zero.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import kda_decode as kd
import reference as ref
from harness import (Inputs, Layer, Pool, bf16, bits_of, check_caches, check_out, check_rel, f64, poison,
                     strided_table)

W = 4


def step(kda, layer, pool, inp, *, mode="decode", q=1, slots, accepted=None, out_slots=None, record_rows=None,
         null_slot=0, gate_mode=0, views=False, n_chain=1, expect_flags=None):
    """Runs one step on the package and on the reference and checks everything."""
    rows = inp.projected.shape[0]
    out = np.empty((rows, layer.D), np.uint16)
    poison(out)
    before = pool.snapshot()
    kw = dict(q=q, accepted=accepted, out_slots=out_slots, record_rows=record_rows, mode=mode)
    if views:
        v = inp.views()
        kda.run_views(v["qkv"], v["out_gate"], v["gate_in"], v["beta"], out, pool.caches(), slots, **kw)
    else:
        kda.run(inp.projected, out, pool.caches(), slots, **kw)
    st = kda.status()
    res = ref.step(layer.ref, inp.ref, pool.ref, mode=mode, q=q, slots=np.asarray(slots),
                   accepted=None if accepted is None else np.asarray(accepted),
                   out_slots=None if out_slots is None else np.asarray(out_slots),
                   record_rows=None if record_rows is None else np.asarray(record_rows),
                   null_slot=null_slot, gate_mode=gate_mode)
    assert (st.flags, st.first_request) == (res.flags, res.first), f"status {st.describe()} vs reference {res.flags}/{res.first}"
    if expect_flags is not None:
        assert st.flags == expect_flags
    check_out(out, res.out, res.pads, q)
    check_caches(pool, before, n_chain, what=f"{mode} step")
    again = kda.status()
    assert again.ok and again.flags == 0 and again.first_request == -1
    return out, res


def distinct_slots(rng, n, count, low=1):
    return rng.permutation(np.arange(low, n))[:count].astype(np.int32)


# ---------------------------------------------------------------------------------------
# decode
# ---------------------------------------------------------------------------------------
_DECODE = []
for i, (H, layout, cdt) in enumerate(itertools.product([1, 3, 4, 12], ["ds", "sd"], ["bf16", "f32"])):
    _DECODE.append((H, layout, cdt, [None, -5.0, -1.5][i % 3], i % 4 < 2, i % 5 in (1, 3), i % 3 == 2))


@pytest.mark.parametrize("H,layout,cdt,lb,bias,use_out_slots,wide_window", _DECODE)
def test_decode(H, layout, cdt, lb, bias, use_out_slots, wide_window):
    rng = np.random.default_rng(H * 100 + len(layout) + len(cdt))
    layer = Layer(H, conv_bias=bias, lower_bound=lb, seed=H)
    B = 3 if H == 12 else 5
    n = 2 * B + 3
    window = W - 1 + (2 if wide_window else 0)
    pool = Pool(layer, n, window, conv_dtype=cdt, layout=layout, slot_pad=8 if wide_window else 0)
    kda = layer.prepared(conv_dim_first=layout == "ds", policies={("decode", B, 1): kd.Policy()})
    kda.prepare(pool.caches())
    ids = distinct_slots(rng, n, 2 * B)
    a, b = ids[:B], ids[B:]
    for s in range(3):  # chained steps
        inp = Inputs(layer, B, seed=10 + s)
        if use_out_slots:
            step(kda, layer, pool, inp, slots=strided_table(a), out_slots=strided_table(b, col0=2), n_chain=s + 1)
            a, b = b, a
        else:
            step(kda, layer, pool, inp, slots=strided_table(a), n_chain=s + 1)


def test_decode_slot_zero_with_null_slot_disabled():
    layer = Layer(2, seed=3)
    pool = Pool(layer, 4, 3)
    kda = layer.prepared(conv_dim_first=True, null_slot=-1)
    step(kda, layer, pool, Inputs(layer, 2), slots=np.array([0, 2], np.int32), null_slot=-1)
    assert 0 in pool.ref.written_state


# ---------------------------------------------------------------------------------------
# per_token
# ---------------------------------------------------------------------------------------
_PER_TOKEN = [
    # H, q, layout, conv dtype, lower_bound, conv bias, extra window columns
    (1, 1, "ds", "bf16", None, True, 0),
    (3, 2, "sd", "f32", -5.0, False, 2),
    (4, 3, "ds", "f32", None, False, 1),
    (12, 4, "sd", "bf16", -2.0, True, 0),
    (1, 8, "sd", "bf16", None, True, 3),
    (3, 8, "ds", "bf16", -5.0, True, 0),
    (4, 1, "sd", "f32", None, True, 2),
    (12, 2, "ds", "bf16", None, False, 1),
    (3, 4, "ds", "f32", None, True, 2),
    (4, 8, "sd", "f32", -1.0, False, 0),
]


@pytest.mark.parametrize("H,q,layout,cdt,lb,bias,extra", _PER_TOKEN)
def test_per_token(H, q, layout, cdt, lb, bias, extra):
    rng = np.random.default_rng(7 * H + q)
    layer = Layer(H, conv_bias=bias, lower_bound=lb, seed=H + q)
    B = 3
    cols = q + (1 if extra else 0)  # row width may exceed q: the start column can be any column
    window = W - 2 + q + extra
    n = B * cols + 4
    pool = Pool(layer, n, window, conv_dtype=cdt, layout=layout)
    kda = layer.prepared(conv_dim_first=layout == "ds", policies={("per_token", B, q): kd.Policy()})
    kda.prepare(pool.caches())
    ids = distinct_slots(rng, n, B * cols).reshape(B, cols)
    for s in range(2):
        acc = rng.integers(1, min(window - W + 2, cols) + 1, size=B).astype(np.int32)
        tbl = ids.copy()
        if q > 1:
            # pad ids at t > 0 (not the start column) only skip that token's state write
            for b, padv in ((0, -1), (1, 0)):
                t = next((t for t in range(1, q) if t != acc[b] - 1), None)
                if t is not None:
                    tbl[b, t] = padv
        step(kda, layer, pool, Inputs(layer, B * q, seed=20 + s), mode="per_token", q=q,
             slots=strided_table(tbl, extra_cols=2), accepted=strided_table(acc), n_chain=s + 1)


# ---------------------------------------------------------------------------------------
# record, commit, flush, fused
# ---------------------------------------------------------------------------------------
def _records_setup(H=3, q=3, B=3, lb=None, layout="ds", cdt="bf16", state_dtype="f32", Qr_extra=1, seed=0,
                   explicit_rows=True):
    rng = np.random.default_rng(seed)
    layer = Layer(H, lower_bound=lb, seed=seed + 1)
    n = B + 4
    window = W - 2 + q + 1
    rows_r = n + 2
    pool = Pool(layer, n, window, conv_dtype=cdt, layout=layout, state_dtype=state_dtype,
                records=(rows_r, q + Qr_extra))
    kda = layer.prepared(conv_dim_first=layout == "ds")
    kda.prepare(pool.caches())
    slots = distinct_slots(rng, n, B)
    rows = distinct_slots(rng, rows_r, B) if explicit_rows else None
    return rng, layer, pool, kda, slots, rows


@pytest.mark.parametrize("H,q,lb,layout,explicit_rows", [(1, 1, None, "ds", False), (3, 3, -5.0, "sd", True),
                                                         (4, 4, None, "sd", True), (12, 2, None, "ds", False)])
def test_record_then_commit(H, q, lb, layout, explicit_rows):
    rng, layer, pool, kda, slots, rows = _records_setup(H, q, lb=lb, layout=layout, explicit_rows=explicit_rows,
                                                       seed=H)
    B = len(slots)
    acc = rng.integers(1, 3, size=B).astype(np.int32)
    rr = None if rows is None else strided_table(rows)
    step(kda, layer, pool, Inputs(layer, B * q, seed=5), mode="record", q=q, slots=strided_table(slots),
         accepted=acc, record_rows=rr)
    # commit: counts in [0, q]
    counts = rng.integers(0, q + 1, size=B).astype(np.int32)
    before = pool.snapshot()
    kda.commit(pool.caches(), slots, rr, counts)
    st = kda.status()
    res = ref.commit(layer.ref, pool.ref, slots, None if rows is None else rows, counts)
    assert (st.flags, st.first_request) == (res.flags, res.first)
    check_caches(pool, before, 2, what="commit")


@pytest.mark.parametrize("H,q,pend_mode,lb", [(1, 2, "zero", None), (3, 3, "accepted", -5.0),
                                              (4, 4, "accepted", None), (12, 1, "accepted", None),
                                              (3, 8, "mixed", None)])
def test_fused(H, q, pend_mode, lb):
    rng, layer, pool, kda, slots, rows = _records_setup(H, q, lb=lb, seed=10 + H)
    B = len(slots)
    # a first record-mode verify writes the records the fused step folds
    acc0 = np.ones(B, np.int32)
    step(kda, layer, pool, Inputs(layer, B * q, seed=1), mode="record", q=q, slots=slots, accepted=acc0,
         record_rows=rows)
    acc = rng.integers(1, min(q, 2) + 1, size=B).astype(np.int32)
    for b in range(B):
        p = 0 if pend_mode == "zero" else int(acc[b]) if pend_mode == "accepted" else (int(acc[b]) if b % 2 else 0)
        pool.set_pending(int(rows[b]), p)
    step(kda, layer, pool, Inputs(layer, B * q, seed=2), mode="fused", q=q, slots=strided_table(slots),
         accepted=acc, record_rows=strided_table(rows), n_chain=2)


def test_flush():
    rng, layer, pool, kda, slots, rows = _records_setup(3, 3, seed=4)
    B = len(slots)
    step(kda, layer, pool, Inputs(layer, B * 3, seed=1), mode="record", q=3, slots=slots, record_rows=rows)
    for b in range(B):
        pool.set_pending(int(rows[b]), b % 4)
    before = pool.snapshot()
    kda.flush(pool.caches(), strided_table(slots), strided_table(rows))
    st = kda.status()
    res = ref.commit(layer.ref, pool.ref, slots, rows, None, flush=True)
    assert st.ok and res.flags == 0
    assert (pool.pending[rows] == 0).all()
    check_caches(pool, before, 2, what="flush")


def test_commit_equals_per_token_bitwise():
    """commit(n) after a record-mode verify equals the per-token state after n tokens (§8)."""
    H, q, B = 3, 4, 3
    rng = np.random.default_rng(5)
    layer = Layer(H, lower_bound=-5.0, seed=8)
    n = B * q + 3
    window = W - 2 + q + 1
    pa = Pool(layer, n, window, records=(n, q), seed=9)
    pb = Pool(layer, n, window, records=(n, q), seed=9)
    kda = layer.prepared(conv_dim_first=True)
    ids = distinct_slots(rng, n, B * q).reshape(B, q)
    acc = np.array([1, 2, 3], np.int32)
    for b in range(B):  # the record run's checkpoint ids[b, 0] holds the per-token start state
        pb.state[ids[b, 0]] = pb.state[ids[b, acc[b] - 1]]
    inp = Inputs(layer, B * q, seed=3)
    out_a = np.zeros((B * q, layer.D), np.uint16)
    out_b = np.ones((B * q, layer.D), np.uint16)
    kda.run(inp.projected, out_a, pa.caches(), ids, q=q, accepted=acc, mode="per_token")
    rows = np.array([n - 1, n - 2, n - 3], np.int32)
    kda.run(inp.projected, out_b, pb.caches(), ids[:, 0].copy(), q=q, accepted=acc, record_rows=rows, mode="record")
    assert kda.status().ok
    assert np.array_equal(out_a, out_b), "record-mode outputs differ from per-token outputs"
    counts = np.array([1, 3, 4], np.int32)
    kda.commit(pb.caches(), ids[:, 0].copy(), rows, counts)
    assert kda.status().ok
    for b in range(B):
        assert np.array_equal(bits_of(pb.state[ids[b, 0]]), bits_of(pa.state[ids[b, counts[b] - 1]])), b


@pytest.mark.parametrize("state_dtype", ["f32", "bf16"])
def test_fused_equals_flush_then_fused_bitwise(state_dtype):
    """fused with pending = n equals flush(n) followed by fused with pending = 0 (§8)."""
    H, q, B = 4, 3, 3
    layer = Layer(H, seed=12)
    n = B + 3
    window = W - 2 + q + 1
    pools = [Pool(layer, n, window, records=(n, q), state_dtype=state_dtype, seed=13) for _ in range(2)]
    kda = layer.prepared(conv_dim_first=True)
    slots = np.array([1, 3, 5], np.int32)
    acc = np.array([1, 2, 3], np.int32)
    outs = []
    for i, p in enumerate(pools):
        o = np.zeros((B * q, layer.D), np.uint16)
        kda.run(Inputs(layer, B * q, seed=1).projected, o, p.caches(), slots, q=q, mode="record")
        p.pending[slots] = acc
        if i == 1:
            kda.flush(p.caches(), slots)
            assert (p.pending[slots] == 0).all()
        kda.run(Inputs(layer, B * q, seed=2).projected, o, p.caches(), slots, q=q, accepted=acc, mode="fused")
        outs.append(o)
    assert kda.status().ok
    assert np.array_equal(outs[0], outs[1])
    a, b = pools[0].snapshot(), pools[1].snapshot()
    for k in a:
        assert np.array_equal(bits_of(a[k]), bits_of(b[k])), k


# ---------------------------------------------------------------------------------------
# bf16 state (SPEC §9)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["decode", "per_token"])
def test_bf16_state(mode):
    rng = np.random.default_rng(3)
    H, B = 3, 3
    q = 1 if mode == "decode" else 3
    layer = Layer(H, seed=31)
    n = B * q + 3
    pool = Pool(layer, n, W - 2 + q, state_dtype="bf16", layout="sd")
    kda = layer.prepared()
    ids = distinct_slots(rng, n, B * q)
    slots = ids if mode == "decode" else ids.reshape(B, q)
    acc = None if mode == "decode" else np.array([1, 2, 3], np.int32)
    step(kda, layer, pool, Inputs(layer, B * q), mode=mode, q=q, slots=slots, accepted=acc)


def test_bf16_state_fused():
    """Fused with bf16 state: the folded checkpoint is stored as bf16 and the verify continues
    from what was stored; the reference continues from the package's stored checkpoint."""
    rng, layer, pool, kda, slots, rows = _records_setup(3, 3, state_dtype="bf16", seed=6)
    B = len(slots)
    step(kda, layer, pool, Inputs(layer, B * 3, seed=1), mode="record", q=3, slots=slots, record_rows=rows)
    acc = np.array([1, 2, 3], np.int32)
    pool.pending[rows] = acc
    pool.ref.pending[rows] = acc
    # reference: fold in float64, round, compare with the package's stored checkpoint...
    chk = ref.RefCaches(conv=pool.ref.conv.copy(), state=pool.ref.state.copy(), correction=pool.ref.correction.copy(),
                        key_gate=pool.ref.key_gate.copy(), pending=pool.ref.pending.copy(), state_bf16=True)
    ref.commit(layer.ref, chk, slots, rows, None, flush=True)
    out = np.zeros((B * 3, layer.D), np.uint16)
    inp = Inputs(layer, B * 3, seed=2)
    before = pool.snapshot()
    kda.run(inp.projected, out, pool.caches(), slots, q=3, accepted=acc, record_rows=rows, mode="fused")
    assert kda.status().ok
    from harness import check_bf16_state
    check_bf16_state(pool.state[slots], chk.state[slots], 2e-5, "fused: folded bf16 checkpoint")
    # ...then continue the reference from exactly what the package stored
    pool.ref.state[slots] = f64(pool.state[slots])
    pool.ref.pending[rows] = acc
    res = ref.step(layer.ref, inp.ref, pool.ref, mode="record", q=3, slots=slots, accepted=acc, record_rows=rows)
    pool.ref.pending[rows] = 0
    check_out(out, res.out, res.pads, 3)
    check_rel(pool.correction[rows], pool.ref.correction[rows], 2e-5, "records u")
    check_rel(pool.key_gate[rows], pool.ref.key_gate[rows], 2e-5, "records (k, g)")
    assert (pool.pending[rows] == 0).all()
    # the stored checkpoints against the float64 fold (not against the copy the reference
    # continued from), the rest of the caches against the continued reference
    pool.ref.state[slots] = chk.state[slots]
    pool.ref.written_state = set(int(s) for s in slots)
    pool.ref.written_rows = set(int(r) for r in rows)
    pool.ref.written_conv = set(int(s) for s in slots)
    check_caches(pool, before, 2, what="fused bf16")


# ---------------------------------------------------------------------------------------
# gate mode 2, run_views, pitch
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_f_b", [False, True])
@pytest.mark.parametrize("mode", ["decode", "per_token"])
def test_gate_mode_2_run_views(with_f_b, mode):
    rng = np.random.default_rng(2)
    H, B = 3, 3
    q = 1 if mode == "decode" else 2
    layer = Layer(H, f_b=with_f_b, seed=21)
    n = B * q + 2
    pool = Pool(layer, n, W - 2 + q, layout="sd")
    pol = {(mode, B, q): kd.Policy(gate_mode=2)} if with_f_b else None
    kda = layer.prepared(policies=pol)
    kda.prepare(pool.caches())
    assert kda.plan(mode, B, q, pool.caches())["gate_mode"] == 2
    ids = distinct_slots(rng, n, B * q)
    slots = ids if mode == "decode" else ids.reshape(B, q)
    inp = Inputs(layer, B * q, gate_mode=2, seed=4)
    step(kda, layer, pool, inp, mode=mode, q=q, slots=slots, gate_mode=2, views=True)
    step(kda, layer, pool, Inputs(layer, B * q, gate_mode=2, seed=5), mode=mode, q=q, slots=slots, gate_mode=2,
         n_chain=2)


def test_run_views_gate_mode_0():
    layer = Layer(4, seed=22)
    pool = Pool(layer, 6, 3, conv_dtype="f32")
    kda = layer.prepared(conv_dim_first=True)
    step(kda, layer, pool, Inputs(layer, 4, seed=1), slots=np.array([1, 2, 3, 5], np.int32), views=True)


def test_pitch_with_garbage_padding():
    layer = Layer(3, seed=23)
    pool = Pool(layer, 5, 3)
    B = 3
    inp = Inputs(layer, B, pitch_extra=13, seed=3)
    kda = layer.prepared(conv_dim_first=True, policies={("decode", B, 1): kd.Policy(pitch=inp.pitch)})
    kda.prepare(pool.caches())
    step(kda, layer, pool, inp, slots=np.array([1, 2, 4], np.int32))
    # a packed tensor whose row stride is not the policy's pitch is rejected
    wider = np.zeros((B, inp.pitch + 8), np.uint16)
    wider[:, :inp.pitch] = inp.projected
    with pytest.raises(ValueError, match="projected"):
        kda.run(wider, np.zeros((B, layer.D), np.uint16), pool.caches(), np.array([1, 2, 4], np.int32))


def test_projected_column_slice():
    """A packed tensor that is a column slice of a wider buffer (row stride > columns)."""
    layer = Layer(2, seed=24)
    pool = Pool(layer, 5, 3)
    inp = Inputs(layer, 2, seed=3)
    buf = np.full((2, inp.pitch + 24), 0x7FC0, np.uint16)
    buf[:, 8:8 + inp.pitch] = inp.projected
    inp.projected = buf[:, 8:8 + inp.pitch]
    kda = layer.prepared(conv_dim_first=True)
    step(kda, layer, pool, inp, slots=np.array([3, 1], np.int32))


# ---------------------------------------------------------------------------------------
# pads
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["decode", "per_token", "record", "fused"])
def test_pad_requests(mode):
    """Pad requests (negative id, null slot) give zero rows and write nothing."""
    rng = np.random.default_rng(1)
    H, B = 3, 5
    q = 1 if mode == "decode" else 2
    layer = Layer(H, seed=41)
    n = B * q + 4
    pool = Pool(layer, n, W - 2 + q, records=(n, q) if mode in ("record", "fused") else None, layout="sd")
    kda = layer.prepared()
    ids = distinct_slots(rng, n, B * q).reshape(B, q)
    ids[1, 0] = -1
    ids[3, 0] = 0  # the null slot
    ids[4, 0] = -123
    acc = np.array([1, 2, 1, 2, 2], np.int32) if q > 1 else None
    if mode == "decode":
        slots = ids[:, 0].copy()
    elif mode == "per_token":
        slots = ids
    else:
        slots = ids[:, :1]  # [B, 1]
    rows = None
    if mode in ("record", "fused"):
        rows = np.array([n - 1, -5, n - 2, 10 ** 6, 0], np.int32)  # pads' rows are never read
        if mode == "fused":
            pool.set_pending(n - 1, 0)
            pool.set_pending(n - 2, 1)
            acc = np.array([1, 2, 1, 2, 2], np.int32)
    step(kda, layer, pool, Inputs(layer, B * q), mode=mode, q=q, slots=slots, accepted=acc, record_rows=rows)


# ---------------------------------------------------------------------------------------
# caller errors found in the data (SPEC §4)
# ---------------------------------------------------------------------------------------
def _error_case(kind):
    """Returns (mode, q, slots, accepted, out_slots, record_rows, pending{row: v}, expected flag, window_extra)."""
    n = 16
    B = 4
    base = np.arange(1, 1 + B, dtype=np.int32)
    pt = np.arange(1, 1 + B * 3, dtype=np.int32).reshape(B, 3)
    rows = np.array([12, 13, 14, 15], np.int32)
    if kind == "slot_range":
        s = base.copy(); s[1] = n; s[3] = n + 5
        return "decode", 1, s, None, None, None, {}, kd.SLOT_RANGE, 0
    if kind == "out_slot_range":
        o = base + 8; o[2] = n
        return "decode", 1, base, None, o, None, {}, kd.ROW_RANGE, 0
    if kind == "out_slot_null":
        o = base + 8; o[1] = 0
        return "decode", 1, base, None, o, None, {}, kd.ROW_RANGE, 0
    if kind == "accepted_decode":
        a = np.ones(B, np.int32); a[2] = 2
        return "decode", 1, base, a, None, None, {}, kd.ACCEPTED, 0
    if kind == "accepted_zero":
        a = np.ones(B, np.int32); a[1] = 0
        return "per_token", 3, pt, a, None, None, {}, kd.ACCEPTED, 0
    if kind == "accepted_window":
        a = np.ones(B, np.int32); a[3] = 4  # window - W + 2 = 3
        return "per_token", 3, np.concatenate([pt, pt + 20], axis=1) % n, a, None, None, {}, kd.ACCEPTED, 0
    if kind == "accepted_row_width":
        a = np.ones(B, np.int32); a[2] = 4  # window allows 4 + ..., row has 3 columns
        return "per_token", 3, pt, a, None, None, {}, kd.ACCEPTED, 2
    if kind == "pad_start":
        s = pt.copy(); s[1, 1] = -1
        a = np.ones(B, np.int32); a[1] = 2
        return "per_token", 3, s, a, None, None, {}, kd.PAD_START, 0
    if kind == "pad_start_null":
        s = pt.copy(); s[2, 2] = 0
        a = np.ones(B, np.int32); a[2] = 3
        return "per_token", 3, s, a, None, None, {}, kd.PAD_START, 0
    if kind == "token_slot_range":
        s = pt.copy(); s[2, 1] = n + 1
        return "per_token", 3, s, None, None, None, {}, kd.SLOT_RANGE, 0
    if kind == "record_row_range":
        r = rows.copy(); r[1] = n
        return "record", 2, base, None, None, r, {}, kd.ROW_RANGE, 0
    if kind == "record_row_null":
        r = rows.copy(); r[2] = 0
        return "record", 2, base, None, None, r, {}, kd.ROW_RANGE, 0
    if kind == "record_row_negative":
        r = rows.copy(); r[0] = -3
        return "record", 2, base, None, None, r, {}, kd.ROW_RANGE, 0
    if kind == "pending_over_accepted":
        # any count up to Qr is valid (append steps leave counts other than accepted): not flagged
        a = np.full(B, 2, np.int32)
        return "fused", 2, base, a, None, rows, {12: 2, 13: 1, 14: 0, 15: 2}, 0, 0
    if kind == "pending_over_qr":
        a = np.full(B, 3, np.int32)
        return "fused", 2, base, a, None, rows, {12: 0, 13: 0, 14: 3, 15: 0}, kd.PENDING, 1
    raise KeyError(kind)


_ERROR_KINDS = ["slot_range", "out_slot_range", "out_slot_null", "accepted_decode", "accepted_zero",
                "accepted_window", "accepted_row_width", "pad_start", "pad_start_null", "token_slot_range",
                "record_row_range", "record_row_null", "record_row_negative", "pending_over_accepted",
                "pending_over_qr"]


@pytest.mark.parametrize("kind", _ERROR_KINDS)
def test_data_errors(kind):
    mode, q, slots, acc, out_slots, rows, pend, flag, wextra = _error_case(kind)
    n = 16
    layer = Layer(2, seed=51)
    records = (n, 2) if mode in ("record", "fused") else None
    pool = Pool(layer, n, W - 2 + q + wextra, records=records)
    for r, v in pend.items():
        pool.set_pending(r, v)
    kda = layer.prepared(conv_dim_first=True)
    B = slots.shape[0]
    out, res = step(kda, layer, pool, Inputs(layer, B * q), mode=mode, q=q, slots=strided_table(slots),
                    accepted=acc, out_slots=out_slots, record_rows=rows, expect_flags=flag)
    assert (res.first >= 0) if flag else (res.first == -1)


def test_data_errors_combined_lowest_index():
    layer = Layer(2, seed=52)
    n = 12
    pool = Pool(layer, n, 3)
    kda = layer.prepared(conv_dim_first=True)
    slots = np.array([1, 2, n + 3, 4, 5], np.int32)
    out_slots = np.array([6, 7, 8, n, 9], np.int32)
    out, res = step(kda, layer, pool, Inputs(layer, 5), slots=slots, out_slots=out_slots,
                    expect_flags=kd.SLOT_RANGE | kd.ROW_RANGE)
    assert res.first == 2


@pytest.mark.parametrize("kind", ["count_over_qr", "count_negative", "row_range", "slot_range"])
def test_commit_errors(kind):
    rng, layer, pool, kda, slots, rows = _records_setup(2, 2, B=4, seed=61)
    step(kda, layer, pool, Inputs(layer, 8), mode="record", q=2, slots=slots, record_rows=rows)
    counts = np.array([1, 2, 1, 2], np.int32)
    slots, rows = slots.copy(), rows.copy()
    flag = {"count_over_qr": kd.PENDING, "count_negative": kd.PENDING, "row_range": kd.ROW_RANGE,
            "slot_range": kd.SLOT_RANGE}[kind]
    if kind == "count_over_qr":
        counts[2] = pool.correction.shape[2] + 1
    elif kind == "count_negative":
        counts[1] = -1
    elif kind == "row_range":
        rows[3] = pool.correction.shape[0]
    else:
        slots[2] = pool.n + 1
    before = pool.snapshot()
    kda.commit(pool.caches(), slots, rows, counts)
    st = kda.status()
    res = ref.commit(layer.ref, pool.ref, slots, rows, counts)
    assert st.flags == flag == res.flags and st.first_request == res.first
    check_caches(pool, before, 2, what="commit with errors")
    assert kda.status().ok


def test_flush_pending_error():
    rng, layer, pool, kda, slots, rows = _records_setup(2, 2, B=3, seed=62)
    step(kda, layer, pool, Inputs(layer, 6), mode="record", q=2, slots=slots, record_rows=rows)
    pool.set_pending(int(rows[0]), 1)
    pool.set_pending(int(rows[1]), 99)
    pool.set_pending(int(rows[2]), 2)
    before = pool.snapshot()
    kda.flush(pool.caches(), slots, rows)
    st = kda.status()
    res = ref.commit(layer.ref, pool.ref, slots, rows, None, flush=True)
    assert st.flags == kd.PENDING == res.flags and st.first_request == 1 == res.first
    assert pool.pending[rows[1]] == 99  # the erroneous request writes nothing
    check_caches(pool, before, 2, what="flush with errors")


# ---------------------------------------------------------------------------------------
# host-side errors
# ---------------------------------------------------------------------------------------
def _host_setup():
    layer = Layer(2, seed=71)
    pool = Pool(layer, 6, 3, records=(6, 2))
    kda = layer.prepared(conv_dim_first=True)
    inp = Inputs(layer, 2)
    out = np.zeros((2, layer.D), np.uint16)
    return layer, pool, kda, inp, out


def _c(pool, **kw):
    d = dict(conv_state=pool.conv, state=pool.state, correction=pool.correction, key_gate=pool.key_gate,
             pending=pool.pending)
    d.update(kw)
    return d


_HOST_ERRORS = {
    "out dtype": (lambda L, P, k, i, o: k.run(i.projected, o.astype(np.float32), P.caches(), np.array([1, 2], np.int32)), "out"),
    "projected dtype": (lambda L, P, k, i, o: k.run(i.projected.astype(np.float32), o, P.caches(), np.array([1, 2], np.int32)), "projected"),
    "slots dtype": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1, 2], np.int64)), "slots"),
    "slots bool": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([True, False])), "slots"),
    "slots list": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), [1, 2]), "slots"),
    "state dtype": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, state=P.state.astype(np.float64)), np.array([1, 2], np.int32)), "state"),
    "conv dtype": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, conv_state=P.conv.astype(np.int32)), np.array([1, 2], np.int32)), "conv_state"),
    "accepted dtype": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1, 2], np.int32), accepted=np.ones(2, np.float32)), "accepted"),
    "slots rank": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.ones((2, 1, 1), np.int32)), "slots"),
    "out rank": (lambda L, P, k, i, o: k.run(i.projected, o.reshape(-1), P.caches(), np.array([1, 2], np.int32)), "out"),
    "out shape": (lambda L, P, k, i, o: k.run(i.projected, o[:, :-128], P.caches(), np.array([1, 2], np.int32)), "out"),
    "out rows": (lambda L, P, k, i, o: k.run(i.projected, o[:1], P.caches(), np.array([1, 2], np.int32)), "out"),
    "slots too short": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1], np.int32)), "slots"),
    "state heads": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, state=np.zeros((6, 3, 128, 128), np.float32)), np.array([1, 2], np.int32)), "state"),
    "state inner strides": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, state=P.state.transpose(0, 1, 3, 2)), np.array([1, 2], np.int32)), "state"),
    "conv channels": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, conv_state=P.conv[:, :-1]), np.array([1, 2], np.int32)), "conv_state"),
    "projected inner stride": (lambda L, P, k, i, o: k.run(np.repeat(i.projected, 2, axis=1)[:, ::2], o, P.caches(), np.array([1, 2], np.int32)), "projected"),
    "projected narrow": (lambda L, P, k, i, o: k.run(i.projected[:, :-1], o, P.caches(), np.array([1, 2], np.int32)), "projected"),
    "out inner stride": (lambda L, P, k, i, o: k.run(i.projected, np.zeros((2, 2 * L.D), np.uint16)[:, ::2], P.caches(), np.array([1, 2], np.int32)), "out"),
    # rows that overlap (row stride D/2 elements < D): writing them would lose outputs
    "out rows overlap": (lambda L, P, k, i, o: k.run(i.projected, np.lib.stride_tricks.as_strided(np.zeros(2 * L.D, np.uint16), shape=(2, L.D), strides=(L.D, 2)), P.caches(), np.array([1, 2], np.int32)), "out"),
    "out read-only": (lambda L, P, k, i, o: k.run(i.projected, np.lib.stride_tricks.as_strided(o, writeable=False), P.caches(), np.array([1, 2], np.int32)), "out"),
    "q = 0": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([[1, 2]], np.int32), q=0, mode="per_token"), "q"),
    "q = 17": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([[1, 2]], np.int32), q=17, mode="per_token"), "q"),
    "decode q = 2": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1], np.int32), q=2), "q"),
    "rows not multiple of q": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.ones((1, 3), np.int32), q=3, mode="per_token"), "inputs"),
    "window too small": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([[1, 2]], np.int32), q=2, mode="per_token"), "conv_state"),
    "per_token slots width": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, conv_state=np.zeros((6, 768, 4), np.uint16)), np.array([[1], [2]], np.int32)[:1], q=2, mode="per_token"), "slots"),
    "mode": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1, 2], np.int32), mode="prefill"), "mode"),
    "out_slots in verify": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([[1], [2]], np.int32), mode="per_token", out_slots=np.array([3, 4], np.int32)), "out_slots"),
    "record without records": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, correction=None, key_gate=None), np.array([1, 2], np.int32), mode="record"), "correction"),
    "record Qr < q": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, conv_state=np.zeros((6, 768, 4), np.uint16), correction=np.zeros((6, 2, 1, 128), np.float32), key_gate=np.zeros((6, 2, 1, 256), np.float32)), np.array([1], np.int32), q=2, mode="record"), "correction"),
    "fused without pending": (lambda L, P, k, i, o: k.run(i.projected, o, _c(P, pending=None), np.array([1, 2], np.int32), mode="fused"), "pending"),
    "caches type": (lambda L, P, k, i, o: k.run(i.projected, o, [P.conv, P.state], np.array([1, 2], np.int32)), "caches"),
    "caches key": (lambda L, P, k, i, o: k.run(i.projected, o, dict(conv_state=P.conv, state=P.state, records=1), np.array([1, 2], np.int32)), "caches"),
    "stream type": (lambda L, P, k, i, o: k.run(i.projected, o, P.caches(), np.array([1, 2], np.int32), stream="s"), "stream"),
    "commit counts dtype": (lambda L, P, k, i, o: k.commit(P.caches(), np.array([1, 2], np.int32), None, np.ones(2, np.int64)), "counts"),
    "commit counts missing": (lambda L, P, k, i, o: k.commit(P.caches(), np.array([1, 2], np.int32), None, None), "counts"),
    "flush without pending": (lambda L, P, k, i, o: k.flush(_c(P, pending=None), np.array([1, 2], np.int32)), "pending"),
}


@pytest.mark.parametrize("name", sorted(_HOST_ERRORS))
def test_host_errors(name):
    layer, pool, kda, inp, out = _host_setup()
    fn, operand = _HOST_ERRORS[name]
    before = pool.snapshot()
    with pytest.raises((TypeError, ValueError)) as ei:
        fn(layer, pool, kda, inp, out)
    assert operand in str(ei.value), f"message does not name '{operand}': {ei.value}"
    after = pool.snapshot()
    for k in before:
        assert np.array_equal(bits_of(before[k]), bits_of(after[k]))
    assert kda.status().ok


def test_dtype_errors_are_type_errors():
    layer, pool, kda, inp, out = _host_setup()
    with pytest.raises(TypeError, match="out: expected dtype bf16"):
        kda.run(inp.projected, out.astype(np.float32), pool.caches(), np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="slots"):
        kda.run(inp.projected, out, pool.caches(), np.array([1, 2], np.int64))


@pytest.mark.parametrize("what", ["A_log dtype", "dt_bias shape", "conv_weight shape", "f_b_weight dtype",
                                  "conv_bias shape", "norm_weight shape", "lower_bound", "eps", "null_slot",
                                  "policy variant", "policy key", "policy gate", "A_log missing"])
def test_constructor_errors(what):
    layer = Layer(2, seed=72)
    w = layer.weights()
    kw = {}
    operand = what.split()[0]
    if what == "A_log dtype":
        w["A_log"] = w["A_log"].astype(np.float64)
    elif what == "dt_bias shape":
        w["dt_bias"] = w["dt_bias"][:-1]
    elif what == "conv_weight shape":
        w["conv_weight"] = w["conv_weight"][:, :, :1]
    elif what == "f_b_weight dtype":
        w["f_b_weight"] = w["f_b_weight"].astype(np.float32)
    elif what == "conv_bias shape":
        w["conv_bias"] = w["conv_bias"][:10]
    elif what == "norm_weight shape":
        w["norm_weight"] = np.ones(64, np.float32)
    elif what == "lower_bound":
        kw["lower_bound"] = 0.5
    elif what == "eps":
        kw["eps"] = 0.0
    elif what == "null_slot":
        kw["null_slot"] = -2
    elif what == "policy variant":
        operand = "variant"
        kw["policies"] = {("decode", 1, 1): {"variant": "turbo"}}
    elif what == "policy key":
        operand = "policies"
        kw["policies"] = {("decode", 1): kd.Policy()}
    elif what == "policy gate":
        operand = "gate_mode"
        kw["policies"] = {("decode", 1, 1): {"gate_mode": 5}}
    elif what == "A_log missing":
        w["A_log"] = None
    with pytest.raises((TypeError, ValueError)) as ei:
        kd.PreparedKda(**w, **kw)
    assert operand in str(ei.value), str(ei.value)


def test_forced_gpu_variant_on_cpu_raises_at_prepare():
    layer = Layer(2, seed=73)
    pool = Pool(layer, 4, 3)
    kda = layer.prepared(conv_dim_first=True, policies={("decode", 2, 1): kd.Policy(variant="split")})
    with pytest.raises(ValueError, match="policy for step"):
        kda.prepare(pool.caches())


def test_rows_zero_is_noop():
    layer = Layer(3, seed=74)
    pool = Pool(layer, 4, W - 2 + 2, records=(4, 2))
    kda = layer.prepared(conv_dim_first=True)
    before = pool.snapshot()
    inp = Inputs(layer, 0)
    out = np.zeros((0, layer.D), np.uint16)
    for mode, q, slots in (("decode", 1, np.zeros(0, np.int32)), ("per_token", 2, np.zeros((0, 2), np.int32)),
                           ("record", 2, np.zeros(0, np.int32)), ("fused", 2, np.zeros(0, np.int32))):
        kda.run(inp.projected, out, pool.caches(), slots, q=q, mode=mode)
    kda.run_views(*(inp.raw[k] for k in ("qkv", "out_gate", "gate_in", "beta")), out, pool.caches(),
                  np.zeros(0, np.int32))
    kda.commit(pool.caches(), np.zeros(0, np.int32), None, np.zeros(0, np.int32))
    kda.flush(pool.caches(), np.zeros(0, np.int32))
    assert kda.status().ok
    after = pool.snapshot()
    for k in before:
        assert np.array_equal(bits_of(before[k]), bits_of(after[k])), k


# ---------------------------------------------------------------------------------------
# numerics corner cases, determinism, long runs
# ---------------------------------------------------------------------------------------
def test_extreme_inputs_stay_finite():
    """z up to ±1e4, A_log = 5, beta logits ±50, all-zero q and k, windows of zeros (§8)."""
    H, B = 3, 4
    layer = Layer(H, f_b=False, conv_bias=False, seed=81, a_log_range=(4.999, 5.0))
    pool = Pool(layer, 6, 3, conv_dtype="f32")
    kda = layer.prepared(conv_dim_first=True)
    inp = Inputs(layer, B, gate_mode=2, seed=5)
    rng = np.random.default_rng(0)
    z = rng.choice([-1e4, 1e4, -30.0, 30.0, 0.0], size=inp.raw["gate_in"].shape)
    inp.raw["gate_in"][...] = bf16(z)
    inp.raw["beta"][...] = bf16(rng.choice([-50.0, 50.0], size=inp.raw["beta"].shape))
    inp.raw["qkv"][0] = 0  # request 0: all-zero q, k, v with a zero window
    pool.conv[1] = 0
    pool.ref.conv[1] = 0
    inp.projected[:, 4 * layer.D:4 * layer.D + layer.D] = inp.raw["gate_in"]
    inp.projected[:, 5 * layer.D:5 * layer.D + H] = inp.raw["beta"]
    inp.projected[0, :3 * layer.D] = 0
    inp.ref = {k: f64(v) for k, v in inp.raw.items()}
    out, _ = step(kda, layer, pool, inp, slots=np.array([1, 2, 3, 4], np.int32), gate_mode=2)
    assert np.isfinite(f64(out)).all()
    assert np.isfinite(pool.state).all()


@pytest.mark.parametrize("W", [2, 3, 5])
@pytest.mark.parametrize("eps", [1e-6, 1e-2])
@pytest.mark.parametrize("mode", ["decode", "per_token", "record", "fused"])
def test_eps_and_conv_width(mode, eps, W):
    """The RMSNorm epsilon and the conv width are the layer's (SPEC §1: the CPU backend takes
    any W >= 2): chained steps checked against float64."""
    rng = np.random.default_rng(W * 10 + int(-np.log10(eps)))
    H, B = 2, 3
    q = 1 if mode == "decode" else 3
    layer = Layer(H, W=W, eps=eps, lower_bound=-4.0 if W == 3 else None, seed=60 + W)
    n = B * q + 3
    window = W - 2 + q + 1
    pool = Pool(layer, n, window, records=(n, q) if mode in ("record", "fused") else None, layout="sd" if W % 2 else "ds")
    kda = layer.prepared(conv_dim_first=W % 2 == 0)
    assert kda.taps == W and kda.eps == pytest.approx(eps)
    ids = distinct_slots(rng, n, B * q)
    slots = ids.reshape(B, q) if mode == "per_token" else ids[:B]
    for s in range(2):
        acc = rng.integers(1, min(q, window - W + 2) + 1, size=B).astype(np.int32)
        if mode == "fused":
            for b in range(B):
                pool.set_pending(int(slots[b]), int(acc[b]) if s else 0)
        step(kda, layer, pool, Inputs(layer, B * q, seed=70 + s), mode=mode, q=q, slots=slots, accepted=acc,
             n_chain=s + 1)


@pytest.mark.parametrize("tiny", [1e-3, 1e-4])
@pytest.mark.parametrize("mode", ["decode", "per_token", "record", "fused"])
def test_tiny_post_conv_q_and_k(mode, tiny):
    """Post-conv q and k of about 1e-3 and 1e-4 per element: Σy² near the l2 norm's 1e-6."""
    from harness import tiny_qk_scale

    rng = np.random.default_rng(int(-np.log10(tiny)))
    H, B = 3, 3
    q = 1 if mode == "decode" else 3
    s_qk = tiny_qk_scale(tiny)
    layer = Layer(H, eps=1e-4, seed=95, qk_scale=s_qk)
    n = B * q + 3
    pool = Pool(layer, n, W - 2 + q, records=(n, q) if mode in ("record", "fused") else None, qk_scale=s_qk)
    kda = layer.prepared(conv_dim_first=True)
    ids = distinct_slots(rng, n, B * q)
    slots = ids.reshape(B, q) if mode == "per_token" else ids[:B]
    acc = rng.integers(1, q + 1, size=B).astype(np.int32)
    if mode == "fused":
        for b in range(B):
            pool.set_pending(int(slots[b]), int(acc[b]))
    _, res = step(kda, layer, pool, Inputs(layer, B * q, seed=96, qk_scale=s_qk), mode=mode, q=q, slots=slots,
                  accepted=acc)
    rms = np.sqrt(np.array(res.qk_sumsq) / ref.K)
    assert tiny / 5 < rms[1] < tiny * 5, f"post-conv q/k rms {rms}, meant to be about {tiny}"


def test_determinism_bitwise():
    layer = Layer(4, seed=82)
    res = []
    for _ in range(2):
        pool = Pool(layer, 8, 5, records=(8, 3), seed=3, layout="sd")
        kda = layer.prepared(conv_dim_first=False)
        out = np.zeros((9, layer.D), np.uint16)
        slots = np.array([[1, 2, 3], [4, 5, 6], [7, -1, 0]], np.int32)
        kda.run(Inputs(layer, 9, seed=1).projected, out, pool.caches(), slots, q=3,
                accepted=np.array([1, 2, 3], np.int32), mode="per_token")
        res.append((out.copy(), pool.snapshot()))
    assert np.array_equal(res[0][0], res[1][0])
    for k in res[0][1]:
        assert np.array_equal(bits_of(res[0][1][k]), bits_of(res[1][1][k]))


def test_long_decode_drift(record_property):
    """1,000 chained decode steps: every step's output within the SPEC §8 bound, the state
    drift vs float64 at the end ≤ 1e-3."""
    layer = Layer(1, seed=83, eps=3e-4)
    pool = Pool(layer, 3, 3)
    kda = layer.prepared(conv_dim_first=True)
    slots = np.array([1, 2], np.int32)
    out = np.zeros((2, layer.D), np.uint16)
    rng = np.random.default_rng(0)
    rel = 0.0
    worst = 0.0
    for s in range(1000):
        inp = Inputs(layer, 2, seed=int(rng.integers(1 << 30)))
        kda.run(inp.projected, out, pool.caches(), slots)
        res = ref.step(layer.ref, inp.ref, pool.ref, mode="decode", q=1, slots=slots)
        worst = max(worst, check_out(out, res.out, res.pads, 1, what=f"decode step {s}: out"))
    assert kda.status().ok
    record_property("decode_out_ratio_1000", worst)
    mx = np.abs(pool.ref.state[1:]).max()
    rel = float(np.abs(pool.state[1:] - pool.ref.state[1:]).max() / mx)
    record_property("decode_drift_1000", rel)
    print(f"state drift after 1000 decode steps: {rel:.3e}")
    assert rel <= 1e-3


def test_long_verify_commit_drift(record_property):
    """200 record-mode verify + commit rounds: every round's output within the SPEC §8 bound
    and its records within the long-run 1e-3, the state drift vs float64 at the end ≤ 1e-3."""
    layer = Layer(1, lower_bound=-5.0, seed=84, eps=2e-3)
    q = 3
    pool = Pool(layer, 3, W - 2 + q + 1, records=(3, q))
    kda = layer.prepared(conv_dim_first=True)
    slots = np.array([1, 2], np.int32)
    out = np.zeros((2 * q, layer.D), np.uint16)
    rng = np.random.default_rng(1)
    for s in range(200):
        acc = rng.integers(1, q + 1, size=2).astype(np.int32) if s else np.ones(2, np.int32)
        inp = Inputs(layer, 2 * q, seed=int(rng.integers(1 << 30)))
        kda.run(inp.projected, out, pool.caches(), slots, q=q, accepted=acc, mode="record")
        res = ref.step(layer.ref, inp.ref, pool.ref, mode="record", q=q, slots=slots, accepted=acc)
        check_out(out, res.out, res.pads, q, what=f"verify round {s}: out")
        check_rel(pool.correction[slots], pool.ref.correction[slots], 1e-3, f"verify round {s}: records u")
        counts = rng.integers(1, q + 1, size=2).astype(np.int32)
        kda.commit(pool.caches(), slots, None, counts)
        ref.commit(layer.ref, pool.ref, slots, None, counts)
    assert kda.status().ok
    mx = np.abs(pool.ref.state[1:]).max()
    rel = float(np.abs(pool.state[1:] - pool.ref.state[1:]).max() / mx)
    record_property("verify_commit_drift_200", rel)
    print(f"state drift after 200 verify + commit rounds: {rel:.3e}")
    assert rel <= 1e-3


# ---------------------------------------------------------------------------------------
# weights, policies, plans, helpers, API details
# ---------------------------------------------------------------------------------------
def test_process_weights_after_loading():
    layer = Layer(2, seed=85)
    pool = Pool(layer, 5, 3)
    w = layer.weights()
    kda = kd.PreparedKda(**w, conv_dim_first=True)
    # the conv weight is copied: changing it without reloading has no effect
    w["conv_weight"][...] *= 2.0
    step(kda, layer, pool, Inputs(layer, 2, seed=1), slots=np.array([1, 2], np.int32))
    # reload in place: A_log / dt_bias are borrowed, conv is re-derived
    w["A_log"][...] += 0.5
    w["dt_bias"][...] -= 0.25
    kda.process_weights_after_loading(**w)
    layer.ref.conv_w = w["conv_weight"][:, 0, :].astype(np.float64)
    layer.ref.A_log = w["A_log"].astype(np.float64)
    layer.ref.dt_bias = w["dt_bias"].astype(np.float64)
    step(kda, layer, pool, Inputs(layer, 2, seed=2), slots=np.array([1, 2], np.int32), n_chain=2)
    with pytest.raises(ValueError, match="A_log"):
        kda.process_weights_after_loading(**{**w, "A_log": np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="f_b_weight"):
        kda.process_weights_after_loading(**{**w, "f_b_weight": None})


def test_weights_kept_alive():
    import gc

    layer = Layer(2, seed=86)
    pool = Pool(layer, 4, 3)
    w = {k: (None if v is None else v.copy()) for k, v in layer.weights().items()}
    kda = kd.PreparedKda(**w, conv_dim_first=True)
    del w
    gc.collect()
    for _ in range(3):  # churn allocations that could reuse freed memory
        _junk = [np.full(1 << 16, 1e30, np.float32) for _ in range(8)]
    step(kda, layer, pool, Inputs(layer, 2), slots=np.array([1, 3], np.int32))


def test_policies_and_plan():
    layer = Layer(3, seed=87)
    pool = Pool(layer, 4, 4, records=(4, 2))
    pols = {("decode", 2, 1): kd.Policy(variant="cpu"), ("record", 2, 2): kd.Policy(gate_mode=1),
            ("fused", 2, 1): {"pitch": 0}}
    kda = layer.prepared(conv_dim_first=True, policies=pols)
    kda.prepare(pool.caches())
    p = kda.plan("decode", 2, 1, pool.caches())
    assert p["variant"] == "cpu" and p["mode"] == "decode" and p["B"] == 2 and p["q"] == 1
    assert isinstance(p["description"], str) and "cpu" in p["description"]
    assert kda.plan("record", 2, 2, pool.caches())["gate_mode"] in (0, 1)
    assert kda.plan("per_token", 7, 2, pool.caches())["variant"] == "cpu"  # unlisted key: default policy
    assert set(kda.policies) == set(pols)
    assert kd.Policy(pitch=3, gate_mode=2, variant="wide") == kd.Policy(pitch=3, gate_mode="2", variant="wide")
    assert kd.Policy() != kd.Policy(gate_mode=0)
    assert "wide" in repr(kd.Policy(variant="wide"))
    # the narrow form's switch (Wide's bf16 q = 1 decode / per_token CTA form): part of the value, checked by name
    assert kd.Policy().narrow == "auto" and kd.Policy(narrow="on") != kd.Policy(narrow="off")
    assert kd.Policy(narrow="off") == kd.Policy(narrow="off") and "narrow='on'" in repr(kd.Policy(narrow="on"))
    assert hash(kd.Policy(narrow="on")) != hash(kd.Policy())
    with pytest.raises(ValueError, match="narrow"):
        kd.Policy(narrow="wide")
    with pytest.raises(ValueError, match="mode"):
        kda.plan("prefill", 1, 1, pool.caches())


def test_status_object():
    layer = Layer(1, seed=88)
    pool = Pool(layer, 4, 3)
    kda = layer.prepared(conv_dim_first=True)
    s = kda.status()
    assert s.ok and s.flags == 0 and s.first_request == -1 and s.describe() == "ok"
    out = np.zeros((2, layer.D), np.uint16)
    kda.run(Inputs(layer, 2).projected, out, pool.caches(), np.array([1, 9], np.int32))
    s = kda.status()
    assert not s.ok and s.flags == kd.Status.SLOT_RANGE == kd.SLOT_RANGE and s.first_request == 1
    assert "SLOT_RANGE" in s.describe() and "SLOT_RANGE" in repr(s)
    assert (kd.Status.SLOT_RANGE, kd.Status.ROW_RANGE, kd.Status.ACCEPTED, kd.Status.PENDING,
            kd.Status.PAD_START) == (1, 2, 4, 8, 16)


def test_caches_as_dict_and_stream_int():
    layer = Layer(2, seed=89)
    pool = Pool(layer, 4, 3)
    kda = layer.prepared(conv_dim_first=True)
    out = np.zeros((2, layer.D), np.uint16)
    inp = Inputs(layer, 2)
    kda.prepare({"conv_state": pool.conv, "state": pool.state})
    kda.run(inp.projected, out, {"conv_state": pool.conv, "state": pool.state}, np.array([1, 2], np.int32),
            stream=0)
    res = ref.step(layer.ref, inp.ref, pool.ref, mode="decode", q=1, slots=np.array([1, 2]))
    check_out(out, res.out, res.pads, 1)
    assert kda.status(stream=0).ok


def test_helpers():
    layer = Layer(2, seed=90)
    d = kd.decode_conv_weight(layer.conv_weight)
    D = layer.D
    assert d.shape == (3, W, D) and d.dtype == np.float32
    for s in range(3):
        assert np.array_equal(d[s], layer.conv_weight[s * D:(s + 1) * D, 0, :].T)
    wb = bf16(layer.conv_weight)
    assert np.array_equal(kd.decode_conv_weight(wb)[1], f64(wb)[D:2 * D, 0, :].T.astype(np.float32))
    for items, sms in [(1, 132), (264, 132), (265, 132), (1000, 132), (7, 1), (0, 132), (5, 0)]:
        if items <= 0 or sms <= 0:
            assert kd.stream_ctas(items, sms) == 0
        else:
            per = -(-items // (2 * sms))
            assert kd.stream_ctas(items, sms) == -(-items // per)
    st = np.zeros((3, 2, 128, 128), np.float32)
    assert kd.deferred_supported(st) and kd.deferred_supported(st, -5.0)
    assert kd.deferred_supported(bf16(st))
    assert not kd.deferred_supported(st.transpose(0, 1, 3, 2))
    assert not kd.deferred_supported(st.astype(np.float16))
    assert kd.replays(3, 8, 4)
    # stream_layout: 16-byte aligned strides and a window that fits q
    conv = np.zeros((4, 4, 3 * D), np.uint16)
    assert kd.stream_layout(conv, st, q=2, conv_dim_first=False, input_row_stride_bytes=2 * 1600,
                            out_row_stride_bytes=2 * D) == (False, 4)
    assert kd.stream_layout(conv, st, q=3, conv_dim_first=False, input_row_stride_bytes=2 * 1600,
                            out_row_stride_bytes=2 * D) is None
    assert kd.stream_layout(conv, st, q=1, conv_dim_first=False, input_row_stride_bytes=2 * 1601,
                            out_row_stride_bytes=2 * D) is None
    assert kd.cuda_built() in (True, False)


def test_bf16_numpy_helpers():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=1000), [0.0, -0.0, 1e38, -3.4e38, np.inf, -np.inf, 1.00390625]])
    b = kd.float32_to_bf16(x)
    assert np.array_equal(b, ref.f64_to_bf16_bits(x.astype(np.float32).astype(np.float64)))
    assert np.array_equal(kd.bf16_to_float32(b).astype(np.float64), f64(b))
    assert np.isnan(kd.bf16_to_float32(kd.float32_to_bf16([np.nan]))).all()
    with pytest.raises(TypeError):
        kd.bf16_to_float32(np.zeros(3, np.float32))


def test_repr_and_properties():
    layer = Layer(3, lower_bound=-5.0, seed=91)
    kda = layer.prepared(conv_dim_first=True, null_slot=-1)
    assert kda.heads == 3 and kda.taps == W and kda.device == "cpu" and kda.conv_dim_first
    assert kda.null_slot == -1 and kda.lower_bound == -5.0 and kda.eps == layer.eps
    assert "H=3" in repr(kda)
    assert kda.device_info["device"] == "cpu"
