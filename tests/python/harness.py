"""Test harness: random layers, cache pools and inputs for kda_decode, mirrored into the
float64 reference (reference.py), and the SPEC §8 checks.

Package-side arrays are numpy (CPU backend); test_cuda.py moves them to torch CUDA
tensors. bf16 data are uint16 bit patterns.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Optional

import numpy as np
import pytest

import reference as ref

K = ref.K
R = ref.R

TREE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_tree_script(relpath: str):
    """A Python file of the source tree outside the package (e.g. benchmarks/policy_eval.py),
    loaded as a module; the calling test is skipped where the tree does not hold it."""
    path = os.path.join(TREE, relpath)
    if not os.path.exists(path):
        pytest.skip(f"{relpath} is not in this tree")
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bf16(x) -> np.ndarray:
    """float -> bf16 bit patterns (uint16), round to nearest even."""
    return ref.f64_to_bf16_bits(np.asarray(x, dtype=np.float32).astype(np.float64))


def f64(bits) -> np.ndarray:
    """bf16 bit patterns -> float64."""
    return ref.bf16_bits_to_f64(bits)


def bits_of(a: np.ndarray) -> np.ndarray:
    """Raw bit view of an array (for bitwise comparisons)."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


# ---------------------------------------------------------------------------------------
# layer
# ---------------------------------------------------------------------------------------
class Layer:
    """Random layer weights (numpy, as the package takes them) and their float64 mirror."""

    def __init__(self, H: int, *, W: int = 4, conv_bias: bool = True, lower_bound: Optional[float] = None,
                 f_b: bool = True, conv_weight_bf16: bool = False, eps: float = 1e-5, seed: int = 0,
                 a_log_range=(-1.0, 1.0), qk_scale: float = 1.0, output_norm: bool = True):
        """qk_scale multiplies the conv bias of the q and k channels (tiny post-conv q and k).
        output_norm=False: the layer without the output norm (SPEC §9); no norm weight is passed."""
        rng = np.random.default_rng(seed)
        self.H, self.W, self.D = H, W, H * K
        D = self.D
        cw = rng.normal(0.0, 0.5, size=(3 * D, 1, W)).astype(np.float32)
        if conv_weight_bf16:
            self.conv_weight = bf16(cw)
            cw64 = f64(self.conv_weight)[:, 0, :]
        else:
            self.conv_weight = cw
            cw64 = cw[:, 0, :].astype(np.float64)
        self.conv_bias = rng.normal(0.0, 0.2, size=3 * D).astype(np.float32) if conv_bias else None
        if self.conv_bias is not None:
            self.conv_bias[:2 * D] *= np.float32(qk_scale)
        self.f_b_weight = bf16(rng.normal(0.0, 1.0 / np.sqrt(R), size=(D, R))) if f_b else None
        self.A_log = rng.uniform(*a_log_range, size=H).astype(np.float32)
        self.dt_bias = rng.normal(0.0, 0.5, size=D).astype(np.float32)
        self.norm_weight = rng.uniform(0.5, 1.5, size=K).astype(np.float32)
        self.eps = eps
        self.lower_bound = lower_bound
        self.output_norm = output_norm
        self.ref = ref.RefLayer(
            H=H, W=W, conv_w=cw64,
            conv_b=None if self.conv_bias is None else self.conv_bias.astype(np.float64),
            f_b=None if self.f_b_weight is None else f64(self.f_b_weight),
            A_log=self.A_log.astype(np.float64), dt_bias=self.dt_bias.astype(np.float64),
            norm_w=self.norm_weight.astype(np.float64), eps=eps, lower_bound=lower_bound, output_norm=output_norm)

    def weights(self, put=lambda a, bf16=False: a) -> dict:
        """The constructor's weight keywords (put: converts each array, e.g. to torch)."""
        return dict(
            conv_weight=put(self.conv_weight, bf16=self.conv_weight.dtype == np.uint16),
            A_log=put(self.A_log), dt_bias=put(self.dt_bias),
            norm_weight=put(self.norm_weight) if self.output_norm else None,
            f_b_weight=None if self.f_b_weight is None else put(self.f_b_weight, bf16=True),
            conv_bias=None if self.conv_bias is None else put(self.conv_bias))

    def prepared(self, put=lambda a, bf16=False: a, **kw):
        import kda_decode as kd

        return kd.PreparedKda(**self.weights(put), eps=self.eps, lower_bound=self.lower_bound,
                              output_norm=self.output_norm, **kw)


