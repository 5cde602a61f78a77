"""An independent float64 numpy evaluation of SPEC §3 / §4 (the KDA decode step).

Written from the SPEC alone; it does not import kda_decode. bf16 inputs are decoded
exactly, everything else is float64. It models:

* request resolution: pads (negative id or the null slot at the first slot), the caller
  errors found in the data (SLOT_RANGE, ROW_RANGE, ACCEPTED, PENDING, PAD_START) with the
  lowest offending request index; an erroneous request is treated as a pad;
* the conv window rule (taps from column accepted-1, window roll-back), conv + SiLU;
* l2 norm of q and k, the q scale, the softplus and lower-bound gates, beta;
* the delta rule (decay, then u = beta·(v − S·k), S += u kᵀ, o = S q);
* the gated RMSNorm, or none (SPEC §9, ``RefLayer.output_norm = False``: out = o);
* the step kinds decode (with out_slots), per_token, record (records u, k, g), fused
  (fold pending, write the checkpoint, then record) and commit / flush;
* optional bf16 storage of the state (every store rounds to bf16, the running state stays
  unrounded within a step; a fused step continues from what it stored).

Caches are kept as float64 arrays holding exactly the values stored (windows: bf16 or fp32
values; state: fp32/bf16 values initially, then float64 results, or bf16-rounded results
when ``state_bf16``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

K = 128
R = 128

SLOT_RANGE, ROW_RANGE, ACCEPTED, PENDING, PAD_START = 1, 2, 4, 8, 16


# ---------------------------------------------------------------------------------------
# bf16
# ---------------------------------------------------------------------------------------
def bf16_bits_to_f64(u) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float64, exact."""
    u = np.asarray(u, dtype=np.uint16)
    return (u.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def f64_to_bf16_bits(x) -> np.ndarray:
    """float64 -> bf16 bit patterns, rounded to nearest even directly from float64."""
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros(x.shape, dtype=np.uint16)
    fin = np.isfinite(x) & (x != 0)
    m, e = np.frexp(np.where(fin, x, 1.0))  # x = m·2^e, 0.5 <= |m| < 1
    # bf16 keeps 8 significant bits: round m·2^8 to an integer, half to even.
    r = np.round(m * 256.0) / 256.0 * np.exp2(e.astype(np.float64))
    with np.errstate(over="ignore"):
        r32 = r.astype(np.float32)  # exact (8 significant bits); overflow rounds to inf
    bits = (r32.view(np.uint32) >> 16).astype(np.uint16)
    out[fin] = bits[fin]
    neg_zero = (x == 0) & np.signbit(x)
    out[neg_zero] = 0x8000
    out[np.isinf(x)] = np.where(x[np.isinf(x)] > 0, 0x7F80, 0xFF80)
    out[np.isnan(x)] = 0x7FC0
    return out


def round_bf16(x) -> np.ndarray:
    """float64 rounded through bf16."""
    return bf16_bits_to_f64(f64_to_bf16_bits(x))


# ---------------------------------------------------------------------------------------
# scalar functions of SPEC §3
# ---------------------------------------------------------------------------------------
def sigmoid(x):
    x = np.asarray(x, dtype=np.float64)
    ex = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + ex), ex / (1.0 + ex))


def silu(a):
    return a * sigmoid(a)


def softplus(z):
    z = np.asarray(z, dtype=np.float64)
    return np.where(z > 20.0, z, np.log1p(np.exp(np.minimum(z, 20.0))))


def activate_gate(z, a, lower_bound: Optional[float]):
    """g = -a·softplus(z), or lower_bound·sigmoid(a·z) when lower_bound is set."""
    if lower_bound is None:
        return -a * softplus(z)
    return lower_bound * sigmoid(a * z)


def l2norm(y):
    """y / sqrt(Σy² + 1e-6) over the last axis."""
    return y / np.sqrt(np.sum(y * y, axis=-1, keepdims=True) + 1e-6)


