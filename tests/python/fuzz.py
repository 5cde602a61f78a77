#!/usr/bin/env python3
"""Differential fuzzer of kda_decode (SPEC §8).

    python tests/python/fuzz.py --configs N --seed S [--device cpu|cuda|torch-cpu]
                                [--sample-f64 K] [--max-seconds T] [--replay S:I] [-v]

Each configuration is drawn at random from its own seed (S, I) and holds a layer (H, conv
bias, softplus or lower-bound gate, with or without F_B, gate mode 0, 1 or 2, fp32 or bf16
conv weight, an RMSNorm epsilon in [1e-6, 1e-2], a conv width W of 2..5 on the CPU backend
(4 on CUDA), in one configuration in five post-conv q and k near 1e-3 or 1e-4), a cache pool (DS or SD windows, bf16 or fp32 windows, fp32 or bf16 state,
padded slot strides of the window / state / records pools, a strided pending column, a null
slot of 0, -1 or some other id) and a sequence of 1-4 steps chained on that pool: decode
(optionally with out_slots), append (any pending count, a full row too), per_token (row
width >= q, pads at t > 0), record, fused (pending = 0 or accepted, accepted may exceed q),
commit and flush, each with its own B
(0 included), q, disjoint slot permutations, index tensors laid out densely, as block-table
column slices, column-major or every other column, packed rows with a padded pitch or four
separate views, pad requests and, in about one step in eight, caller errors in the data.

--device cpu         the CPU backend against the float64 reference (reference.py) at every
                     step: SPEC §8 "each backend vs float64".
--device cuda        the CUDA backend, with a variant forced at random ('split', 'wide',
                     'ws' with 16-byte aligned rows and caches, 'auto'), against the CPU
                     backend on the same inputs: SPEC §8 "backend vs backend"; for a sample of
                     --sample-f64 configurations both backends also against float64.
--device torch-cpu   the cuda code path with torch CPU tensors (the forced variant is not
                     applied): a self-test of this script where there is no GPU.

Every operation is checked completely: status flags and first request; out (pad and error
rows zero, padding columns untouched); written state slots, records rows and pending; conv
windows bitwise; every byte the step does not own (other slots, slot padding, records rows)
bitwise unchanged. One line per mismatch names the configuration and how to replay it; the
last line is the summary "fuzz: N configs, M mismatches". Exit status 1 on a mismatch. On a
terminal (and not under CI) a progress line per chunk shows the elapsed time and the time left.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
import traceback
from typing import List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import reference as ref  # noqa: E402
from harness import (BUFFERS, Geometry, HostPool, Inputs, Layer, bf16, bits_of, check_bf16_state,  # noqa: E402
                     check_out, check_rel, draw_eps, f64, tiny_qk_scale)

from kda_decode.devices import Device  # noqa: E402  (the package's data adapter, shared with main and golden)

K = ref.K
R = ref.R
W = 4  # the conv width the CUDA kernels take (SPEC §1); the CPU backend's configurations draw 2..5
KINDS = ("decode", "append", "per_token", "record", "fused", "commit", "flush")
GPU_VARIANTS = ("split", "wide", "ws", "auto")
POISON = 0x4B1D


# =========================================================================================
# configurations
# =========================================================================================
@dataclasses.dataclass
class Op:
    """One operation of a configuration (a step, a commit or a flush)."""

    kind: str
    q: int = 1
    slots: np.ndarray = None  # logical ids: [B] or [B, cols]
    accepted: Optional[np.ndarray] = None
    out_slots: Optional[np.ndarray] = None
    record_rows: Optional[np.ndarray] = None
    counts: Optional[np.ndarray] = None  # commit
    pending: Optional[dict] = None  # {records row: value} set before the operation
    layout: str = "dense"  # index tensors: dense | table | colmajor | stride2
    slots_2d: bool = False  # decode / record / fused / commit: slots as [B, 1]
    views: bool = False  # run_views instead of run
    pitch_extra: int = 0
    out_extra: int = 0
    seed: int = 0  # inputs
    error: str = ""  # the caller error injected (for the description)

    @property
    def B(self) -> int:
        return int(self.slots.shape[0])

    def describe(self) -> str:
        s = f"{self.kind}(B={self.B}"
        if self.kind not in ("commit", "flush"):
            s += f",q={self.q}"
        if self.kind == "per_token":
            s += f",cols={self.slots.shape[1]}"
        if self.accepted is not None:
            s += f",acc={list(map(int, self.accepted))}"
        if self.out_slots is not None:
            s += ",out_slots"
        if self.record_rows is not None:
            s += ",rows"
        if self.pending:
            s += f",pending={sorted(self.pending.items())}"
        if self.counts is not None:
            s += f",counts={list(map(int, self.counts))}"
        s += f",{self.layout}"
        if self.views:
            s += ",views"
        if self.pitch_extra:
            s += f",pitch+{self.pitch_extra}"
        if self.error:
            s += f",ERR:{self.error}"
        return s + ")"


@dataclasses.dataclass
class Config:
    """A layer, a cache pool and a sequence of operations on it."""

    H: int = 1
    lb: Optional[float] = None
    bias: bool = True
    f_b: bool = True
    gate: int = 0  # 0: z = F_B·f_a (policy 'auto' or 0), 2: precomputed
    gate_policy: str = "auto"  # 'auto' | '0' | '1' | '2'
    conv_w_bf16: bool = False
    layout: str = "ds"
    conv_dtype: str = "bf16"
    state_dtype: str = "f32"
    n: int = 8
    window: int = 3
    Qr: int = 0  # 0: no records
    conv_pad: int = 0
    state_pad: int = 0
    rec_pad: int = 0
    pending_stride: int = 1
    null_slot: int = 0
    variant: str = "auto"  # forced on the GPU
    align: int = 1  # input pitch alignment in elements (8: 16-byte rows)
    seed: int = 0  # layer and pool values
    a_log_range: tuple = (-1.0, 1.0)
    W: int = W  # conv taps
    eps: float = 1e-5  # RMSNorm epsilon
    tiny_qk: float = 0.0  # > 0: post-conv q and k of about this size per element
    large: bool = False  # a large grid (_make_large)
    ops: List[Op] = dataclasses.field(default_factory=list)

    @property
    def D(self) -> int:
        return self.H * K

    @property
    def rows_r(self) -> int:
        return self.n if self.Qr else 0

    def describe(self) -> str:
        s = (f"H={self.H} {'lb=%.2f' % self.lb if self.lb is not None else 'softplus'} "
             f"{'bias' if self.bias else 'nobias'} {'F_B' if self.f_b else 'noF_B'} gate={self.gate_policy} "
             f"{self.layout} conv={self.conv_dtype} state={self.state_dtype} n={self.n} window={self.window} "
             f"Qr={self.Qr} pads(conv={self.conv_pad},state={self.state_pad},rec={self.rec_pad},"
             f"pend_stride={self.pending_stride}) null={self.null_slot} variant={self.variant} align={self.align} "
             f"W={self.W} eps={self.eps:.2e}" + (f" tiny_qk={self.tiny_qk:g}" if self.tiny_qk else ""))
        return s + (" large" if self.large else "") + " ops=[" + ", ".join(o.describe() for o in self.ops) + "]"


def _choice(rng, items, p=None):
    return items[int(rng.choice(len(items), p=p))]


def config_seed(seed: int, index: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1, np.uint64)[0] >> 1)


# On CUDA one configuration in LARGE_EVERY is a large grid (_make_large): the others' pools stay
# tiny, and the Wide kernels' forms for grids beyond four CTAs per SM (the dense verify form, the
# six-CTA q = 1 kernel) are only reached from about 530 items on a 132-SM GPU.
LARGE_EVERY = 64


def random_config(seed: int, index: int, device: str = "cpu", large_every: Optional[int] = None) -> Config:
    """The configuration (seed, index): every knob drawn from its own generator. On CUDA (or
    with `large_every`), one in `large_every` is then made a large grid from a generator of its
    own, so that the draws of the others are those of earlier versions."""
    rng = np.random.default_rng(config_seed(seed, index))
    c = Config()
    c.seed = int(rng.integers(1 << 30))
    c.H = _choice(rng, [1, 2, 3, 4, 6, 8], p=[0.3, 0.3, 0.18, 0.12, 0.05, 0.05])
    c.variant = _choice(rng, GPU_VARIANTS) if device != "cpu" else "auto"
    stream = c.variant == "ws"  # 16-byte aligned rows and caches, so that WS runs its kernel
    c.lb = None if rng.random() < 0.5 else float(-rng.uniform(0.5, 5.0))
    if c.lb is not None and rng.random() < 0.2:
        c.lb = -5.0
    c.bias = bool(rng.random() < 0.6)
    c.f_b = bool(rng.random() < 0.85)
    if not c.f_b:
        c.gate, c.gate_policy = 2, "auto"
    elif rng.random() < 0.2:
        c.gate, c.gate_policy = 2, "2"
    else:
        c.gate, c.gate_policy = 0, _choice(rng, ["auto", "0"])
    c.conv_w_bf16 = bool(rng.random() < 0.2)
    c.layout = _choice(rng, ["ds", "sd"])
    c.conv_dtype = _choice(rng, ["bf16", "f32"], p=[0.65, 0.35])
    c.state_dtype = _choice(rng, ["f32", "bf16"], p=[0.75, 0.25])
    if rng.random() < 0.1:
        c.a_log_range = (2.0, 5.0)  # fast decay (A_log up to 5, SPEC §8 extremes)
    # what the contract lets vary: the RMSNorm epsilon everywhere, the conv width on the CPU
    # backend (the CUDA kernels take W = 4 and refuse others at prepare: test_cuda tests that),
    # tiny post-conv q and k (the l2 norm's epsilon matters there)
    c.eps = draw_eps(rng)
    if device != "cuda":
        c.W = int(rng.integers(2, 6))
    c.tiny_qk = _choice(rng, [0.0, 1e-3, 1e-4], p=[0.8, 0.1, 0.1])
    # steps: tokens and batch sizes; pools stay tiny
    big_q = rng.random() < 0.2
    qmax = int(rng.integers(5, 17)) if big_q else int(rng.integers(1, 5))
    bmax = int(rng.integers(1, 3)) if big_q else int(rng.integers(1, 7))
    if c.H >= 6:  # keep the pools small (the CPU side is the slow one)
        bmax = min(bmax, 3)
    extra_w = int(_choice(rng, [0, 0, 1, 2, 3]))
    c.window = c.W - 2 + qmax + extra_w
    want_records = rng.random() < 0.75
    c.Qr = (c.window - c.W + 2 + int(rng.integers(0, 2))) if want_records else 0  # >= the largest accepted
    c.null_slot = _choice(rng, [0, -1, -2], p=[0.6, 0.25, 0.15])  # -2: some other id, drawn below
    cols_max = qmax + 2
    c.n = max(bmax * cols_max, 2 * bmax) + 2 + int(rng.integers(0, 3))
    if c.null_slot == -2:
        c.null_slot = int(rng.integers(1, c.n))
    # strides: stream needs 16-byte aligned slot strides and rows
    cq = 8 if stream else 1
    c.conv_pad = 0 if rng.random() < 0.5 else cq * int(rng.integers(1, 6))
    c.state_pad = 0 if rng.random() < 0.5 else 8 * int(rng.integers(1, 5)) * (1 if device != "cpu" else 1)
    if device == "cpu" and c.state_pad and rng.random() < 0.5:
        c.state_pad = int(rng.integers(1, 40))  # any slot stride on the CPU
    c.rec_pad = 0 if rng.random() < 0.5 else 4 * int(rng.integers(1, 5))
    c.pending_stride = 1 if rng.random() < 0.7 else int(rng.integers(2, 4))
    c.align = 8 if (stream and rng.random() < 0.9) else _choice(rng, [1, 1, 8])

    nops = _choice(rng, [1, 1, 2, 3, 4])
    for _ in range(nops):
        c.ops.append(_random_op(rng, c, qmax, bmax))
    # gate mode 1 (the gate kernel on CUDA; mode 0's arithmetic on the CPU) for half of the
    # policy-0 configurations, from a generator of its own so that the draws above are those
    # of earlier versions
    if c.gate_policy == "0" and np.random.default_rng([config_seed(seed, index), 1]).random() < 0.5:
        c.gate_policy = "1"
    if large_every is None:
        large_every = LARGE_EVERY if device == "cuda" else 0
    lg = np.random.default_rng([config_seed(seed, index), 2])
    if large_every > 0 and lg.random() < 1.0 / large_every:
        _make_large(lg, c)
    return c


def _make_large(rng, c: Config):
    """Turns `c` into a large grid: H = 4 and 133-170 requests (532-680 items: beyond one wave
    of four CTAs per SM on 132 SMs), decode, append, record and fused at q <= 4, gate modes 1
    and 2, Wide or auto: the plans that take five CTAs per SM (record, fused: the dense verify
    form) and six (fp32 append, bf16 decode and append). The layer, pool paddings and dtypes
    keep their draws; per_token, commit and flush stay with the small pools (B x cols slots)."""
    c.large = True
    c.H = 4
    c.variant = _choice(rng, ["wide", "auto"])
    c.f_b = True
    if rng.random() < 0.5:
        c.gate, c.gate_policy = 0, "1"
    else:
        c.gate, c.gate_policy = 2, "2"
    qmax, bmin, bmax = 4, 133, 170
    c.window = c.W - 2 + qmax + int(rng.integers(0, 2))
    c.Qr = c.window - c.W + 2 + int(rng.integers(0, 2))
    c.n = 2 * bmax + 4
    c.ops = [_random_op(rng, c, qmax, bmax, bmin=bmin, kinds=("decode", "append", "record", "fused"))
             for _ in range(int(rng.integers(1, 3)))]


def _live_ids(rng, c: Config) -> np.ndarray:
    ids = np.array([s for s in range(c.n) if s != c.null_slot], np.int64)
    return rng.permutation(ids)


def _pad_id(rng, c: Config) -> int:
    if c.null_slot >= 0 and rng.random() < 0.5:
        return c.null_slot
    return -int(_choice(rng, [1, 1, 2, 7, 1 << 20]))


def _random_op(rng, c: Config, qmax: int, bmax: int, bmin: int = 1, kinds=None) -> Op:
    if kinds is None:
        kinds = ["decode", "per_token"] + (["record", "fused", "commit", "flush", "append"] if c.Qr else [])
    kind = _choice(rng, list(kinds))
    op = Op(kind=kind, seed=int(rng.integers(1 << 30)))
    B = 0 if rng.random() < 0.04 else int(rng.integers(bmin, bmax + 1))
    q = 1 if kind in ("decode", "commit", "flush", "append") else int(rng.integers(1, qmax + 1))
    op.q = q
    ids = _live_ids(rng, c)
    acc_max = c.window - c.W + 2
    if kind == "per_token":
        cols = min(q + int(_choice(rng, [0, 0, 1, 2])), (len(ids)) // max(B, 1))
        cols = max(cols, q)
        op.slots = ids[:B * cols].reshape(B, cols).astype(np.int32)
        acc_hi = min(acc_max, cols)
    else:
        op.slots = ids[:B].astype(np.int32)
        acc_hi = acc_max
        if kind == "decode" and rng.random() < 0.35:
            rest = ids[B:2 * B].copy()
            same = rng.random(B) < 0.2  # in place for some requests
            rest[same] = op.slots[same]
            op.out_slots = rest.astype(np.int32)
    if kind not in ("commit", "flush") and (rng.random() < 0.7 or kind == "fused"):
        op.accepted = rng.integers(1, acc_hi + 1, size=B).astype(np.int32)
    if kind in ("record", "fused", "commit", "flush", "append") and rng.random() < 0.5:
        rows = np.array([r for r in range(c.rows_r) if r != c.null_slot], np.int64)
        op.record_rows = rng.permutation(rows)[:B].astype(np.int32)
    rows_of = op.record_rows if op.record_rows is not None else (op.slots if op.slots.ndim == 1 else op.slots[:, 0])
    acc = op.accepted if op.accepted is not None else np.ones(B, np.int32)
    if kind == "fused":
        op.pending = {int(r): (int(a) if rng.random() < 0.5 else 0) for r, a in zip(rows_of, acc)}
    elif kind == "flush":
        op.pending = {int(r): int(rng.integers(0, c.Qr + 1)) for r in rows_of}
    elif kind == "append":
        # any count up to Qr (a full row folds and writes the checkpoint back first); with bf16
        # state not Qr: the write-back rounds, and the float64 reference would continue from its
        # own rounding (the fused steps have a continued comparison for that; append keeps the
        # write-back to the fp32 configurations)
        top = c.Qr if c.state_dtype == "bf16" else c.Qr + 1
        op.pending = {int(r): int(rng.integers(0, top)) for r in rows_of}
    elif kind == "commit":
        op.counts = rng.integers(0, c.Qr + 1, size=B).astype(np.int32)
    # pads
    if B > 1 and rng.random() < 0.3:
        b = int(rng.integers(B))
        if op.slots.ndim == 1:
            op.slots[b] = _pad_id(rng, c)
        else:
            op.slots[b, 0] = _pad_id(rng, c)
    if kind == "per_token" and q > 1 and B and rng.random() < 0.4:
        b = int(rng.integers(B))
        t = int(rng.integers(1, q))
        if t != int(acc[b]) - 1 and op.slots[b, 0] >= 0 and op.slots[b, 0] != c.null_slot:
            op.slots[b, t] = _pad_id(rng, c)
    # caller errors in the data
    if B and rng.random() < 0.12:
        _inject_error(rng, c, op, acc_max)
    op.layout = _choice(rng, ["dense", "table", "colmajor", "stride2"], p=[0.4, 0.3, 0.15, 0.15])
    op.slots_2d = kind in ("decode", "record", "fused", "commit") and rng.random() < 0.2
    op.views = kind not in ("commit", "flush") and rng.random() < 0.25
    op.pitch_extra = 0 if rng.random() < 0.5 else int(rng.integers(1, 24))
    op.out_extra = 0 if rng.random() < 0.6 else int(rng.integers(1, 9))
    return op


def _inject_error(rng, c: Config, op: Op, acc_max: int):
    B = op.B
    b = int(rng.integers(B))
    s0 = op.slots[b] if op.slots.ndim == 1 else op.slots[b, 0]
    if s0 < 0 or s0 == c.null_slot:
        return  # a pad already
    kinds = ["slot"]
    if op.kind in ("decode", "per_token", "record", "fused", "append"):
        kinds.append("accepted")
    if op.kind == "decode":
        kinds.append("out_slot")
    if op.kind in ("record", "fused", "commit", "flush", "append"):
        kinds.append("row")
    if op.kind in ("fused", "flush", "commit", "append"):
        kinds.append("pending")
    if op.kind == "per_token" and op.slots.shape[1] >= 2:
        kinds.append("pad_start")
    e = _choice(rng, kinds)
    op.error = e
    big = int(_choice(rng, [c.n, c.n + 1, c.n + 5, (1 << 30)]))
    if e == "slot":
        if op.kind == "per_token" and op.q > 1 and rng.random() < 0.5:
            t = int(rng.integers(1, op.q))
            op.slots[b, t] = big
        elif op.slots.ndim == 1:
            op.slots[b] = big
        else:
            op.slots[b, 0] = big
    elif e == "accepted":
        if op.accepted is None:
            op.accepted = np.ones(B, np.int32)
        cols = op.slots.shape[1] if op.kind == "per_token" else None
        bad = [0, -1, acc_max + 1, acc_max + 3]
        if cols is not None and cols < acc_max:
            bad.append(cols + 1)
        op.accepted[b] = _choice(rng, bad)
    elif e == "out_slot":
        if op.out_slots is None:
            op.out_slots = op.slots.copy()
        op.out_slots[b] = _choice(rng, [c.n, -2] + ([c.null_slot] if c.null_slot >= 0 else []))
    elif e == "row":
        if op.record_rows is None:
            op.record_rows = op.slots.copy() if op.slots.ndim == 1 else op.slots[:, 0].copy()
            # keep the other requests' default rows valid: rows_r = n, so the slot ids are rows
        op.record_rows[b] = _choice(rng, [c.rows_r, c.rows_r + 3, -1] + ([c.null_slot] if c.null_slot >= 0 else []))
        if op.pending is not None:
            op.pending = {r: v for r, v in op.pending.items() if 0 <= r < c.rows_r}
    elif e == "pending":
        row = int(op.record_rows[b]) if op.record_rows is not None else int(s0)
        if op.kind == "commit":
            op.counts[b] = _choice(rng, [c.Qr + 1, -1])
        elif op.kind in ("flush", "append"):
            op.pending[row] = _choice(rng, [c.Qr + 1, -3])
        else:
            a = int(op.accepted[b])
            op.pending[row] = _choice(rng, [v for v in (a + 1, a + 2, c.Qr + 1, -1) if v != a and v != 0])
    elif e == "pad_start":
        a = int(rng.integers(2, min(op.slots.shape[1], acc_max) + 1)) if min(op.slots.shape[1], acc_max) >= 2 else 0
        if a == 0:
            op.error = ""
            return
        if op.accepted is None:
            op.accepted = np.ones(B, np.int32)
        op.accepted[b] = a
        op.slots[b, a - 1] = _pad_id(rng, c)


# =========================================================================================
# index tensors and devices
# =========================================================================================
def index_tensor(ids, layout: str, two_d: bool = False, fill: int = 123457) -> np.ndarray:
    """int32 [B] (or [B, 1] when two_d) or [B, c] ids laid out as asked; garbage around."""
    a = np.asarray(ids, np.int64)
    if a.ndim == 1 and two_d:
        a = a[:, None]
    if a.ndim == 1:
        B = a.shape[0]
        if layout == "table":  # a column of a [B, 5] block table
            t = np.full((max(B, 1), 5), fill, np.int32)
            t[:B, 2] = a
            return t[:B, 2]
        if layout in ("stride2", "colmajor"):
            t = np.full(2 * max(B, 1) + 1, fill, np.int32)
            t[1:1 + 2 * B:2] = a
            return t[1:1 + 2 * B:2]
        return a.astype(np.int32)
    B, cols = a.shape
    if layout == "table":  # columns [1, 1 + cols) of a wider block table (row stride != q)
        t = np.full((max(B, 1), cols + 4), fill, np.int32)
        t[:B, 1:1 + cols] = a
        return t[:B, 1:1 + cols]
    if layout == "colmajor":
        t = np.full((cols + 2, max(B, 1) + 1), fill, np.int32)
        t[:cols, :B] = a.T
        return t[:cols, :B].T
    if layout == "stride2":
        t = np.full((max(B, 1), 2 * cols + 1), fill, np.int32)
        t[:B, 0:2 * cols:2] = a
        return t[:B, 0:2 * cols:2]
    return a.astype(np.int32)


class DevicePool:
    """The full buffers on a torch device (same bytes as a HostPool) and the cache views."""

    def __init__(self, dev: Device, hp: HostPool):
        self.dev, self.c, self.g = dev, hp.c, hp.g
        self.t = {}
        self.upload(hp)

    def _bf(self, k):
        return (k == "conv" and self.c.conv_dtype == "bf16") or (k == "state" and self.c.state_dtype == "bf16")

    def upload(self, hp: HostPool, keys=BUFFERS):
        for k in keys:
            if k in hp.b:
                self.t[k] = self.dev.put(np.ascontiguousarray(hp.b[k]), bf16=self._bf(k))

    def download(self) -> HostPool:
        return HostPool(self.c, {k: self.dev.host(v) for k, v in self.t.items()})

    def caches(self):
        import kda_decode as kd

        def v(k, sh):
            shape, strides = sh
            return self.t[k].as_strided(shape, strides, 0)

        if self.c.Qr:
            return kd.Caches(v("conv", self.g.conv()), v("state", self.g.state()), v("corr", self.g.corr()),
                             v("kg", self.g.kg()), v("pend", self.g.pending()))
        return kd.Caches(v("conv", self.g.conv()), v("state", self.g.state()))


# =========================================================================================
# checks
# =========================================================================================
class Mismatch(AssertionError):
    pass


def _raw(a: np.ndarray) -> np.ndarray:
    """[tiles, ...] as raw bits [tiles, n] (bitwise comparisons: NaN patterns included)."""
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]).reshape(a.shape[0], -1)


def _tiles_changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.shape[0] == 0:
        return np.zeros(0, bool)
    return (_raw(a) != _raw(b)).any(axis=1)


def ulp_bf16(x):
    return np.exp2(np.floor(np.log2(np.maximum(np.abs(x), 1e-30))) - 7)


def _logical(hp: HostPool, k):
    return {"conv": hp.conv_logical, "state": hp.state, "corr": hp.corr, "kg": hp.kg}[k]()


def _tile_len(g: Geometry, k):
    c = g.c
    return {"conv": 3 * c.D * c.window, "state": c.H * K * K, "corr": c.H * c.Qr * K, "kg": c.H * c.Qr * 2 * K}[k]


def check_untouched(before: HostPool, after: HostPool, written: dict, what: str):
    """Tiles not in written[k]: bitwise unchanged; padding of every tile: bitwise unchanged."""
    for k in ("conv", "state", "corr", "kg"):
        if k not in after.b:
            continue
        a, b = before.b[k], after.b[k]
        L = _tile_len(after.g, k)
        if a.shape[1] > L and _tiles_changed(a[:, L:], b[:, L:]).any():
            raise Mismatch(f"{what}: {k} slot padding changed")
        ch = _tiles_changed(a, b)
        ch[list(written.get(k, ()))] = False
        if ch.any():
            raise Mismatch(f"{what}: {k} tiles {np.nonzero(ch)[0][:6].tolist()} changed although the operation "
                           f"does not own them")
    if "pend" in after.b:
        pa, pb = before.b["pend"], after.b["pend"]
        if not np.array_equal(pa[:, 1:], pb[:, 1:]):
            raise Mismatch(f"{what}: elements between strided pending entries changed")


def check_out_padding(out_full: np.ndarray, D: int, what: str):
    if out_full.shape[1] > D and not (out_full[:, D:] == POISON).all():
        raise Mismatch(f"{what}: out padding columns were written")


def compare_vs_ref(c: Config, before: HostPool, after: HostPool, rc: ref.RefCaches, res, out_full, q: int, n: int,
                   status, what: str, rec_ref: Optional[ref.RefCaches] = None, out_ref: Optional[np.ndarray] = None):
    """SPEC §8, a backend vs float64: status, out, written state / records / windows / pending,
    untouched bytes. rec_ref / out_ref: the records and out of a reference continued from the
    checkpoints the backend stored (bf16 fused steps), instead of rc's / res's."""
    if (status.flags, status.first_request) != (res.flags, res.first):
        raise Mismatch(f"{what}: status {status.describe()} (flags {status.flags}, first {status.first_request}), "
                       f"reference flags {res.flags} first {res.first}")
    if out_full is not None:
        check_out_padding(out_full, c.D, what)
        check_out(out_full[:, :c.D], res.out if out_ref is None else out_ref, res.pads, q, what=f"{what}: out")
    ws, ss, rs = sorted(rc.written_conv), sorted(rc.written_state), sorted(rc.written_rows)
    if ws:
        want = rc.conv[ws]
        raw = bf16(want) if c.conv_dtype == "bf16" else want.astype(np.float32)
        got = after.conv_logical()[ws]
        if not np.array_equal(bits_of(got), bits_of(raw)):
            raise Mismatch(f"{what}: conv windows of slots {ws} differ from the reference")
    tol = 1e-5 * n
    if ss:
        if c.state_dtype == "bf16":
            check_bf16_state(after.state()[ss], rc.state[ss], 2e-5 * n, f"{what}: state (bf16)")
        else:
            check_rel(after.state()[ss], rc.state[ss], tol, f"{what}: state")
    if rs:
        rr = rc if rec_ref is None else rec_ref
        check_rel(after.corr()[rs], rr.correction[rs], tol, f"{what}: records u")
        check_rel(after.kg()[rs][..., :K], rr.key_gate[rs][..., :K], tol, f"{what}: records k")
        check_rel(after.kg()[rs][..., K:], rr.key_gate[rs][..., K:], tol, f"{what}: records g")
    if c.Qr and not np.array_equal(after.pending(), rc.pending.astype(np.int32)):
        raise Mismatch(f"{what}: pending {after.pending().tolist()} vs reference {rc.pending.tolist()}")
    check_untouched(before, after, {"conv": set(ws), "state": set(ss), "corr": set(rs), "kg": set(rs)}, what)


def compare_backends(c: Config, cb: HostPool, ca: HostPool, db: HostPool, da: HostPool, c_out, d_out, cst, dst,
                     n: int, what: str, corr_slack: Optional[np.ndarray] = None):
    """SPEC §8 backend vs backend (ref = the CPU backend): status; out within 1 bf16 ulp +
    2e-3·max|ref|; state / records within 2e-5·n·max|ref| (bf16 state: 1 ulp + 2e-5·max|ref|),
    twice that where gate mode 1 may run (its logits are summed in another order: the
    documented bound, docs/VALIDATION.md); windows bitwise; what the CPU left unchanged
    bitwise unchanged on the device too."""
    tol = 4e-5 if c.gate_policy in ("1", "auto") else 2e-5
    if (dst.flags, dst.first_request) != (cst.flags, cst.first_request):
        raise Mismatch(f"{what}: device status {dst.describe()} vs CPU {cst.describe()}")
    if c_out is not None:
        check_out_padding(d_out, c.D, what + " (device)")
        cc, gg = c_out[:, :c.D], d_out[:, :c.D]
        zero = (cc == 0).all(axis=1)
        if not (gg[zero] == 0).all():
            raise Mismatch(f"{what}: rows that are zero on the CPU (pads, errors) are not zero on the device")
        if (~zero).any():
            c64, g64 = f64(cc[~zero]), f64(gg[~zero])
            if not np.isfinite(g64).all():
                raise Mismatch(f"{what}: non-finite device output")
            bound = ulp_bf16(c64) + 2e-3 * np.abs(c64).max()
            bad = np.abs(g64 - c64) > bound
            if bad.any():
                raise Mismatch(f"{what}: out: {int(bad.sum())} elements beyond 1 ulp + 2e-3·max "
                               f"(worst {float((np.abs(g64 - c64) / bound).max()):.2f}x the bound)")
    written = {}
    for k in ("conv", "state", "corr", "kg"):
        if k not in ca.b:
            continue
        ch = _tiles_changed(cb.b[k], ca.b[k])
        written[k] = set(np.nonzero(ch)[0].tolist())
        if not ch.any():
            continue
        cl, dl = _logical(ca, k)[ch], _logical(da, k)[ch]
        if k == "conv":
            if not np.array_equal(bits_of(cl), bits_of(dl)):
                raise Mismatch(f"{what}: conv windows differ between the backends")
        elif k == "state" and c.state_dtype == "bf16":
            c64, g64 = f64(cl), f64(dl)
            bound = ulp_bf16(c64) + tol * np.abs(c64).max()
            err = np.abs(g64 - c64)
            if not (err <= bound).all():
                raise Mismatch(f"{what}: bf16 state: {int((err > bound).sum())} elements beyond 1 ulp + {tol:.0e}·max")
        else:
            parts = [(cl, dl)] if k != "kg" else [(cl[..., :K], dl[..., :K]), (cl[..., K:], dl[..., K:])]
            tolk = tol * n
            slack = corr_slack[ch] if (k == "corr" and corr_slack is not None) else 0.0
            for a, b in parts:
                a64, b64 = a.astype(np.float64), b.astype(np.float64)
                if not np.isfinite(b64).all():
                    raise Mismatch(f"{what}: {k}: non-finite device values")
                mx = np.abs(a64).max()
                err = np.abs(b64 - a64) - slack
                rel = max(float(err.max()), 0.0) / max(mx, 1e-30)
                if rel > tolk:
                    raise Mismatch(f"{what}: {k}: max|dev-cpu|/max|cpu| = {rel:.3e} > {tolk:.1e}"
                                   + (" (beyond the bf16 checkpoint slack)" if corr_slack is not None else ""))
    if c.Qr and not np.array_equal(ca.b["pend"], da.b["pend"]):
        raise Mismatch(f"{what}: pending differs: cpu {ca.pending().tolist()} device {da.pending().tolist()}")
    check_untouched(db, da, written, what + " (device)")


# =========================================================================================
# running a configuration
# =========================================================================================
class Side:
    """One backend's prepared object, pool and the conversions of its tensors."""

    def __init__(self, dev: Device, c: Config, layer: Layer, hp: HostPool, variant: str):
        import kda_decode as kd

        self.dev, self.c = dev, c
        gm = {"auto": "auto", "0": 0, "1": 1, "2": 2}[c.gate_policy]
        pol = kd.Policy(gate_mode=gm, variant=variant if dev.name == "cuda" else "auto")
        put = (lambda a, bf16=False: dev.put(a, bf16)) if dev.is_torch else (lambda a, bf16=False: a)
        # gate mode 1 plans only prepared keys (prepare sizes its workspace): every step key
        policies = {(op.kind, op.B, op.q): pol for op in c.ops if op.kind not in ("commit", "flush")}
        self.kda = layer.prepared(put, conv_dim_first=c.layout == "ds", null_slot=c.null_slot, default_policy=pol,
                                  policies=policies if gm == 1 else None)
        if dev.is_torch:
            self.pool = DevicePool(dev, hp)
        else:
            self.pool = hp
        self.kda.prepare(self.pool.caches())

    def host_pool(self) -> HostPool:
        return self.pool.download() if self.dev.is_torch else self.pool.copy()

    def idx(self, a):
        return None if a is None else self.dev.put(a)

    def run(self, op: Op, inp: Optional[Inputs], out_full):
        """Runs the operation; returns (out_full as numpy or None, status)."""
        dev, c = self.dev, self.c
        caches = self.pool.caches()
        slots = self.idx(index_tensor(op.slots, op.layout, op.slots_2d))
        lay = op.layout if op.layout != "colmajor" else "stride2"
        acc = self.idx(None if op.accepted is None else index_tensor(op.accepted, lay))
        outs = self.idx(None if op.out_slots is None else index_tensor(op.out_slots, lay))
        rows = self.idx(None if op.record_rows is None else index_tensor(op.record_rows, lay))
        if op.kind == "commit":
            self.kda.commit(caches, slots, rows, self.idx(index_tensor(op.counts, lay)))
            dev.sync()
            return None, self.kda.status()
        if op.kind == "flush":
            self.kda.flush(caches, slots, rows)
            dev.sync()
            return None, self.kda.status()
        o_full = dev.put(out_full, bf16=True)
        o = o_full[:, :c.D]
        kw = dict(q=op.q, mode=op.kind, accepted=acc, out_slots=outs, record_rows=rows)
        if op.views:
            v = inp.views(rng_seed=op.seed + 1)
            self.kda.run_views(dev.put(v["qkv"], True), dev.put(v["out_gate"], True), dev.put(v["gate_in"], True),
                               dev.put(v["beta"], True), o, caches, slots, **kw)
        else:
            self.kda.run(dev.put(inp.projected, True), o, caches, slots, **kw)
        dev.sync()
        st = self.kda.status()
        return (dev.host(o_full) if dev.is_torch else o_full), st