# ---------------------------------------------------------------------------------------
# cache pools: the one builder of the suite (harness.Pool and the fuzzer's pools)
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class PoolSpec:
    """Shapes, dtypes and strides of a cache pool. Each cache is one full 2-D buffer [tiles,
    row]: a tile is a slot (windows, states) or a records row, followed by `*_pad` elements of
    padding. The fuzzer's Config has the same attributes and is used in its place."""

    H: int
    n: int  # slots
    window: int
    layout: str = "ds"  # conv windows: "ds" [n, 3D, window] or "sd" [n, window, 3D]
    conv_dtype: str = "bf16"
    state_dtype: str = "f32"
    Qr: int = 0  # 0: no records
    rows_r: int = 0
    conv_pad: int = 0
    state_pad: int = 0
    rec_pad: int = 0
    pending_stride: int = 1

    @property
    def D(self) -> int:
        return self.H * K


class Geometry:
    """Shapes and element strides of the cache views over the full buffers."""

    def __init__(self, c):
        self.c = c
        D = c.D
        self.conv_row = 3 * D * c.window + c.conv_pad
        self.state_row = c.H * K * K + c.state_pad
        self.corr_row = c.H * c.Qr * K + c.rec_pad
        self.kg_row = c.H * c.Qr * 2 * K + c.rec_pad

    def conv(self):
        c = self.c
        if c.layout == "ds":
            return (c.n, 3 * c.D, c.window), (self.conv_row, c.window, 1)
        return (c.n, c.window, 3 * c.D), (self.conv_row, 3 * c.D, 1)

    def state(self):
        c = self.c
        return (c.n, c.H, K, K), (self.state_row, K * K, K, 1)

    def corr(self):
        c = self.c
        return (c.rows_r, c.H, c.Qr, K), (self.corr_row, c.Qr * K, K, 1)

    def kg(self):
        c = self.c
        return (c.rows_r, c.H, c.Qr, 2 * K), (self.kg_row, c.Qr * 2 * K, 2 * K, 1)

    def pending(self):
        return (self.c.rows_r,), (self.c.pending_stride,)


def np_view(full: np.ndarray, shape, strides) -> np.ndarray:
    es = full.itemsize
    return np.lib.stride_tricks.as_strided(full, shape=shape, strides=tuple(s * es for s in strides))


BUFFERS = ("conv", "state", "corr", "kg", "pend")