# ---------------------------------------------------------------------------------------
# layer and caches
# ---------------------------------------------------------------------------------------
@dataclasses.dataclass
class RefLayer:
    """The layer's weights as float64 (decoded from what the package is given)."""

    H: int
    W: int
    conv_w: np.ndarray  # [3D, W]; conv_w[c, W-1] multiplies the newest input
    conv_b: Optional[np.ndarray]  # [3D] or None
    f_b: Optional[np.ndarray]  # [D, R] or None
    A_log: np.ndarray  # [H]
    dt_bias: np.ndarray  # [D]
    norm_w: np.ndarray  # [K]
    eps: float = 1e-5
    lower_bound: Optional[float] = None
    output_norm: bool = True  # False (SPEC §9): out = o, no RMSNorm, no output gate

    @property
    def D(self) -> int:
        return self.H * K


@dataclasses.dataclass
class RefCaches:
    """Logical caches in float64: conv [slots, 3D, window], state [slots, H, V, K],
    records correction [rows_r, H, Qr, V], key_gate [rows_r, H, Qr, 2K], pending [rows_r]."""

    conv: np.ndarray
    state: np.ndarray
    correction: Optional[np.ndarray] = None
    key_gate: Optional[np.ndarray] = None
    pending: Optional[np.ndarray] = None
    state_bf16: bool = False
    # what the last operation wrote (for the "untouched" checks)
    written_conv: set = dataclasses.field(default_factory=set)
    written_state: set = dataclasses.field(default_factory=set)
    written_rows: set = dataclasses.field(default_factory=set)
    written_pending: set = dataclasses.field(default_factory=set)

    def copy(self) -> "RefCaches":
        c = lambda a: None if a is None else a.copy()  # noqa: E731
        return RefCaches(c(self.conv), c(self.state), c(self.correction), c(self.key_gate), c(self.pending),
                         self.state_bf16)

    def clear_written(self):
        self.written_conv, self.written_state, self.written_rows, self.written_pending = set(), set(), set(), set()

    def _store_state(self, slot, h, S):
        self.state[slot, h] = round_bf16(S) if self.state_bf16 else S
        self.written_state.add(int(slot))


@dataclasses.dataclass
class StepResult:
    out: np.ndarray  # [rows, D] float64; pad / error rows are zero
    flags: int
    first: int  # lowest offending request, -1 when none
    pads: list  # request indices treated as pads (including errors)
    # smallest and largest Σ y² of the post-conv q and k vectors over the run requests (lets a
    # test confirm that its inputs reach the regime it is meant to cover); None when none ran
    qk_sumsq: Optional[tuple] = None


def _is_pad(i, null_slot):
    return i < 0 or i == null_slot


def _slot(slots, b, t=0):
    return int(slots[b]) if slots.ndim == 1 else int(slots[b, t])