def _set_pending(hp_or_dp, rows_vals: dict, dev: Optional[Device] = None):
    if not rows_vals:
        return
    if isinstance(hp_or_dp, HostPool):
        p = hp_or_dp.pending()
        for r, v in rows_vals.items():
            p[r] = v
    else:
        t = hp_or_dp.t["pend"]
        for r, v in rows_vals.items():
            t[r, 0] = int(v)


def _rows_of(op: Op) -> np.ndarray:
    s0 = op.slots if op.slots.ndim == 1 else op.slots[:, 0]
    return op.record_rows if op.record_rows is not None else s0


def _continued(c: Config, layer: Layer, inp, op: Op, rc_pre, res, after: HostPool):
    """bf16 state, fused: the fold is stored as bf16; where the backend's fp32 fold and the
    float64 fold round to neighbouring bf16 values the verify continues from different
    checkpoints (SPEC §9: "a fused step continues from what it stored"). The records and out
    are therefore compared with a float64 record-mode verify continued from the checkpoints
    the backend stored (the state itself is compared with the fused reference, 1 bf16 ulp).
    Returns (rec_ref, out_ref), or (None, None) when not needed."""
    if rc_pre is None:
        return None, None
    rc2 = rc_pre.copy()
    s0 = op.slots if op.slots.ndim == 1 else op.slots[:, 0]
    rows = _rows_of(op)
    for b in range(op.B):
        if b in res.pads:
            continue
        rc2.state[int(s0[b])] = f64(after.state()[int(s0[b])])
        rc2.pending[int(rows[b])] = 0
    res2 = ref.step(layer.ref, inp.ref, rc2, mode="record", q=op.q, slots=np.asarray(op.slots), accepted=op.accepted,
                    record_rows=op.record_rows, null_slot=c.null_slot, gate_mode=c.gate)
    return rc2, res2.out