class HostPool:
    """The caches as numpy full buffers (`b`: conv, state, corr, kg, pend) and their views.
    The views are plain slices of the buffers (their .base leads to the contiguous buffer, so
    a device copy can keep the strides)."""

    def __init__(self, c, bufs: dict):
        self.c, self.g, self.b = c, Geometry(c), bufs

    @staticmethod
    def create(c, rng, dist: str = "uniform", qk_scale: float = 1.0) -> "HostPool":
        """Random caches; slot / row padding holds random bits (NaN patterns included).
        dist: "uniform" (windows, states and records uniform with the standard deviations
        below) or "normal". qk_scale multiplies the q and k channels of every window (the
        extreme-input class: tiny post-conv q and k)."""
        g = Geometry(c)
        D = c.D

        def full(rows, row_len, logical_len, dtype):
            a = np.empty((rows, row_len), dtype)
            if row_len > logical_len:
                a.view(np.uint16 if a.itemsize == 2 else np.uint32)[:, logical_len:] = rng.integers(
                    0, 1 << (8 * a.itemsize), size=(rows, row_len - logical_len), dtype=np.uint64)
            return a

        def values(shape, scale):
            if dist == "normal":
                return rng.normal(0.0, scale, size=shape).astype(np.float32)
            # uniform in [-scale·√3, scale·√3): standard deviation `scale`
            return (rng.random(shape, dtype=np.float32) - np.float32(0.5)) * np.float32(scale * 2 * 3 ** 0.5)

        def as_bf16(v):
            return bf16(v) if dist == "normal" else v.view(np.uint32) >> 16  # truncated fp32 values

        cdt = np.uint16 if c.conv_dtype == "bf16" else np.float32
        sdt = np.uint16 if c.state_dtype == "bf16" else np.float32
        b = {"conv": full(c.n, g.conv_row, 3 * D * c.window, cdt), "state": full(c.n, g.state_row, c.H * K * K, sdt)}
        p = HostPool(c, b)
        shape = (c.n, 3 * D, c.window)
        win = values(shape, 1.0)
        win[:, :2 * D] *= np.float32(qk_scale)
        p.conv_logical()[...] = as_bf16(win) if cdt == np.uint16 else win
        shape = (c.n, c.H, K, K)
        st = values(shape, 0.5)
        p.state()[...] = as_bf16(st) if sdt == np.uint16 else st
        if c.Qr:
            b["corr"] = full(c.rows_r, g.corr_row, c.H * c.Qr * K, np.float32)
            b["kg"] = full(c.rows_r, g.kg_row, c.H * c.Qr * 2 * K, np.float32)
            b["pend"] = np.full((c.rows_r, c.pending_stride), 777, np.int32)
            p.corr()[...] = values((c.rows_r, c.H, c.Qr, K), 0.3)
            kg = values((c.rows_r, c.H, c.Qr, 2 * K), 0.1)
            kg[..., K:] = -np.abs(kg[..., K:])  # activated gates are <= 0
            p.kg()[...] = kg
            p.pending()[...] = 0
        return p

    def copy(self) -> "HostPool":
        return HostPool(self.c, {k: v.copy() for k, v in self.b.items()})

    # views (writable, over the full buffers)
    def conv(self):
        c = self.c
        v = self.b["conv"][:, :3 * c.D * c.window]
        return v.reshape(c.n, 3 * c.D, c.window) if c.layout == "ds" else v.reshape(c.n, c.window, 3 * c.D)

    def conv_logical(self):
        v = self.conv()
        return v if self.c.layout == "ds" else v.transpose(0, 2, 1)

    def state(self):
        c = self.c
        return self.b["state"][:, :c.H * K * K].reshape(c.n, c.H, K, K)

    def corr(self):
        c = self.c
        return self.b["corr"][:, :c.H * c.Qr * K].reshape(c.rows_r, c.H, c.Qr, K)

    def kg(self):
        c = self.c
        return self.b["kg"][:, :c.H * c.Qr * 2 * K].reshape(c.rows_r, c.H, c.Qr, 2 * K)

    def pending(self):
        return self.b["pend"][:, 0]

    def caches(self):
        import kda_decode as kd

        if self.c.Qr:
            return kd.Caches(self.conv(), self.state(), self.corr(), self.kg(), self.pending())
        return kd.Caches(self.conv(), self.state())

    def to_ref(self) -> ref.RefCaches:
        c = self.c
        conv = self.conv_logical()
        rc = ref.RefCaches(
            conv=f64(conv) if c.conv_dtype == "bf16" else conv.astype(np.float64),
            state=f64(self.state()) if c.state_dtype == "bf16" else self.state().astype(np.float64),
            state_bf16=c.state_dtype == "bf16")
        if c.Qr:
            rc.correction = self.corr().astype(np.float64)
            rc.key_gate = self.kg().astype(np.float64)
            rc.pending = self.pending().astype(np.int64)
        return rc