# ---------------------------------------------------------------------------------------
# one step (SPEC §3, §4)
# ---------------------------------------------------------------------------------------
def step(layer: RefLayer, inputs: dict, caches: RefCaches, *, mode: str, q: int, slots, accepted=None,
         out_slots=None, record_rows=None, null_slot: int = 0, gate_mode: int = 0) -> StepResult:
    """Runs one step on the float64 caches (in place) and returns the output.

    Args:
        inputs: float64 arrays qkv [rows, 3D], out_gate [rows, D], gate_in [rows, R] (modes
            0, 1) or [rows, D] (mode 2), beta [rows, H].
        slots: int array [B] or [B, cols]; B = rows / q.
        accepted / out_slots / record_rows: int arrays [>= B] or None.
        gate_mode: 0/1 (z = F_B·f_a) or 2 (z = gate_in).
    """
    H, W, D = layer.H, layer.W, layer.D
    qkv = inputs["qkv"]
    rows = qkv.shape[0]
    B = rows // q
    slots = np.asarray(slots)
    n_conv, window = caches.conv.shape[0], caches.conv.shape[2]
    n_state = caches.state.shape[0]
    cols = 1 if slots.ndim == 1 else slots.shape[1]
    out = np.zeros((rows, D))
    flags, first, pads = 0, -1, []
    sumsq = []
    caches.clear_written()

    for b in range(B):
        s0 = _slot(slots, b, 0)
        if _is_pad(s0, null_slot):
            pads.append(b)
            continue
        f = 0
        acc = 1 if accepted is None else int(accepted[b])
        acc_ok = 1 <= acc <= window - W + 2 and (mode != "per_token" or acc <= cols)
        if not acc_ok:
            f |= ACCEPTED
        if s0 >= n_conv or s0 >= n_state:
            f |= SLOT_RANGE
        win_out, st_in, st_out, row, pend = s0, s0, s0, None, 0
        if mode == "decode":
            if out_slots is not None:
                os_ = int(out_slots[b])
                if os_ < 0 or os_ >= n_conv or os_ >= n_state or os_ == null_slot:
                    f |= ROW_RANGE
                win_out = st_out = os_
        elif mode == "per_token":
            if acc_ok:
                st_in = _slot(slots, b, acc - 1)
                if _is_pad(st_in, null_slot):
                    f |= PAD_START
                elif st_in >= n_state:
                    f |= SLOT_RANGE
            for t in range(1, q):
                i = _slot(slots, b, t)
                if not _is_pad(i, null_slot) and i >= n_state:
                    f |= SLOT_RANGE
        elif mode in ("record", "fused", "append"):
            row = s0 if record_rows is None else int(record_rows[b])
            rows_r = caches.correction.shape[0]
            Qr = caches.correction.shape[2]
            row_ok = 0 <= row < rows_r and row != null_slot
            if not row_ok:
                f |= ROW_RANGE
            if mode in ("fused", "append") and row_ok:
                pend = int(caches.pending[row])
                if pend > Qr or pend < 0:  # any count up to Qr (SPEC §4)
                    f |= PENDING
        else:
            raise ValueError(mode)
        if f:
            flags |= f
            first = b if first < 0 else min(first, b)
            pads.append(b)
            continue
        out[b * q:(b + 1) * q] = _run_request(layer, inputs, caches, mode, q, b, slots, acc, s0, win_out, st_in,
                                              st_out, row, pend, null_slot, gate_mode, sumsq)
    qk = (min(s[0] for s in sumsq), max(s[1] for s in sumsq)) if sumsq else None
    return StepResult(out, flags, first, pads, qk)


def _run_request(layer, inputs, caches, mode, q, b, slots, acc, win_in, win_out, st_in, st_out, row, pend, null_slot,
                 gate_mode, sumsq):
    H, W, D = layer.H, layer.W, layer.D
    off = acc - 1
    r0 = b * q
    x = inputs["qkv"][r0:r0 + q]  # [q, 3D]
    old = caches.conv[win_in].copy()  # [3D, window]
    seq = np.concatenate([old[:, off:off + W - 1], x.T], axis=1)  # [3D, W-1+q]

    out = np.zeros((q, D))
    y = np.empty((q, 3 * D))
    for t in range(q):
        a = np.sum(layer.conv_w * seq[:, t:t + W], axis=1)
        if layer.conv_b is not None:
            a = a + layer.conv_b
        y[t] = silu(a)
    yq = y[:, :D].reshape(q, H, K)
    yk = y[:, D:2 * D].reshape(q, H, K)
    yv = y[:, 2 * D:].reshape(q, H, K)
    ss = np.concatenate([np.sum(yq * yq, axis=-1).ravel(), np.sum(yk * yk, axis=-1).ravel()])
    sumsq.append((float(ss.min()), float(ss.max())))
    qn = l2norm(yq) * K ** -0.5
    kn = l2norm(yk)
    gin = inputs["gate_in"][r0:r0 + q]
    if gate_mode == 2:
        z = gin.reshape(q, H, K).copy()
    else:
        z = (gin @ layer.f_b.T).reshape(q, H, K)
    z = z + layer.dt_bias.reshape(1, H, K)
    a_h = np.exp(layer.A_log).reshape(1, H, 1)
    g = activate_gate(z, a_h, layer.lower_bound)  # [q, H, K]
    beta = sigmoid(inputs["beta"][r0:r0 + q])  # [q, H]

    S = caches.state[st_in].copy()  # [H, V, K]
    # append: a full row is folded and written back, then the token starts a new row; else
    # the pending records are folded into a running copy that is not written (SPEC §4)
    Qr = caches.correction.shape[2] if caches.correction is not None else 0
    append_full = mode == "append" and pend == Qr
    pos0 = (0 if append_full else pend) if mode == "append" else 0  # record position of token 0
    if mode == "append" and pend > 0:
        S = _fold(S, caches, row, pend)
        if append_full:
            for h in range(H):
                caches._store_state(st_in, h, S[h])
            if caches.state_bf16:
                S = round_bf16(S)
    if mode == "fused":
        if pend > 0:
            S = _fold(S, caches, row, pend)
            for h in range(H):
                caches._store_state(st_in, h, S[h])
            if caches.state_bf16:
                S = round_bf16(S)
        else:
            caches.written_state.add(int(st_in))  # the checkpoint is written back (unchanged)
    records = mode in ("record", "fused", "append")
    o_all = np.zeros((q, H, K))
    for t in range(q):
        e = np.exp(g[t])  # [H, K]
        S = S * e[:, None, :]
        u = beta[t][:, None] * (yv[t] - np.einsum("hvk,hk->hv", S, kn[t]))
        S = S + u[:, :, None] * kn[t][:, None, :]
        o_all[t] = np.einsum("hvk,hk->hv", S, qn[t])
        if records:
            caches.correction[row, :, pos0 + t] = u
            caches.key_gate[row, :, pos0 + t, :K] = kn[t]
            caches.key_gate[row, :, pos0 + t, K:] = g[t]
            caches.written_rows.add(int(row))
        if mode == "per_token":
            dst = _slot(slots, b, t)
            if not _is_pad(dst, null_slot):
                for h in range(H):
                    caches._store_state(dst, h, S[h])
    if mode == "decode":
        for h in range(H):
            caches._store_state(st_out, h, S[h])
    if mode in ("fused", "append"):
        caches.pending[row] = 0 if mode == "fused" else pos0 + 1
        caches.written_pending.add(int(row))

    if layer.output_norm:
        og = sigmoid(inputs["out_gate"][r0:r0 + q].reshape(q, H, K))
        rms = np.sqrt(np.mean(o_all * o_all, axis=-1, keepdims=True) + layer.eps)
        out = (o_all / rms * layer.norm_w.reshape(1, 1, K) * og).reshape(q, D)
    else:
        out = o_all.reshape(q, D)

    w = W - 2 + q
    new = np.empty((3 * D, w))
    for i in range(W - 2):
        new[:, i] = old[:, off + 1 + i]
    new[:, W - 2:] = x.T
    caches.conv[win_out][:, :w] = new
    caches.written_conv.add(int(win_out))
    return out


