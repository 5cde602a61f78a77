"""Rows of the host-side validation table (docs/VALIDATION.md) whose checks run only with the
CUDA backend: data pointers and strides the CUDA kernels need (16-byte vector loads and async
copies) and the fused step's arrival counters sized by prepare(caches). Each raises ValueError
naming the operand, with nothing written. Skipped without a GPU; every other row is covered on
the CPU by tests/cpp/test_validation_table.cpp (Rows/ValidationTable.Row/<ID>).
"""
from __future__ import annotations

import numpy as np
import pytest

import kda_decode as kd
from harness import Inputs, Layer

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device visible to torch"),
    pytest.mark.skipif(not kd.cuda_built(), reason="kda_decode built without the CUDA backend"),
]

H, K, W, WINDOW, N, QR = 2, 128, 4, 6, 6, 4
D = H * K


def _t(a, bf16=False):
    a = np.ascontiguousarray(a)
    if bf16:
        return torch.from_numpy(a.view(np.int16).copy()).cuda().view(torch.bfloat16)
    return torch.from_numpy(a.copy()).cuda()


def _weights(layer):
    return dict(conv_weight=_t(layer.conv_weight), A_log=_t(layer.A_log), dt_bias=_t(layer.dt_bias),
                norm_weight=_t(layer.norm_weight), f_b_weight=_t(layer.f_b_weight, True), conv_bias=_t(layer.conv_bias))


def _shifted(shape, dtype, shift_elems=1):
    """A tensor of `shape` whose data pointer is `shift_elems` elements past an aligned one."""
    n = int(np.prod(shape))
    base = torch.zeros(n + 16, dtype=dtype, device="cuda")
    return base[shift_elems:shift_elems + n].view(shape)


def _padded_rows(shape, dtype, extra):
    """[rows, ...] with a row stride of prod(shape[1:]) + extra elements."""
    inner = int(np.prod(shape[1:]))
    base = torch.zeros(shape[0] * (inner + extra), dtype=dtype, device="cuda")
    strides = [inner + extra]
    acc = inner
    for s in shape[1:]:
        acc //= s
        strides.append(acc)
    return base.as_strided(shape, strides)


class Fx:
    def __init__(self):
        self.layer = Layer(H, seed=4343)
        self.w = _weights(self.layer)
        self.kda = kd.PreparedKda(**self.w, conv_dim_first=True)
        self.conv = torch.zeros((N, 3 * D, WINDOW), dtype=torch.bfloat16, device="cuda")
        self.state = torch.zeros((N, H, K, K), dtype=torch.float32, device="cuda")
        self.corr = torch.zeros((N, H, QR, K), dtype=torch.float32, device="cuda")
        self.kg = torch.zeros((N, H, QR, 2 * K), dtype=torch.float32, device="cuda")
        self.pend = torch.zeros((N,), dtype=torch.int32, device="cuda")
        self.slots = torch.tensor([1, 3], dtype=torch.int32, device="cuda")
        inp = Inputs(self.layer, 2, align=8)
        self.proj = _t(inp.projected, True)
        self.out = torch.full((2, D), 7.0, dtype=torch.bfloat16, device="cuda")

    def caches(self, **kw):
        d = dict(conv_state=self.conv, state=self.state, correction=self.corr, key_gate=self.kg, pending=self.pend)
        d.update(kw)
        return kd.Caches(**d)

    def run(self, mode="decode", **kw):
        q = 1 if mode == "decode" else 2
        proj = self.proj if q == 1 else _t(Inputs(self.layer, 4, align=8).projected, True)
        out = self.out if q == 1 else torch.zeros((4, D), dtype=torch.bfloat16, device="cuda")
        self.kda.run(proj, out, self.caches(**kw), self.slots, q=q, mode=mode)

    def snapshot(self):
        return [t.clone() for t in (self.conv, self.state, self.corr, self.kg, self.pend, self.out)]

    def unchanged(self, snap):
        now = (self.conv, self.state, self.corr, self.kg, self.pend, self.out)
        return all(torch.equal(a.view(torch.int16) if a.dtype == torch.bfloat16 else a,
                               b.view(torch.int16) if b.dtype == torch.bfloat16 else b) for a, b in zip(snap, now))


def _w27(f):
    w = dict(f.w)
    fb = _shifted((D, 128), torch.bfloat16, 1)
    fb.copy_(w["f_b_weight"])
    w["f_b_weight"] = fb
    kd.PreparedKda(**w)


def _w28(f):
    w = dict(f.w)
    fb = _padded_rows((D, 128), torch.bfloat16, 4)
    fb.copy_(w["f_b_weight"])
    w["f_b_weight"] = fb
    kd.PreparedKda(**w)


def _s48(f):
    # prepare saw records with N rows; a fused step on records with 2N rows needs more counters
    f.kda.prepare(f.caches())
    big = dict(correction=torch.zeros((2 * N, H, QR, K), device="cuda"),
               key_gate=torch.zeros((2 * N, H, QR, 2 * K), device="cuda"),
               pending=torch.zeros((2 * N,), dtype=torch.int32, device="cuda"))
    f.run("fused", **big)


def _f15(f):
    f.kda.prepare(f.caches())
    big = f.caches(correction=torch.zeros((2 * N, H, QR, K), device="cuda"),
                   key_gate=torch.zeros((2 * N, H, QR, 2 * K), device="cuda"),
                   pending=torch.zeros((2 * N,), dtype=torch.int32, device="cuda"))
    f.kda.flush(big, f.slots)


ROWS = {
    # id: (operand, message excerpt, trigger)
    "W27": ("f_b_weight", "16-byte aligned data pointer", _w27),
    "W28": ("f_b_weight", "a row stride that is a multiple of 8 elements (16 bytes) on CUDA", _w28),
    "C16": ("state", "state: expected 16-byte aligned data pointer",
            lambda f: f.run(state=_shifted((N, H, K, K), torch.float32, 1))),
    "C17": ("state", "state: expected slot stride a multiple of 16 bytes on CUDA",
            lambda f: f.run(state=_padded_rows((N, H, K, K), torch.float32, 1))),
    "C35": ("correction", "correction: expected 16-byte aligned data pointer",
            lambda f: f.run("record", correction=_shifted((N, H, QR, K), torch.float32, 2))),
    "C36": ("key_gate", "key_gate: expected 16-byte aligned data pointer",
            lambda f: f.run("record", key_gate=_shifted((N, H, QR, 2 * K), torch.float32, 1))),
    "C37": ("correction", "correction: expected row stride a multiple of 4 elements on CUDA",
            lambda f: f.run("record", correction=_padded_rows((N, H, QR, K), torch.float32, 2))),
    "C38": ("key_gate", "key_gate: expected row stride a multiple of 4 elements on CUDA",
            lambda f: f.run("record", key_gate=_padded_rows((N, H, QR, 2 * K), torch.float32, 1))),
    "S48": ("pending", "(call prepare(caches) with these caches first)", _s48),
    "F15": ("pending", "(call prepare(caches) with these caches first)", _f15),
}


@pytest.mark.parametrize("row", sorted(ROWS))
def test_cuda_only_row(row):
    operand, excerpt, trigger = ROWS[row]
    f = Fx()
    snap = f.snapshot()
    with pytest.raises(ValueError) as ei:
        trigger(f)
    msg = str(ei.value)
    assert msg.startswith(operand + ":") or f"{operand}:" in msg, msg
    assert excerpt in msg, msg
    torch.cuda.synchronize()
    assert f.unchanged(snap), f"{row}: something was written before the error"
    assert f.kda.status().ok