class Pool:
    """Cache pools (numpy, the layout under test) and their float64 mirror, for the property
    tests: a HostPool with normally distributed values.

    conv: DS [n, 3D, window] or SD [n, window, 3D], bf16 or fp32, slot stride padded by
    ``slot_pad`` elements; state [n, H, V, K] fp32 or bf16, slot stride padded likewise;
    records [rows_r, H, Qr, ·] fp32 and pending [rows_r] int32 when ``records`` = (rows_r, Qr).
    ``qk_scale`` multiplies the q and k channels of every window (tiny post-conv q and k).
    """

    def __init__(self, layer: Layer, n: int, window: int, *, conv_dtype: str = "bf16", layout: str = "ds",
                 state_dtype: str = "f32", records: Optional[tuple] = None, slot_pad: int = 0, seed: int = 1,
                 qk_scale: float = 1.0):
        rows_r, Qr = records if records is not None else (0, 0)
        self.spec = PoolSpec(H=layer.H, n=n, window=window, layout=layout, conv_dtype=conv_dtype,
                             state_dtype=state_dtype, Qr=Qr, rows_r=rows_r, conv_pad=slot_pad, state_pad=slot_pad)
        self.host = HostPool.create(self.spec, np.random.default_rng(seed), dist="normal", qk_scale=qk_scale)
        self.n, self.window, self.layout = n, window, layout
        self.conv_dtype, self.state_dtype = conv_dtype, state_dtype
        self.conv = self.host.conv()
        self.state = self.host.state()
        self.correction = self.key_gate = self.pending = None
        if records is not None:
            self.correction, self.key_gate, self.pending = self.host.corr(), self.host.kg(), self.host.pending()
        self.ref = self.host.to_ref()

    def caches(self):
        import kda_decode as kd

        return kd.Caches(conv_state=self.conv, state=self.state, correction=self.correction,
                         key_gate=self.key_gate, pending=self.pending)

    def logical_conv(self, conv=None) -> np.ndarray:
        """[n, 3D, window] view of the package's windows (raw dtype)."""
        c = self.conv if conv is None else conv
        return c if self.layout == "ds" else c.transpose(0, 2, 1)

    def snapshot(self) -> dict:
        """Bitwise copies of every package cache (logical conv layout)."""
        s = dict(conv=np.array(self.logical_conv()), state=np.array(self.state))
        if self.correction is not None:
            s.update(correction=self.correction.copy(), key_gate=self.key_gate.copy(), pending=self.pending.copy())
        return s

    def set_pending(self, row: int, value: int):
        self.pending[row] = value
        self.ref.pending[row] = value

    def sync_ref_from_package(self):
        """Makes the float64 mirror equal to what the package holds (exact conversion)."""
        c = self.logical_conv()
        self.ref.conv[...] = f64(c) if self.conv_dtype == "bf16" else c.astype(np.float64)
        self.ref.state[...] = f64(self.state) if self.state_dtype == "bf16" else self.state.astype(np.float64)
        if self.correction is not None:
            self.ref.correction[...] = self.correction
            self.ref.key_gate[...] = self.key_gate
            self.ref.pending[...] = self.pending