def _checkpoint_slack(c: Config, op: Op, ca: HostPool, da: HostPool) -> np.ndarray:
    """bf16 state, fused, backend vs backend: the two backends' stored folds may differ by a bf16
    ulp here and there; u_t[v] = β(v − S_t k_t) then moves by at most Σ_i |ΔS[v, i]|·|k_t[i]|
    (β <= 1; the difference decays through the tokens). The slack per records element."""
    slack = np.zeros(ca.corr().shape)
    s0 = op.slots if op.slots.ndim == 1 else op.slots[:, 0]
    rows = _rows_of(op)
    for b in range(op.B):
        s, r = int(s0[b]), int(rows[b])
        if not (0 <= s < c.n and 0 <= r < c.rows_r):
            continue
        dS = np.abs(f64(da.state()[s]) - f64(ca.state()[s]))  # [H, V, K]
        if not dS.any():
            continue
        k = np.abs(ca.kg()[r][:, :op.q, :K].astype(np.float64))  # [H, q, K]
        slack[r, :, :op.q, :] = np.maximum(slack[r, :, :op.q, :], np.einsum("hvi,hti->htv", dS, k))
    return slack


def run_config(c: Config, device: str = "cpu", check_f64: bool = True, variant: Optional[str] = None) -> dict:
    """Runs every operation of `c`; raises Mismatch (an AssertionError) on the first failure.

    device 'cpu': the CPU backend vs float64. Otherwise the device backend vs the CPU backend,
    and with check_f64 both vs float64 as well. Returns a few measurements."""
    variant = variant or c.variant
    rng = np.random.default_rng(c.seed)
    qk_scale = tiny_qk_scale(c.tiny_qk) if c.tiny_qk else 1.0
    layer = Layer(c.H, W=c.W, conv_bias=c.bias, lower_bound=c.lb, f_b=c.f_b, conv_weight_bf16=c.conv_w_bf16,
                  eps=c.eps, seed=c.seed, a_log_range=c.a_log_range, qk_scale=qk_scale)
    hp = HostPool.create(c, rng, qk_scale=qk_scale)
    rc = hp.to_ref() if (check_f64 or device == "cpu") else None
    cpu = Side(Device("cpu"), c, layer, hp, "auto")
    other = Side(Device(device), c, layer, hp.copy(), variant) if device != "cpu" else None
    f64_checks = check_f64 or device == "cpu"
    bf16_state = c.state_dtype == "bf16"
    stats = {"ops": 0, "errors": 0}
    for i, op in enumerate(c.ops):
        what = f"op {i} {op.describe()}"
        n = 1 if bf16_state else i + 1
        if bf16_state and i > 0:
            # bf16 state (SPEC §9): each operation is compared from the same stored inputs
            if other is not None:
                other.pool.upload(cpu.pool, keys=("state", "corr", "kg"))
            if rc is not None:
                fresh = cpu.pool.to_ref()
                rc.state[...] = fresh.state
                if c.Qr:
                    rc.correction[...] = fresh.correction
                    rc.key_gate[...] = fresh.key_gate
        if op.pending:
            _set_pending(cpu.pool, op.pending)
            if other is not None:
                _set_pending(other.pool, op.pending)
            if rc is not None:
                for r, v in op.pending.items():
                    rc.pending[r] = v
        rows = op.B * op.q
        inp = None
        if op.kind not in ("commit", "flush"):
            inp = Inputs(layer, rows, gate_mode=c.gate, pitch_extra=op.pitch_extra, seed=op.seed, align=c.align,
                         qk_scale=qk_scale)
        out_full = np.full((rows, c.D + op.out_extra), POISON, np.uint16)
        cb = cpu.host_pool()
        c_out, cst = cpu.run(op, inp, out_full.copy())
        ca = cpu.host_pool()
        bf16_fused = bf16_state and op.kind == "fused"
        if rc is not None:
            slots = np.asarray(op.slots)
            rc_pre = rc.copy() if bf16_fused else None
            if op.kind in ("commit", "flush"):
                res = ref.commit(layer.ref, rc, slots, op.record_rows, op.counts, null_slot=c.null_slot,
                                 flush=op.kind == "flush")
            else:
                res = ref.step(layer.ref, inp.ref, rc, mode=op.kind, q=op.q, slots=slots, accepted=op.accepted,
                               out_slots=op.out_slots, record_rows=op.record_rows, null_slot=c.null_slot,
                               gate_mode=c.gate)
            stats["errors"] += int(res.flags != 0)
            if c.tiny_qk and res.qk_sumsq is not None:
                rms = np.sqrt(np.array(res.qk_sumsq) / K)
                if not (c.tiny_qk / 5 < rms[1] < c.tiny_qk * 5):
                    raise Mismatch(f"{what}: the tiny-q/k configuration has post-conv q/k rms {rms[0]:.1e} .. "
                                   f"{rms[1]:.1e}, not about {c.tiny_qk:g} (fix the fuzzer)")
            compare_vs_ref(c, cb, ca, rc, res, c_out, op.q, n, cst, what + " [cpu vs float64]",
                           *_continued(c, layer, inp, op, rc_pre, res, ca))
        if other is not None:
            db = other.host_pool()
            d_out, dst = other.run(op, inp, out_full.copy())
            da = other.host_pool()
            slack = _checkpoint_slack(c, op, ca, da) if bf16_fused else None
            compare_backends(c, cb, ca, db, da, c_out, d_out, cst, dst, n, what + f" [{device} {variant} vs cpu]",
                             corr_slack=slack)
            if rc is not None and f64_checks:
                compare_vs_ref(c, db, da, rc, res, d_out, op.q, n, dst, what + f" [{device} {variant} vs float64]",
                               *_continued(c, layer, inp, op, rc_pre, res, da))
        stats["ops"] += 1
    return stats


