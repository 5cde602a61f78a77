"""The layer without the output norm (SPEC §9: ``PreparedKda(output_norm=False)``) on the CPU
backend, through the Python API (numpy), against the float64 reference, whose output is then
o itself:

* decode, per_token, record and fused steps, chained, packed rows and separate views with
  ``out_gate=None``, both window layouts, fp32 and bf16 state; every out-gate input is NaN
  (a read of it would reach the output) and every other SPEC §8 check holds (windows bitwise,
  untouched slots bitwise, pad rows zero);
* what must not change with the norm: the caches a normed and an unnormed layer write on the
  same data are bitwise equal, the outputs differ;
* the API: ``norm_weight`` optional only without the norm, ``out_gate=None`` refused with it,
  the ``output_norm`` property, reloads without a norm weight, the eps still checked.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref
from harness import Inputs, Layer, Pool, bits_of, check_caches, check_out, poison

import kda_decode as kd

W = 4
NAN = 0x7FC1


def nan_out_gate(layer, inp):
    """Every out-gate input NaN, in the packed row and in the views' source."""
    D = layer.D
    inp.projected[:, 3 * D : 4 * D] = NAN
    inp.raw["out_gate"][...] = NAN
    return inp


def step(kda, layer, pool, inp, *, views, n_chain, mode="decode", q=1, slots, accepted=None, gate_mode=0):
    rows = inp.projected.shape[0]
    out = np.empty((rows, layer.D), np.uint16)
    poison(out)
    before = pool.snapshot()
    kw = dict(q=q, accepted=accepted, mode=mode)
    if views:
        v = inp.views()
        kda.run_views(v["qkv"], None, v["gate_in"], v["beta"], out, pool.caches(), slots, **kw)
    else:
        kda.run(inp.projected, out, pool.caches(), slots, **kw)
    st = kda.status()
    res = ref.step(
        layer.ref,
        inp.ref,
        pool.ref,
        mode=mode,
        q=q,
        slots=np.asarray(slots),
        accepted=None if accepted is None else np.asarray(accepted),
        gate_mode=gate_mode,
    )
    assert (st.flags, st.first_request) == (res.flags, res.first)
    check_out(out, res.out, res.pads, q)
    check_caches(pool, before, n_chain, what=f"{mode} step without the output norm")
    return out


@pytest.mark.parametrize(
    "layout,state_dtype,views,lb",
    [("ds", "f32", False, None), ("sd", "f32", True, -5.0), ("ds", "bf16", True, None), ("sd", "bf16", False, -2.0)],
)
def test_without_norm_against_float64(layout, state_dtype, views, lb):
    H, B, q = 3, 3, 3
    layer = Layer(H, lower_bound=lb, seed=31, output_norm=False)
    n = B * q + 3
    pool = Pool(layer, n, W - 2 + q, layout=layout, state_dtype=state_dtype, records=(n, q + 1), seed=32)
    kda = layer.prepared(conv_dim_first=layout == "ds")
    assert kda.output_norm is False and "output_norm=False" in repr(kda)
    kda.prepare(pool.caches())
    chain = 0

    def nxt():
        nonlocal chain
        chain += 1
        if state_dtype == "bf16":  # SPEC §9: each step from the stored bf16 state
            pool.sync_ref_from_package()
            return 1
        return chain

    slots = np.array([1, 0, 4], np.int32)  # request 1 is a pad (the null slot)
    for s in range(2):
        step(
            kda,
            layer,
            pool,
            nan_out_gate(layer, Inputs(layer, B, seed=40 + s)),
            views=views,
            n_chain=nxt(),
            slots=slots,
        )
    tbl = np.array([[1, 2, 3], [-1, -1, -1], [4, 5, 6]], np.int32)
    acc = np.array([1, 1, 1], np.int32)
    step(
        kda,
        layer,
        pool,
        nan_out_gate(layer, Inputs(layer, B * q, seed=42)),
        views=views,
        n_chain=nxt(),
        mode="per_token",
        q=q,
        slots=tbl,
        accepted=acc,
    )
    ck = np.array([1, 0, 4], np.int32)
    step(
        kda,
        layer,
        pool,
        nan_out_gate(layer, Inputs(layer, B * q, seed=43)),
        views=views,
        n_chain=nxt(),
        mode="record",
        q=q,
        slots=ck,
        accepted=acc,
    )
    pool.set_pending(1, 2)
    pool.set_pending(4, 3)
    acc2 = np.array([2, 1, 3], np.int32)
    step(
        kda,
        layer,
        pool,
        nan_out_gate(layer, Inputs(layer, B * q, seed=44)),
        views=views,
        n_chain=nxt(),
        mode="fused",
        q=q,
        slots=ck,
        accepted=acc2,
    )
    assert kda.status().ok


