"""Test harness: random layers, cache pools and inputs for kda_decode, mirrored into the
float64 reference (reference.py), and the SPEC §8 checks.

Package-side arrays are numpy (CPU backend); test_cuda.py moves them to torch CUDA
tensors. bf16 data are uint16 bit patterns.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

import reference as ref

K = ref.K
R = ref.R


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
                 a_log_range=(-1.0, 1.0)):
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
        self.f_b_weight = bf16(rng.normal(0.0, 1.0 / np.sqrt(R), size=(D, R))) if f_b else None
        self.A_log = rng.uniform(*a_log_range, size=H).astype(np.float32)
        self.dt_bias = rng.normal(0.0, 0.5, size=D).astype(np.float32)
        self.norm_weight = rng.uniform(0.5, 1.5, size=K).astype(np.float32)
        self.eps = eps
        self.lower_bound = lower_bound
        self.ref = ref.RefLayer(
            H=H, W=W, conv_w=cw64,
            conv_b=None if self.conv_bias is None else self.conv_bias.astype(np.float64),
            f_b=None if self.f_b_weight is None else f64(self.f_b_weight),
            A_log=self.A_log.astype(np.float64), dt_bias=self.dt_bias.astype(np.float64),
            norm_w=self.norm_weight.astype(np.float64), eps=eps, lower_bound=lower_bound)

    def weights(self, put=lambda a, bf16=False: a) -> dict:
        """The constructor's weight keywords (put: converts each array, e.g. to torch)."""
        return dict(
            conv_weight=put(self.conv_weight, bf16=self.conv_weight.dtype == np.uint16),
            A_log=put(self.A_log), dt_bias=put(self.dt_bias), norm_weight=put(self.norm_weight),
            f_b_weight=None if self.f_b_weight is None else put(self.f_b_weight, bf16=True),
            conv_bias=None if self.conv_bias is None else put(self.conv_bias))

    def prepared(self, put=lambda a, bf16=False: a, **kw):
        import kda_decode as kd

        return kd.PreparedKda(**self.weights(put), eps=self.eps, lower_bound=self.lower_bound, **kw)


# ---------------------------------------------------------------------------------------
# cache pool
# ---------------------------------------------------------------------------------------
class Pool:
    """Cache pools (numpy, the layout under test) and their float64 mirror.

    conv: DS [n, 3D, window] or SD [n, window, 3D], bf16 or fp32, slot stride padded by
    ``slot_pad`` elements; state [n, H, V, K] fp32 or bf16, slot stride padded likewise;
    records [rows_r, H, Qr, ·] fp32 and pending [rows_r] int32 when ``records`` = (rows_r, Qr).
    """

    def __init__(self, layer: Layer, n: int, window: int, *, conv_dtype: str = "bf16", layout: str = "ds",
                 state_dtype: str = "f32", records: Optional[tuple] = None, slot_pad: int = 0, seed: int = 1):
        rng = np.random.default_rng(seed)
        H, D = layer.H, layer.D
        self.n, self.window, self.layout = n, window, layout
        self.conv_dtype, self.state_dtype = conv_dtype, state_dtype
        per = 3 * D * window
        logical = rng.normal(0.0, 1.0, size=(n, 3 * D, window))
        if conv_dtype == "bf16":
            conv_full = np.zeros((n, per + slot_pad), np.uint16)
            vals = bf16(logical)
            conv_ref = f64(vals)
        else:
            conv_full = np.zeros((n, per + slot_pad), np.float32)
            vals = logical.astype(np.float32)
            conv_ref = vals.astype(np.float64)
        if slot_pad:
            conv_full[:, per:] = 0x5A5A if conv_dtype == "bf16" else 7.0
        if layout == "ds":
            self.conv = conv_full[:, :per].reshape(n, 3 * D, window)
            self.conv[...] = vals
        else:
            self.conv = conv_full[:, :per].reshape(n, window, 3 * D)
            self.conv[...] = vals.transpose(0, 2, 1)
        self._conv_full = conv_full

        hs = H * K * K
        st = rng.normal(0.0, 0.5, size=(n, H, K, K))
        if state_dtype == "bf16":
            state_full = np.full((n, hs + slot_pad), 0x3F80, np.uint16)
            self.state = state_full[:, :hs].reshape(n, H, K, K)
            self.state[...] = bf16(st)
            st_ref = f64(self.state)
        else:
            state_full = np.full((n, hs + slot_pad), 3.0, np.float32)
            self.state = state_full[:, :hs].reshape(n, H, K, K)
            self.state[...] = st.astype(np.float32)
            st_ref = self.state.astype(np.float64)
        self._state_full = state_full

        self.correction = self.key_gate = self.pending = None
        corr_ref = kg_ref = pend_ref = None
        if records is not None:
            rows_r, Qr = records
            self.correction = rng.normal(0.0, 0.3, size=(rows_r, H, Qr, K)).astype(np.float32)
            kg = rng.normal(0.0, 0.1, size=(rows_r, H, Qr, 2 * K))
            kg[..., K:] = -np.abs(kg[..., K:])  # activated gates are <= 0
            self.key_gate = kg.astype(np.float32)
            self.pending = np.zeros(rows_r, np.int32)
            corr_ref = self.correction.astype(np.float64)
            kg_ref = self.key_gate.astype(np.float64)
            pend_ref = self.pending.astype(np.int64)
        self.ref = ref.RefCaches(conv=conv_ref, state=st_ref, correction=corr_ref, key_gate=kg_ref,
                                 pending=pend_ref, state_bf16=state_dtype == "bf16")

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
                 scale: float = 1.0, z_scale: float = 1.0, beta_scale: float = 1.0, align: int = 1):
        """align: round the pitch up to a multiple of `align` elements (8 = 16-byte rows, which
        the Stream variant needs; otherwise it falls back to Wide)."""
        rng = np.random.default_rng(seed)
        H, D = layer.H, layer.D
        self.gate_cols = D if gate_mode == 2 else R
        self.min_pitch = 4 * D + self.gate_cols + H
        self.pitch = -(-(self.min_pitch + pitch_extra) // align) * align
        pitch_extra = self.pitch - self.min_pitch
        qkv = bf16(rng.normal(0.0, scale, size=(rows, 3 * D)))
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