# =========================================================================================
# command line
# =========================================================================================
def _interactive(out) -> bool:
    """Progress lines only for a person watching: `out` is a terminal and this is not CI."""
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("CI")


class Progress:
    """One line per chunk (a twentieth of the run, or 10 s, whichever comes first) with the
    elapsed time and an estimate of the time left; silent when not interactive."""

    def __init__(self, total: int, out, max_seconds: float = 0.0):
        self.total, self.out, self.max_seconds = total, out, max_seconds
        self.on = _interactive(out) and total > 1
        self.t0 = self.last = time.time()
        self.step = max(1, total // 20)

    def update(self, done: int, mismatches: int):
        if not self.on or done >= self.total:
            return
        now = time.time()
        if done % self.step and now - self.last < 10:
            return
        self.last = now
        el = now - self.t0
        eta = el / done * (self.total - done)
        if self.max_seconds:
            eta = min(eta, max(self.max_seconds - el, 0.0))
        print(f"fuzz: {done}/{self.total} configs ({100 * done // self.total}%), {mismatches} mismatches, "
              f"{el:.0f} s elapsed, about {eta:.0f} s left", file=self.out, flush=True)


def fuzz(configs: int, seed: int, device: str = "cpu", sample_f64: int = 0, max_seconds: float = 0.0,
         verbose: bool = False, out=sys.stdout, first_index: int = 0, max_failures: int = 20,
         large_every: Optional[int] = None):
    """Runs `configs` configurations; returns (ran, mismatches, failures [(index, message)]).
    Stops early after `max_seconds` or `max_failures` mismatches (a CUDA fault poisons the
    context: every later configuration would fail too). On a terminal (not in CI) it prints a
    progress line per chunk."""
    t0 = time.time()
    progress = Progress(configs, out, max_seconds)
    failures = []
    ran = 0
    refused = 0
    large = 0
    per_variant = {}
    every = max(1, configs // sample_f64) if sample_f64 > 0 else 0
    for i in range(first_index, first_index + configs):
        if max_seconds and time.time() - t0 > max_seconds:
            print(f"fuzz: stopping after {max_seconds:.0f} s (--max-seconds)", file=out)
            break
        if max_failures and len(failures) >= max_failures:
            print(f"fuzz: stopping after {len(failures)} mismatches (--max-failures)", file=out)
            break
        c = random_config(seed, i, device, large_every)
        large += c.large
        f64_here = device == "cpu" or (every and (i - first_index) % every == 0)
        v = c.variant
        try:
            try:
                run_config(c, device, check_f64=bool(f64_here), variant=v)
            except ValueError as e:
                # a forced variant the device cannot run for this shape (e.g. WS's shared
                # memory): refused at prepare/run with the key and the reason; run it as 'wide'
                if device == "cuda" and v != "auto" and "policy for step" in str(e):
                    refused += 1
                    v = "wide"
                    run_config(c, device, check_f64=bool(f64_here), variant=v)
                else:
                    raise
        except Exception as e:  # noqa: BLE001 - every failure is reported with its seed
            msg = f"{type(e).__name__}: {e}".splitlines()[0]
            failures.append((i, msg))
            print(f"MISMATCH config {i} seed {seed}:{i} device {device} variant {v}: {msg}", file=out)
            print(f"  config: {c.describe()}", file=out)
            print(f"  replay: python tests/python/fuzz.py --device {device} --replay {seed}:{i}"
                  f"{' --sample-f64 1' if f64_here and device != 'cpu' else ''}"
                  f"{f' --large-every {large_every}' if large_every is not None else ''}", file=out)
            if verbose:
                traceback.print_exc(file=out)
        ran += 1
        per_variant[v] = per_variant.get(v, 0) + 1
        progress.update(ran, len(failures))
        if verbose and ran % 100 == 0:
            print(f"  ... {ran} configs, {len(failures)} mismatches, {time.time() - t0:.1f} s", file=out)
    dt = time.time() - t0
    extra = f"device {device}, seed {seed}, {dt:.1f} s"
    if device != "cpu":
        extra += ", variants " + " ".join(f"{k}={per_variant[k]}" for k in sorted(per_variant))
        extra += f", refused {refused}, float64-checked every {every or '-'}, large grids {large}"
    print(f"fuzz: {ran} configs, {len(failures)} mismatches ({extra})", file=out)
    return ran, len(failures), failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--first-index", type=int, default=0, help="index of the first configuration")
    ap.add_argument("--device", choices=["cpu", "cuda", "torch-cpu"], default="cpu")
    ap.add_argument("--sample-f64", type=int, default=0,
                    help="on a device: also check K of the configurations against float64")
    ap.add_argument("--max-seconds", type=float, default=0.0, help="stop (with the summary) after T seconds")
    ap.add_argument("--max-failures", type=int, default=20, help="stop after M mismatches (0: never)")
    ap.add_argument("--replay", default=None, help="S:I — run configuration I of seed S only (verbose)")
    ap.add_argument("--large-every", type=int, default=None,
                    help=f"one configuration in N a large grid (default: {LARGE_EVERY} on cuda, never elsewhere)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("fuzz: no CUDA device visible to torch", file=sys.stderr)
            return 2
        import kda_decode as kd

        if not kd.cuda_built():
            print("fuzz: kda_decode was built without the CUDA backend", file=sys.stderr)
            return 2
    if a.replay:
        s, i = (int(x) for x in a.replay.split(":"))
        c = random_config(s, i, a.device, a.large_every)
        print(f"config {s}:{i}: {c.describe()}")
        _, m, _ = fuzz(1, s, a.device, sample_f64=a.sample_f64, verbose=True, first_index=i, large_every=a.large_every)
        return 1 if m else 0
    _, m, _ = fuzz(a.configs, a.seed, a.device, a.sample_f64, a.max_seconds, a.verbose, first_index=a.first_index,
                   max_failures=a.max_failures, large_every=a.large_every)
    return 1 if m else 0


if __name__ == "__main__":
    sys.exit(main())