def test_the_norm_changes_only_the_output():
    H, B = 2, 3
    normed, plain = Layer(H, seed=50), Layer(H, seed=50, output_norm=False)
    pools = [Pool(lay, 6, W - 1, layout="sd", seed=51) for lay in (normed, plain)]
    kdas = [lay.prepared() for lay in (normed, plain)]
    outs = []
    for s in range(3):
        inp = Inputs(normed, B, seed=52 + s)
        for i, (k, p) in enumerate(zip(kdas, pools)):
            o = np.empty((B, H * 128), np.uint16)
            poison(o)
            if i == 0:
                k.run(inp.projected, o, p.caches(), np.array([1, 3, 5], np.int32))
            else:
                v = inp.views()
                k.run_views(v["qkv"], None, v["gate_in"], v["beta"], o, p.caches(), np.array([1, 3, 5], np.int32))
            outs.append(o)
        assert np.array_equal(bits_of(pools[0].state), bits_of(pools[1].state))
        assert np.array_equal(bits_of(pools[0].conv), bits_of(pools[1].conv))
        assert not np.array_equal(outs[-2], outs[-1])
    # o itself is small here (|q| = 128^-0.5, state ~ 0.5): the RMSNorm output is much larger
    rms = [float(np.sqrt(np.mean(kd.bf16_to_float32(o).astype(np.float64) ** 2))) for o in outs[-2:]]
    assert rms[0] > 2 * rms[1]


def test_api_without_norm():
    layer = Layer(2, seed=60)
    w = layer.weights()
    # the norm weight is optional only without the norm
    with pytest.raises(kd.ArgumentError, match=r"norm_weight.*output_norm=false"):
        kd.PreparedKda(**dict(w, norm_weight=None), eps=layer.eps)
    plain = kd.PreparedKda(**dict(w, norm_weight=None), output_norm=False, conv_dim_first=True)
    given = kd.PreparedKda(**dict(w, norm_weight=-w["norm_weight"]), output_norm=False, conv_dim_first=True)  # unused
    with pytest.raises(TypeError, match="output_norm"):
        kd.PreparedKda(**w, output_norm=0)
    with pytest.raises(kd.ShapeError, match="norm_weight"):  # checked when given
        kd.PreparedKda(**dict(w, norm_weight=w["norm_weight"][:64]), output_norm=False)
    with pytest.raises(kd.ArgumentError, match="eps"):  # still checked
        kd.PreparedKda(**dict(w, norm_weight=None), output_norm=False, eps=0.0)
    pool = Pool(layer, 5, W - 1, seed=61)
    inp = Inputs(layer, 2, seed=62)
    v = inp.views()
    normed = layer.prepared(conv_dim_first=True)
    o = np.zeros((2, layer.D), np.uint16)
    with pytest.raises(kd.ArgumentError, match=r"out_gate.*output_norm=false"):
        normed.run_views(v["qkv"], None, v["gate_in"], v["beta"], o, pool.caches(), np.array([1, 2], np.int32))
    # an out gate given without the norm is checked all the same
    with pytest.raises(kd.DTypeError, match="out_gate"):
        plain.run_views(
            v["qkv"],
            v["out_gate"].astype(np.float32),
            v["gate_in"],
            v["beta"],
            o,
            pool.caches(),
            np.array([1, 2], np.int32),
        )
    outs = []
    for k in (plain, given):
        p = Pool(layer, 5, W - 1, seed=61)
        o = np.zeros((2, layer.D), np.uint16)
        k.run(inp.projected, o, p.caches(), np.array([1, 2], np.int32))
        outs.append(o)
    assert np.array_equal(outs[0], outs[1])
    # a reload needs no norm weight; output_norm stays as at construction
    plain.process_weights_after_loading(**dict(w, norm_weight=None))
    with pytest.raises(TypeError, match="norm_weight"):
        normed.process_weights_after_loading(**dict(w, norm_weight=None))