# ---------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------
class Inputs:
    """One step's inputs: the packed projection (with padding garbage) and float64 views."""

    def __init__(self, layer: Layer, rows: int, *, gate_mode: int = 0, pitch_extra: int = 0, seed: int = 2,
                 scale: float = 1.0, z_scale: float = 1.0, beta_scale: float = 1.0, align: int = 1,
                 qk_scale: float = 1.0):
        """align: round the pitch up to a multiple of `align` elements (8 = 16-byte rows, which
        the WS variant needs; otherwise it falls back to Wide). qk_scale multiplies the q
        and k columns (tiny post-conv q and k)."""
        rng = np.random.default_rng(seed)
        H, D = layer.H, layer.D
        self.gate_cols = D if gate_mode == 2 else R
        self.min_pitch = 4 * D + self.gate_cols + H
        self.pitch = -(-(self.min_pitch + pitch_extra) // align) * align
        pitch_extra = self.pitch - self.min_pitch
        x = rng.normal(0.0, scale, size=(rows, 3 * D))
        x[:, :2 * D] *= qk_scale
        qkv = bf16(x)
        og = bf16(rng.normal(0.0, 1.0, size=(rows, D)))
        if gate_mode == 2:
            gin = bf16(rng.normal(0.0, z_scale, size=(rows, D)))
        else:
            gin = bf16(rng.normal(0.0, z_scale, size=(rows, R)))
        beta = bf16(rng.normal(0.0, beta_scale, size=(rows, H)))
        proj = np.empty((rows, self.pitch), np.uint16)
        proj[:, :3 * D] = qkv
        proj[:, 3 * D:4 * D] = og
        proj[:, 4 * D:4 * D + self.gate_cols] = gin
        proj[:, 4 * D + self.gate_cols:self.min_pitch] = beta
        if pitch_extra:
            # garbage in the padding: NaN, inf and random patterns
            garbage = rng.integers(0, 1 << 16, size=(rows, pitch_extra), dtype=np.uint16)
            garbage[:, 0] = 0x7FC1
            if pitch_extra > 1:
                garbage[:, 1] = 0x7F80
            proj[:, self.min_pitch:] = garbage
        self.projected = proj
        self.raw = dict(qkv=qkv, out_gate=og, gate_in=gin, beta=beta)
        self.ref = {k: f64(v) for k, v in self.raw.items()}

    def views(self, rng_seed: int = 3) -> dict:
        """The four inputs as separate views, each a column slice of a wider buffer."""
        rng = np.random.default_rng(rng_seed)
        out = {}
        for name, a in self.raw.items():
            extra = int(rng.integers(1, 9))
            buf = rng.integers(0, 1 << 16, size=(a.shape[0], a.shape[1] + extra), dtype=np.uint16)
            off = int(rng.integers(0, extra + 1))
            v = buf[:, off:off + a.shape[1]]
            v[...] = a
            out[name] = v
        return out


def tiny_qk_scale(post_conv: float) -> float:
    """The scale of the pre-conv q / k inputs, windows and conv bias that gives post-conv q and
    k of about `post_conv` per element (the extreme-input class, where the l2 norm's 1e-6
    matters): with conv taps N(0, 0.5) the conv output has a standard deviation of about
    0.5·√W·s, and SiLU(a) ≈ a / 2 near 0."""
    return 2.0 * post_conv


def draw_eps(rng) -> float:
    """An RMSNorm epsilon, log-uniform in [1e-6, 1e-2]."""
    return float(10.0 ** rng.uniform(-6.0, -2.0))


def strided_table(ids: np.ndarray, *, extra_cols: int = 3, col0: int = 1, fill: int = 12345) -> np.ndarray:
    """Embeds an int32 slot array ([B] or [B, c]) as a column slice of a bigger table."""
    ids = np.asarray(ids, dtype=np.int32)
    if ids.ndim == 1:
        t = np.full((ids.shape[0], extra_cols + 1), fill, np.int32)
        t[:, col0] = ids
        return t[:, col0]
    B, c = ids.shape
    t = np.full((B, c + extra_cols), fill, np.int32)
    t[:, col0:col0 + c] = ids
    return t[:, col0:col0 + c]


def poison(out: np.ndarray, pattern: int = 0x4B1D):
    out[...] = pattern


# ---------------------------------------------------------------------------------------
# checks (SPEC §8)
# ---------------------------------------------------------------------------------------
def check_out(out_bits: np.ndarray, ref_out: np.ndarray, pads: list, q: int, what: str = "out"):
    """Non-pad rows: |out − ref| ≤ 2⁻⁸·|ref| + 2e-3·max|ref| (max over the step's rows);
    pad rows exactly zero."""
    got = f64(out_bits)
    rows = ref_out.shape[0]
    mask = np.ones(rows, bool)
    for b in pads:
        mask[b * q:(b + 1) * q] = False
    for b in pads:
        z = out_bits[b * q:(b + 1) * q]
        assert (z == 0).all(), f"{what}: pad request {b} rows not zero"
    if not mask.any():
        return 0.0
    g, r = got[mask], ref_out[mask]
    assert np.isfinite(g).all(), f"{what}: non-finite output"
    mx = np.abs(r).max()
    bound = 2.0 ** -8 * np.abs(r) + 2e-3 * mx
    err = np.abs(g - r)
    bad = ~(err <= bound)
    assert not bad.any(), (f"{what}: {bad.sum()} elements over the bound; worst err/bound "
                           f"{(err / np.maximum(bound, 1e-300)).max():.3f}")
    return float((err / np.maximum(bound, 1e-300)).max())


def check_rel(got: np.ndarray, want: np.ndarray, tol: float, what: str):
    """max|got − want| / max|want| ≤ tol."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if want.size == 0:
        return 0.0
    assert np.isfinite(got).all(), f"{what}: non-finite values"
    mx = np.abs(want).max()
    err = np.abs(got - want).max()
    rel = err / mx if mx > 0 else err
    assert rel <= tol, f"{what}: max|err|/max|ref| = {rel:.3e} > {tol:.1e}"
    return float(rel)


def check_bf16_state(got_bits: np.ndarray, want: np.ndarray, tol: float, what: str):
    """bf16 stored state vs the reference rounded to bf16: within 1 bf16 ulp of the
    reference + tol·max|ref| (the rounding of an fp32 and a float64 value may differ by one
    ulp near a rounding midpoint)."""
    got = f64(got_bits)
    want = np.asarray(want, np.float64)
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(want), 1e-30))) - 7)
    err = np.abs(got - want)
    bound = ulp + tol * np.abs(want).max()
    assert (err <= bound).all(), f"{what}: {(err > bound).sum()} elements beyond 1 bf16 ulp + {tol:.1e}·max|ref|"


def check_caches(pool: Pool, before: dict, n_chain: int = 1, what: str = ""):
    """Compares the package caches with the float64 mirror after an operation.

    Written slots/rows (per the mirror): state and records within 1e-5·n·max|ref| (bf16
    state: 1 ulp + that), windows bitwise, pending exactly. Everything else bitwise as in
    ``before``.
    """
    r = pool.ref
    tol = 1e-5 * n_chain
    conv = pool.logical_conv()
    n = pool.n
    ws = sorted(r.written_conv)
    ss = sorted(r.written_state)
    # windows: bitwise equal to the mirror (values are exact copies)
    if ws:
        want = r.conv[ws]
        want_raw = bf16(want) if pool.conv_dtype == "bf16" else want.astype(np.float32)
        assert np.array_equal(bits_of(conv[ws]), bits_of(want_raw)), f"{what}: conv windows differ (slots {ws})"
    if ss:
        if pool.state_dtype == "bf16":
            check_bf16_state(pool.state[ss], r.state[ss], tol, f"{what}: state (bf16)")
        else:
            check_rel(pool.state[ss], r.state[ss], tol, f"{what}: state")
    untouched_c = [i for i in range(n) if i not in r.written_conv]
    untouched_s = [i for i in range(n) if i not in r.written_state]
    assert np.array_equal(bits_of(conv[untouched_c]), bits_of(before["conv"][untouched_c])), \
        f"{what}: windows of untouched slots changed"
    assert np.array_equal(bits_of(pool.state[untouched_s]), bits_of(before["state"][untouched_s])), \
        f"{what}: state of untouched slots changed"
    if pool.correction is not None:
        rows = sorted(r.written_rows)
        if rows:
            check_rel(pool.correction[rows], r.correction[rows], tol, f"{what}: records u")
            check_rel(pool.key_gate[rows], r.key_gate[rows], tol, f"{what}: records (k, g)")
        other = [i for i in range(pool.correction.shape[0]) if i not in r.written_rows]
        assert np.array_equal(bits_of(pool.correction[other]), bits_of(before["correction"][other])), \
            f"{what}: records u of untouched rows changed"
        assert np.array_equal(bits_of(pool.key_gate[other]), bits_of(before["key_gate"][other])), \
            f"{what}: records (k, g) of untouched rows changed"
        assert np.array_equal(pool.pending, r.pending.astype(np.int32)), f"{what}: pending differs"
