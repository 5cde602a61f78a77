"""Named regression tests for the bug classes that hit other KDA / GDN decode kernels, each on
the CPU backend (against the float64 reference) and on the CUDA backend for every forced
variant ('split', 'wide', 'ws': against the CPU backend by SPEC §8 backend vs backend,
and against float64). The CUDA versions skip without a GPU; KDA_TEST_GPU_SIM=1 runs them
with torch CPU tensors on the CPU backend instead (a self-test of the test code, variants not
applied).

Most classes are explicit configurations run through the differential fuzzer's engine
(fuzz.run_config: status, out, written state / records / windows / pending, and every byte
an operation does not own bitwise unchanged, padding included). The C++ versions are in
tests/cpp/test_regressions.cpp.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import kda_decode as kd
import reference as ref
from fuzz import Config, Device, HostPool, Op, Side, compare_backends, run_config
from harness import Inputs, Layer, bits_of, check_out, f64

W = 4
K = 128
VARIANTS = ["split", "wide", "ws"]


def _gpu_device() -> str:
    if os.environ.get("KDA_TEST_GPU_SIM") == "1":
        pytest.importorskip("torch")
        return "torch-cpu"
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    if not kd.cuda_built():
        pytest.skip("kda_decode built without the CUDA backend")
    return "cuda"


@pytest.fixture
def gpu():
    return _gpu_device()


def i32(*v):
    return np.array(v, np.int32)


def run_both(c: Config, device: str, variant: str = "auto"):
    """CPU: vs float64. Device: vs the CPU backend and vs float64."""
    if device == "cpu":
        run_config(c, "cpu")
    else:
        run_config(c, device, check_f64=True, variant=variant)


def aligned(c: Config) -> Config:
    """16-byte aligned rows and slot strides, so that a forced 'ws' runs the WS kernel."""
    c.align = 8
    c.conv_pad = (c.conv_pad + 7) // 8 * 8
    c.state_pad = (c.state_pad + 7) // 8 * 8
    c.rec_pad = (c.rec_pad + 3) // 4 * 4
    return c


# =========================================================================================
# 1. padding with -1 and with 0 (the null slot) while slot 0 holds live data where 0 is not
#    the null slot
# =========================================================================================
def _pads_config(null_slot: int) -> Config:
    pn = null_slot if null_slot >= 0 else -3  # the null slot, else another negative id
    c = Config(H=2, lb=-3.0 if null_slot == 7 else None, n=10, window=6, Qr=4, null_slot=null_slot, seed=31 + null_slot,
               conv_pad=8, state_pad=8)
    c.ops = [
        Op("decode", 1, i32(0, -1, 3, pn, 4), seed=1),
        Op("per_token", 3, np.array([[0, 1, -1], [-1, 2, 3], [4, pn, 5], [pn, 6, 8]], np.int32),
           accepted=i32(1, 1, 1, 1), seed=2, layout="table"),
        Op("record", 2, i32(3, 0, -1), record_rows=i32(0, 5, 1), seed=3),  # row 0: ROW_RANGE when 0 is null
        Op("commit", 1, i32(0, -1, 3), record_rows=i32(5, 1, 0), counts=i32(2, 2, 1), layout="stride2"),
        Op("flush", 1, i32(0, 3, pn), record_rows=i32(5, 0, 2), pending={5: 2, 0: 1, 2: 3}),
        Op("fused", 2, i32(0, -1, pn), accepted=i32(2, 1, 1), record_rows=i32(5, 1, 2), pending={5: 2}, seed=4),
        Op("decode", 1, i32(5, pn, 9), out_slots=i32(0, 3, 8), seed=5),  # out slot 0: ROW_RANGE when null
    ]
    return c


@pytest.mark.parametrize("null_slot", [0, -1, 7])
def test_pad_minus_one_and_null_slot_while_slot_zero_is_live_cpu(null_slot):
    c = _pads_config(null_slot)
    run_both(c, "cpu")
    # the reference decides: slot 0 is written exactly when 0 is not the null slot
    rng = np.random.default_rng(c.seed)
    layer = Layer(c.H, conv_bias=c.bias, lower_bound=c.lb, seed=c.seed)
    hp = HostPool.create(c, rng)
    rc = hp.to_ref()
    inp = Inputs(layer, 5, seed=1)
    ref.step(layer.ref, inp.ref, rc, mode="decode", q=1, slots=c.ops[0].slots, null_slot=null_slot)
    assert (0 in rc.written_state) == (null_slot != 0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("null_slot", [0, -1, 7])
def test_pad_minus_one_and_null_slot_while_slot_zero_is_live_cuda(gpu, null_slot, variant):
    run_both(aligned(_pads_config(null_slot)), gpu, variant)


# =========================================================================================
# 2. [K, V] vs [V, K] state confusion
# =========================================================================================
def _kv_setup(dev: Device):
    layer = Layer(2, seed=41)
    c = Config(H=2, n=5, window=3, Qr=2, seed=42)
    hp = HostPool.create(c, np.random.default_rng(42))
    put = (lambda a, bf16=False: dev.put(a, bf16)) if dev.is_torch else (lambda a, bf16=False: a)
    kda = layer.prepared(put, conv_dim_first=True)
    return layer, c, hp, kda, put


def _check_kv_rejected(dev: Device):
    layer, c, hp, kda, put = _kv_setup(dev)
    conv, corr, kg, pend = put(hp.conv(), True), put(hp.corr()), put(hp.kg()), put(hp.pending())
    st = put(hp.state())
    bad_states = [st.transpose(2, 3) if dev.is_torch else hp.state().transpose(0, 1, 3, 2)]  # [K, V] seen as [V, K]
    inp = Inputs(layer, 2, seed=1)
    out = put(np.zeros((2, layer.D), np.uint16), True)
    for bad in bad_states:
        caches = kd.Caches(conv, bad, corr, kg, pend)
        calls = [lambda: kda.prepare(caches),
                 lambda: kda.run(put(inp.projected, True), out, caches, put(i32(1, 2))),
                 lambda: kda.run(put(inp.projected, True), out, caches, put(i32(1, 2)), mode="record"),
                 lambda: kda.commit(caches, put(i32(1, 2)), None, put(i32(1, 1))),
                 lambda: kda.flush(caches, put(i32(1, 2)))]
        for call in calls:
            with pytest.raises(ValueError) as ei:
                call()
            msg = str(ei.value)
            assert msg.startswith("state: expected inner [H, V, K] dense"), msg
            assert "VK layout" in msg and "[K, V]" in msg, msg
    assert kda.status().ok


def test_state_kv_layout_rejected_naming_the_layout_cpu():
    _check_kv_rejected(Device("cpu"))


def test_state_kv_layout_rejected_naming_the_layout_cuda(gpu):
    _check_kv_rejected(Device(gpu))


def _check_contiguous_kv_pool(device: str, variant: str):
    """A contiguous pool holding each head's state transposed has the strides of a VK pool: it is
    accepted and read as [V, K] (the caller's duty, docs/VALIDATION.md). The step equals the
    reference fed the same bytes as VK, and is far from the one the [K, V] caller meant."""
    c = aligned(Config(H=2, n=6, window=3, seed=43, ops=[Op("decode", 1, i32(1, 3, 4), seed=7)]))
    # the engine's pool is random: any pool is a "[K, V] pool" read as VK; run it as such
    run_both(c, device, variant)
    layer = Layer(2, seed=c.seed)
    hp = HostPool.create(c, np.random.default_rng(c.seed))
    meant = hp.to_ref()  # what a [K, V] caller meant: the transpose of the stored bytes
    meant.state = np.ascontiguousarray(meant.state.transpose(0, 1, 3, 2))
    stored = hp.to_ref()
    inp = Inputs(layer, 3, seed=7)
    a = ref.step(layer.ref, inp.ref, stored, mode="decode", q=1, slots=c.ops[0].slots)
    b = ref.step(layer.ref, inp.ref, meant, mode="decode", q=1, slots=c.ops[0].slots)
    assert np.abs(a.out - b.out).max() > 0.05 * np.abs(b.out).max()


def test_contiguous_kv_pool_cannot_be_told_apart_cpu():
    _check_contiguous_kv_pool("cpu", "auto")


@pytest.mark.parametrize("variant", VARIANTS)
def test_contiguous_kv_pool_cannot_be_told_apart_cuda(gpu, variant):
    _check_contiguous_kv_pool(gpu, variant)


# =========================================================================================
# 3. block-table column slices as slot tensors (row stride != q)
# =========================================================================================
def _table_config(extra_cols: int) -> Config:
    q = 3
    cols = q + extra_cols
    c = Config(H=3, lb=-5.0, n=3 * cols + 5, window=2 + cols, Qr=cols, seed=51 + extra_cols)
    rows = np.arange(1, 1 + 3 * cols, dtype=np.int32).reshape(3, cols)
    acc = i32(1, cols, min(cols, 2))  # any column of the row, also one >= q
    c.ops = [
        Op("per_token", q, rows, accepted=acc, layout="table", seed=1),
        Op("per_token", 1, rows, accepted=acc, layout="table", seed=2),
        Op("decode", 1, rows[:, 0].copy(), out_slots=rows[:, 1].copy(), layout="table", seed=3),
        Op("record", q, rows[:, 1].copy(), accepted=i32(1, 2, 1), record_rows=rows[:, 2].copy(), layout="table",
           slots_2d=True, seed=4),
        Op("commit", 1, rows[:, 1].copy(), record_rows=rows[:, 2].copy(), counts=i32(1, 3, 2), layout="table",
           slots_2d=True),
        Op("fused", q, rows[:, 1].copy(), accepted=i32(2, 1, 1), record_rows=rows[:, 2].copy(),
           pending={int(rows[0, 2]): 2}, layout="table", slots_2d=True, seed=5),
        Op("per_token", q, rows, accepted=acc, layout="colmajor", seed=6),
        Op("per_token", q, rows, accepted=acc, layout="stride2", seed=7, views=True),
    ]
    return c


@pytest.mark.parametrize("extra_cols", [0, 2])
def test_block_table_column_slices_as_slot_tensors_cpu(extra_cols):
    run_both(_table_config(extra_cols), "cpu")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("extra_cols", [0, 2])
def test_block_table_column_slices_as_slot_tensors_cuda(gpu, extra_cols, variant):
    run_both(aligned(_table_config(extra_cols)), gpu, variant)


# =========================================================================================
# 4. accepted of 0, above window - W + 2, or (per_token) above the slot row width: flagged
#    (ACCEPTED, lowest request), nothing of that request written
# =========================================================================================
def _accepted_config() -> Config:
    c = Config(H=2, n=12, window=6, Qr=4, seed=61)  # accepted in [1, 4]
    c.ops = [
        Op("decode", 1, i32(1, 2, 3), accepted=i32(1, 0, 1), seed=1),
        Op("decode", 1, i32(1, 2, 3), accepted=i32(-1, 1, 5), out_slots=i32(4, 5, 6), seed=2),
        Op("decode", 1, i32(1, 2), accepted=i32(1, 2 ** 31 - 1), seed=3),
        Op("per_token", 2, np.array([[1, 2], [3, 4], [5, 6]], np.int32), accepted=i32(2, 3, 1), seed=4),  # 3 > width 2
        Op("per_token", 2, np.array([[1, 2, 7], [3, 4, 8]], np.int32), accepted=i32(3, 5), seed=5),  # 5 > 4
        Op("per_token", 1, np.array([[1], [2]], np.int32), accepted=i32(2, 1), seed=6),  # width 1
        Op("record", 3, i32(1, 2, 3), accepted=i32(4, 0, 2), seed=7),
        Op("fused", 2, i32(1, 2, 3), accepted=i32(1, 5, 1), pending={1: 1, 2: 0, 3: 1}, seed=8),
        Op("fused", 1, i32(4, 5), accepted=i32(0, 4), pending={4: 2, 5: 4}, seed=9),  # request 0 bad; its pending stays
    ]
    return c


def test_accepted_out_of_range_flagged_nothing_written_cpu():
    c = _accepted_config()
    stats = run_config(c, "cpu")
    assert stats["errors"] == len(c.ops)  # every operation raised ACCEPTED (checked against the reference)


@pytest.mark.parametrize("variant", VARIANTS)
def test_accepted_out_of_range_flagged_nothing_written_cuda(gpu, variant):
    run_both(aligned(_accepted_config()), gpu, variant)


# =========================================================================================
# 5. pools larger than 2^31 bytes, slot ids whose byte offset exceeds int32
# =========================================================================================
def _mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return -1


def _big_pool_run(dev: Device, variant: str, H: int, nslots: int, window: int, rows_r: int):
    """Steps of every kind on a small pool (CPU backend) and on a pool of `nslots` slots whose
    used slots are far out (byte offsets past 2^31 / 2^32) on `dev`; both must agree: bitwise
    on the CPU, SPEC §8 backend vs backend on a GPU."""
    Qr = 4
    c = Config(H=H, lb=-4.0, conv_dtype="f32", n=5, window=window, Qr=Qr, seed=71)
    c.ops = []
    big_of = {0: 0, 1: nslots - 1, 2: nslots - 2, 3: nslots // 2 + 3, 4: (1 << 31) // (H * K * K * 4) + 1}
    assert max(big_of.values()) < nslots
    rows_big = {0: 0, 1: rows_r - 1, 2: rows_r - 2, 3: rows_r // 2 + 1, 4: 1}
    layer = Layer(H, lower_bound=-4.0, seed=71)
    rng = np.random.default_rng(71)
    small = HostPool.create(c, rng)
    cpu = Side(Device("cpu"), c, layer, small, "auto")
    torch = dev.torch if dev.is_torch else None
    # the big pool on the device: zeros, the small pool's slots copied to their far positions
    D = H * K
    if dev.is_torch:
        conv_b = torch.zeros((nslots, 3 * D, window), dtype=torch.float32, device=dev.tdev)
        state_b = torch.zeros((nslots, H, K, K), dtype=torch.float32, device=dev.tdev)
        corr_b = torch.zeros((rows_r, H, Qr, K), dtype=torch.float32, device=dev.tdev)
        kg_b = torch.zeros((rows_r, H, Qr, 2 * K), dtype=torch.float32, device=dev.tdev)
        pend_b = torch.zeros((rows_r,), dtype=torch.int32, device=dev.tdev)
        for s, bs in big_of.items():
            conv_b[bs] = torch.from_numpy(np.ascontiguousarray(small.conv())[s]).to(dev.tdev)
            state_b[bs] = torch.from_numpy(np.ascontiguousarray(small.state())[s]).to(dev.tdev)
        for r, br in rows_big.items():
            corr_b[br] = torch.from_numpy(np.ascontiguousarray(small.corr())[r]).to(dev.tdev)
            kg_b[br] = torch.from_numpy(np.ascontiguousarray(small.kg())[r]).to(dev.tdev)
        put = lambda a, bf16=False: dev.put(a, bf16)  # noqa: E731
    else:
        conv_b = np.zeros((nslots, 3 * D, window), np.float32)
        state_b = np.zeros((nslots, H, K, K), np.float32)
        corr_b = np.zeros((rows_r, H, Qr, K), np.float32)
        kg_b = np.zeros((rows_r, H, Qr, 2 * K), np.float32)
        pend_b = np.zeros((rows_r,), np.int32)
        for s, bs in big_of.items():
            conv_b[bs] = small.conv()[s]
            state_b[bs] = small.state()[s]
        for r, br in rows_big.items():
            corr_b[br] = small.corr()[r]
            kg_b[br] = small.kg()[r]
        put = lambda a, bf16=False: a  # noqa: E731
    pol = kd.Policy(variant=variant if dev.name == "cuda" else "auto")
    big = layer.prepared(put, conv_dim_first=True, default_policy=pol)
    caches_b = kd.Caches(conv_b, state_b, corr_b, kg_b, pend_b)
    big.prepare(caches_b)

    def mapped(ids, table):
        return np.array([table[int(i)] if int(i) >= 0 else int(i) for i in np.ravel(ids)], np.int32).reshape(
            np.shape(ids))

    ops = [
        Op("decode", 1, i32(1, 3), accepted=i32(1, 2), seed=1),
        Op("per_token", 2, np.array([[2, 4], [3, 1]], np.int32), accepted=i32(2, 1), seed=2),
        Op("record", 3, i32(1, 2), accepted=i32(1, 2), record_rows=i32(1, 3), seed=3),
        Op("commit", 1, i32(1, 2), record_rows=i32(1, 3), counts=i32(3, 2)),
        Op("fused", 2, i32(1, 4), accepted=i32(2, 1), record_rows=i32(1, 2), pending={1: 2, 2: 1}, seed=4),
        Op("flush", 1, i32(4, 2), record_rows=i32(2, 3), pending={2: 3, 3: 1}),
    ]
    g = (lambda t: dev.host(t)) if dev.is_torch else (lambda t: np.array(t))

    def gather(like: HostPool) -> HostPool:
        """The big pool's used slots / rows in a pool shaped like the small one."""
        hp = HostPool(c, {k: v.copy() for k, v in like.b.items()})
        for s, bs in big_of.items():
            hp.conv()[s] = g(conv_b[bs])
            hp.state()[s] = g(state_b[bs])
        for r, br in rows_big.items():
            hp.corr()[r] = g(corr_b[br])
            hp.kg()[r] = g(kg_b[br])
            hp.pending()[r] = int(g(pend_b[br:br + 1])[0])
        return hp

    for n_op, op in enumerate(ops):
        if op.pending:
            for r, v in op.pending.items():
                small.pending()[r] = v
                pend_b[rows_big[r]] = v
        rows = op.B * op.q
        inp = Inputs(layer, rows, seed=op.seed, align=8) if op.kind not in ("commit", "flush") else None
        out_c = np.zeros((rows, D), np.uint16)
        cb = cpu.host_pool()
        db = gather(cb)
        if op.kind == "commit":
            cpu.kda.commit(small.caches(), op.slots, op.record_rows, op.counts)
            big.commit(caches_b, put(mapped(op.slots, big_of)), put(mapped(op.record_rows, rows_big)), put(op.counts))
        elif op.kind == "flush":
            cpu.kda.flush(small.caches(), op.slots, op.record_rows)
            big.flush(caches_b, put(mapped(op.slots, big_of)), put(mapped(op.record_rows, rows_big)))
        else:
            kw = dict(q=op.q, mode=op.kind, accepted=op.accepted)
            cpu.kda.run(inp.projected, out_c, small.caches(), op.slots, record_rows=op.record_rows, **kw)
            out_g = put(np.zeros((rows, D), np.uint16), True)
            kw["accepted"] = put(op.accepted)
            big.run(put(inp.projected, True), out_g, caches_b, put(mapped(op.slots, big_of)),
                    record_rows=None if op.record_rows is None else put(mapped(op.record_rows, rows_big)), **kw)
        cst, dst = cpu.kda.status(), big.status()
        assert cst.ok and dst.ok, f"{op.describe()}: {cst.describe()} / {dst.describe()}"
        ca = cpu.host_pool()
        da = gather(ca)
        d_out = None if inp is None else (dev.host(out_g) if dev.is_torch else out_g)
        if dev.name == "cuda":
            compare_backends(c, cb, ca, db, da, out_c if inp is not None else None, d_out, cst, dst, n_op + 1,
                             op.describe())
        else:
            if inp is not None:
                assert np.array_equal(out_c, d_out), f"{op.describe()}: outputs differ between the small and the big pool"
            for k in ("conv", "state", "corr", "kg", "pend"):
                assert np.array_equal(bits_of(ca.b[k]), bits_of(da.b[k])), f"{op.describe()}: {k} differs"
    # untouched slots of the big pool stay zero
    for s in (5, nslots // 2, nslots - 3, big_of[4] - 1, big_of[4] + 1):
        assert not g(state_b[s]).any() and not g(conv_b[s]).any(), f"slot {s} was written"


def test_pools_beyond_2gib_slot_offsets_beyond_int32_cpu():
    # H = 1: state slots of 64 KiB, 70001 slots (4.6e9 bytes; slot 70000 at 4.59e9); fp32
    # windows of 24 columns (2.6e9 bytes). numpy's zeros are lazily mapped pages.
    if 0 <= _mem_available() < (2300 << 20):
        pytest.skip("needs ~2.2 GB of free memory")
    try:
        _big_pool_run(Device("cpu"), "auto", H=1, nslots=70001, window=24, rows_r=70001)
    except MemoryError:
        pytest.skip("could not map the big pools")


@pytest.mark.parametrize("variant", VARIANTS)
def test_pools_beyond_2gib_slot_offsets_beyond_int32_cuda(gpu, variant):
    if gpu != "cuda":
        pytest.skip("the big pools are allocated on the GPU only (CPU: the _cpu test)")
    # H = 2: 70001 state slots of 128 KiB (9.2e9 bytes; slot 70000 at element offset 2.29e9 >
    # 2^31), fp32 windows of 24 columns (5.2e9 bytes), records rows up to 70000 (0.57e9 bytes of k|g).
    # 'ws': two ring stages of a fused step with 24 fp32 columns (22 records) do not fit into
    # shared memory (refused, row P14); 14 columns still make a 3.0e9-byte window pool.
    _big_pool_run(Device(gpu), variant, H=2, nslots=70001, window=14 if variant == "ws" else 24, rows_r=70001)


# =========================================================================================
# 6. non-contiguous slot stride in the state pool
# =========================================================================================
def _strided_config(state_pad: int, state_dtype: str, H: int = 2) -> Config:
    c = Config(H=H, n=12, window=6, Qr=4, state_pad=state_pad, conv_pad=5, rec_pad=4, pending_stride=3,
               state_dtype=state_dtype, layout="sd", seed=81 + state_pad % 97)
    c.ops = [
        Op("decode", 1, i32(1, 11, -1), seed=1),
        Op("decode", 1, i32(2, 3), out_slots=i32(4, 5), seed=2),
        Op("per_token", 3, np.array([[6, 7, 8], [9, 10, 11]], np.int32), accepted=i32(1, 3), seed=3),
        Op("record", 4, i32(1, 4), accepted=i32(2, 1), record_rows=i32(2, 7), seed=4),
        Op("commit", 1, i32(1, 4), record_rows=i32(2, 7), counts=i32(3, 4)),
        Op("fused", 2, i32(1, 4), accepted=i32(2, 1), record_rows=i32(2, 7), pending={2: 2}, seed=5),
        Op("flush", 1, i32(1, 4), record_rows=i32(2, 7), pending={7: 2}),
    ]
    return c


@pytest.mark.parametrize("state_dtype", ["f32", "bf16"])
@pytest.mark.parametrize("state_pad", [1, 7, 3 * 2 * K * K])  # the last: layer 0 of a 4-layer stacked pool
def test_non_contiguous_state_slot_stride_cpu(state_pad, state_dtype):
    run_both(_strided_config(state_pad, state_dtype), "cpu")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("state_dtype", ["f32", "bf16"])
@pytest.mark.parametrize("state_pad", [8, 3 * 2 * K * K])  # CUDA: slot strides of 16-byte multiples
def test_non_contiguous_state_slot_stride_cuda(gpu, state_pad, state_dtype, variant):
    run_both(aligned(_strided_config(state_pad, state_dtype)), gpu, variant)


# =========================================================================================
# 7. zero-length batches (B = 0)
# =========================================================================================
def _empty_config() -> Config:
    e = np.zeros(0, np.int32)
    c = Config(H=3, n=6, window=5, Qr=3, seed=91)
    c.ops = [
        Op("decode", 1, e.copy(), accepted=e.copy(), out_slots=e.copy(), layout="table"),
        Op("per_token", 3, np.zeros((0, 4), np.int32), accepted=e.copy(), layout="colmajor"),
        Op("record", 2, e.copy(), accepted=e.copy(), record_rows=e.copy(), views=True),
        Op("fused", 3, e.copy(), accepted=e.copy(), record_rows=e.copy(), slots_2d=True),
        Op("commit", 1, e.copy(), record_rows=e.copy(), counts=e.copy()),
        Op("flush", 1, e.copy()),
        Op("decode", 1, i32(1, 2), seed=1),  # and the object still works
    ]
    return c


def test_zero_length_batch_cpu():
    run_both(_empty_config(), "cpu")


@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_length_batch_cuda(gpu, variant):
    run_both(aligned(_empty_config()), gpu, variant)


# =========================================================================================
# 8. the error flag: raised on the device, read with status() after the fact, cleared on
#    read; run never synchronises for it
# =========================================================================================
def _error_steps(c: Config):
    return [
        Op("decode", 1, i32(1, 2, 3, 10), seed=1),  # SLOT_RANGE at 3 (pool of 8)
        Op("decode", 1, i32(1, 2, 3), accepted=i32(1, 9, 1), seed=2),  # ACCEPTED at 1
        Op("decode", 1, i32(4, 5), seed=3),  # fine: the flags stay
    ]


def test_device_error_flag_read_after_the_fact_cleared_on_read_cpu():
    c = Config(H=2, n=8, window=6, seed=101)
    layer = Layer(2, seed=101)
    hp = HostPool.create(c, np.random.default_rng(101))
    kda = layer.prepared(conv_dim_first=True)
    for op in _error_steps(c):
        out = np.zeros((op.B, layer.D), np.uint16)
        kda.run(Inputs(layer, op.B, seed=op.seed).projected, out, hp.caches(), op.slots, accepted=op.accepted)
    s = kda.status()
    assert s.flags == kd.SLOT_RANGE | kd.ACCEPTED and s.first_request == 1, s.describe()
    s = kda.status()
    assert s.ok and s.flags == 0 and s.first_request == -1


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_error_flag_read_after_the_fact_cleared_on_read_cuda(gpu, variant):
    if gpu != "cuda":
        pytest.skip("needs a GPU (stream timing, graphs)")
    import torch

    dev = Device("cuda")
    c = aligned(Config(H=2, n=8, window=6, seed=102))
    layer = Layer(2, seed=102)
    hp = HostPool.create(c, np.random.default_rng(102))
    kda = layer.prepared(lambda a, bf16=False: dev.put(a, bf16), conv_dim_first=True,
                         default_policy=kd.Policy(variant=variant))
    conv, state = dev.put(hp.conv(), True), dev.put(hp.state())
    caches = kd.Caches(conv, state)
    kda.prepare(caches)
    steps = []
    for op in _error_steps(c):
        steps.append((dev.put(Inputs(layer, op.B, seed=op.seed, align=8).projected, True),
                      torch.zeros((op.B, layer.D), dtype=torch.bfloat16, device="cuda"), dev.put(op.slots),
                      dev.put(op.accepted)))
    torch.cuda.synchronize()
    # run never synchronises: with the stream busy, every run returns while it is still busy
    stream = torch.cuda.current_stream()
    torch.cuda._sleep(int(2e9))  # ~1 s of GPU time ahead of the steps
    for proj, out, slots, acc in steps:
        kda.run(proj, out, caches, slots, accepted=acc)
    assert not stream.query(), "run() waited for the GPU"
    s = kda.status()  # synchronises, reads, clears
    assert stream.query()
    assert s.flags == kd.SLOT_RANGE | kd.ACCEPTED and s.first_request == 1, s.describe()
    assert kda.status().ok, "status() clears the flag"
    # pad / error rows are zero
    assert (steps[0][1][3] == 0).all() and (steps[1][1][1] == 0).all()
    # inside a CUDA graph: capture is legal (no synchronisation), each replay raises the flag
    side = torch.cuda.Stream()
    side.wait_stream(stream)
    with torch.cuda.stream(side):
        kda.run(*steps[0][:2], caches, steps[0][2], accepted=steps[0][3])
    stream.wait_stream(side)
    assert kda.status().flags == kd.SLOT_RANGE
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        kda.run(*steps[1][:2], caches, steps[1][2], accepted=steps[1][3])
    torch.cuda.synchronize()
    assert kda.status().ok, "nothing ran during capture"
    for _ in range(2):
        g.replay()
        s = kda.status()
        assert s.flags == kd.ACCEPTED and s.first_request == 1, s.describe()


# =========================================================================================
# 9. fused steps whose pending count exceeds q (pending = accepted <= window - W + 2 > q):
#    the Stream kernel staged only q records per item (fixed in include/kda/cuda/config.h)
# =========================================================================================
def _fused_above_q_config(state_dtype: str) -> Config:
    c = Config(H=3, lb=-2.0, n=10, window=6, Qr=4, state_dtype=state_dtype, seed=111)
    c.ops = [
        Op("record", 4, i32(1, 2, 3), accepted=i32(1, 2, 1), record_rows=i32(4, 5, 6), seed=1),
        Op("fused", 1, i32(1, 2, 3), accepted=i32(4, 3, 1), record_rows=i32(4, 5, 6), pending={4: 4, 5: 3, 6: 0},
           seed=2),
        Op("record", 4, i32(1, 2, 3), accepted=i32(1, 1, 1), record_rows=i32(4, 5, 6), seed=3),
        Op("fused", 2, i32(1, 2, 3), accepted=i32(4, 2, 3), record_rows=i32(4, 5, 6), pending={4: 4, 5: 0, 6: 3},
           seed=4),
        Op("fused", 1, i32(7, 8, 9), accepted=i32(4, 4, 4), pending={7: 4, 8: 4, 9: 4}, seed=5),
    ]
    return c


@pytest.mark.parametrize("state_dtype", ["f32", "bf16"])
def test_fused_pending_above_q_cpu(state_dtype):
    run_both(_fused_above_q_config(state_dtype), "cpu")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("state_dtype", ["f32", "bf16"])
def test_fused_pending_above_q_cuda(gpu, state_dtype, variant):
    run_both(aligned(_fused_above_q_config(state_dtype)), gpu, variant)


# =========================================================================================
# determinism: bitwise-equal outputs and caches over repeated runs, per variant, every kind
# =========================================================================================
def _determinism_config() -> Config:
    B, q = 9, 3
    c = Config(H=4, lb=-5.0, n=B * q + 3, window=2 + q + 1, Qr=q + 1, seed=121, layout="sd")
    ids = np.arange(1, 1 + B * q, dtype=np.int32)
    tbl = ids.reshape(B, q)
    acc = (np.arange(B) % q + 1).astype(np.int32)
    c.ops = [
        Op("decode", 1, tbl[:, 0].copy(), seed=1),
        Op("per_token", q, tbl, accepted=acc, seed=2),
        Op("record", q, tbl[:, 0].copy(), accepted=acc, seed=3),
        Op("commit", 1, tbl[:, 0].copy(), counts=acc.copy()),
        Op("record", q, tbl[:, 0].copy(), accepted=acc, seed=4),
        Op("fused", q, tbl[:, 0].copy(), accepted=acc, pending={int(s): int(a) for s, a in zip(tbl[:, 0], acc)},
           seed=5),
        Op("flush", 1, tbl[:, 0].copy(), pending={int(s): 2 for s in tbl[:, 0]}),
    ]
    return c


def _sequence_bits(c: Config, device: str, variant: str):
    layer = Layer(c.H, lower_bound=c.lb, seed=c.seed)
    hp = HostPool.create(c, np.random.default_rng(c.seed))
    side = Side(Device(device), c, layer, hp, variant)
    outs = []
    for op in c.ops:
        if op.pending:
            if device == "cpu":
                for r, v in op.pending.items():
                    side.pool.pending()[r] = v
            else:
                for r, v in op.pending.items():
                    side.pool.t["pend"][r, 0] = v
        inp = None if op.kind in ("commit", "flush") else Inputs(layer, op.B * op.q, seed=op.seed, align=8)
        o, st = side.run(op, inp, np.zeros((op.B * op.q, c.D), np.uint16))
        assert st.ok, st.describe()
        outs.append(None if o is None else o.copy())
    return outs, side.host_pool().b


def _check_determinism(device: str, variant: str, reps: int = 3):
    c = _determinism_config()
    first = _sequence_bits(c, device, variant)
    for _ in range(reps - 1):
        again = _sequence_bits(c, device, variant)
        for i, (a, b) in enumerate(zip(first[0], again[0])):
            assert (a is None) == (b is None) and (a is None or np.array_equal(a, b)), f"out of op {i} differs"
        for k in first[1]:
            assert np.array_equal(bits_of(first[1][k]), bits_of(again[1][k])), f"{k} differs between identical runs"


def test_determinism_bitwise_every_step_kind_cpu():
    _check_determinism("cpu", "auto")


@pytest.mark.parametrize("variant", VARIANTS + ["auto"])
def test_determinism_bitwise_every_step_kind_cuda(gpu, variant):
    _check_determinism(gpu, variant)


# =========================================================================================
# long trajectories: 1,000 decode steps, 200 record + commit rounds, 200 fused rounds against
# float64 (SPEC §8: report the drift, pass at <= 1e-3 relative)
# =========================================================================================
def long_trajectory(device: str, variant: str, decode_steps: int = 1000, rounds: int = 200):
    """Returns {'decode': drift, 'record_commit': drift, 'fused': drift, 'out': the worst out ratio
    err / (2^-8·|ref| + 2e-3·max|ref|)}; every step's outputs are asserted within that bound."""
    dev = Device(device)
    q = 3
    c = Config(H=1, lb=None, n=4, window=W - 2 + q + 1, Qr=q + 1, seed=131)
    layer = Layer(1, seed=131, a_log_range=(-4.0, -2.0), eps=5e-4)  # long memory: decays close to 1
    layer.dt_bias[...] -= 2.0
    layer.ref.dt_bias[...] = layer.dt_bias.astype(np.float64)
    hp = HostPool.create(c, np.random.default_rng(131))
    rc = hp.to_ref()
    side = Side(dev, c, layer, hp, variant)
    rng = np.random.default_rng(132)
    slots = i32(1, 2)
    worst_out = [0.0]
    n_steps = [0]

    def drift():
        got = side.host_pool().state()[1:3].astype(np.float64)
        want = rc.state[1:3]
        return float(np.abs(got - want).max() / np.abs(want).max())

    def step(op):
        if op.pending:
            for r, v in op.pending.items():
                if dev.is_torch:
                    side.pool.t["pend"][r, 0] = v
                else:
                    side.pool.pending()[r] = v
                rc.pending[r] = v
        inp = None if op.kind in ("commit", "flush") else Inputs(layer, op.B * op.q, seed=op.seed, align=8)
        o, st = side.run(op, inp, np.zeros((op.B * op.q, c.D), np.uint16))
        assert st.ok, st.describe()
        if op.kind == "commit":
            ref.commit(layer.ref, rc, op.slots, None, op.counts)
        else:
            res = ref.step(layer.ref, inp.ref, rc, mode=op.kind, q=op.q, slots=op.slots, accepted=op.accepted)
            # every step's outputs within SPEC §8 (per element, vs the chained float64 reference)
            worst_out[0] = max(worst_out[0], check_out(o, res.out, res.pads, op.q,
                                                       what=f"{op.kind} step {n_steps[0]}: out"))
        n_steps[0] += 1

    for s in range(decode_steps):
        step(Op("decode", 1, slots, seed=int(rng.integers(1 << 30))))
    d_decode = drift()
    for s in range(rounds):
        acc = rng.integers(1, q + 1, size=2).astype(np.int32) if s else i32(1, 1)
        step(Op("record", q, slots, accepted=acc, seed=int(rng.integers(1 << 30))))
        step(Op("commit", 1, slots, counts=rng.integers(1, q + 1, size=2).astype(np.int32)))
    d_commit = drift()
    acc = i32(1, 1)
    for s in range(rounds):
        pend = {int(sl): int(a) for sl, a in zip(slots, acc)} if s else {1: 0, 2: 0}
        step(Op("fused", q, slots, accepted=acc, pending=pend, seed=int(rng.integers(1 << 30))))
        acc = rng.integers(1, q + 1, size=2).astype(np.int32)
    d_fused = drift()
    return {"decode": d_decode, "record_commit": d_commit, "fused": d_fused, "out": worst_out[0]}


def _report(name, d, record_property):
    line = (f"[drift] {name}: state max|err|/max|ref| after 1000 decode steps {d['decode']:.3e}, "
            f"+200 record+commit rounds {d['record_commit']:.3e}, +200 fused rounds {d['fused']:.3e}; "
            f"worst out err/bound {d['out']:.3f} (<= 1, every step)")
    print("\n" + line)
    for k, v in d.items():
        record_property(f"{name}_{k}", v)
    for k in ("decode", "record_commit", "fused"):
        assert d[k] <= 1e-3, line


def test_long_trajectory_drift_cpu(record_property):
    _report("cpu", long_trajectory("cpu", "auto"), record_property)


@pytest.mark.parametrize("variant", VARIANTS)
def test_long_trajectory_drift_cuda(gpu, variant, record_property):
    _report(f"{gpu} {variant}", long_trajectory(gpu, variant), record_property)