def _fold(S, caches, row, n):
    """S = S·exp(g_t); S += u_t k_tᵀ for the first n records of `row` (all heads)."""
    for t in range(n):
        u = caches.correction[row, :, t]  # [H, V]
        k = caches.key_gate[row, :, t, :K]  # [H, K]
        g = caches.key_gate[row, :, t, K:]
        S = S * np.exp(g)[:, None, :]
        S = S + u[:, :, None] * k[:, None, :]
    return S


def commit(layer: RefLayer, caches: RefCaches, slots, record_rows, counts, *, null_slot: int = 0,
           flush: bool = False) -> StepResult:
    """commit (counts given) or flush (counts = pending[row], then pending[row] = 0)."""
    slots = np.asarray(slots)
    B = slots.shape[0]
    n_state = caches.state.shape[0]
    rows_r, Qr = caches.correction.shape[0], caches.correction.shape[2]
    flags, first, pads = 0, -1, []
    caches.clear_written()
    for b in range(B):
        s = _slot(slots, b, 0)
        if _is_pad(s, null_slot):
            pads.append(b)
            continue
        f = 0
        if s >= n_state:
            f |= SLOT_RANGE
        row = s if record_rows is None else int(record_rows[b])
        row_ok = 0 <= row < rows_r and row != null_slot
        if not row_ok:
            f |= ROW_RANGE
        n = int(counts[b]) if not flush else (int(caches.pending[row]) if row_ok else 0)
        if n < 0 or n > Qr:
            f |= PENDING
        if f:
            flags |= f
            first = b if first < 0 else min(first, b)
            pads.append(b)
            continue
        if n > 0:
            S = _fold(caches.state[s].copy(), caches, row, n)
            for h in range(layer.H):
                caches._store_state(s, h, S[h])
        if flush:
            caches.pending[row] = 0
            caches.written_pending.add(int(row))
    return StepResult(np.zeros((0, layer.D)), flags, first, pads)
