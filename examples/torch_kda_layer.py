"""A small torch KDA layer served by kda-decode, checked against a pure-torch reference.

    python examples/torch_kda_layer.py [--device cpu|cuda] [--steps 64] [--rounds 8]
                                       [--scheme record|fused|per_token] [--cuda-graph]

The layer (`KdaLayer`) has the attribute names of vLLM's ``KimiK3DeltaAttention``
(``in_proj`` → packed q|k|v | output gate | f_a | beta, ``f_b_proj``, ``conv1d``,
``A_log``, ``dt_bias``, ``o_norm``, ``gate_lower_bound``, ``o_proj``), so the prepared core
is built with ``PreparedKda.from_module(layer, ...)``. `KdaServer` holds the engine side:
cache pools (SD conv windows, fp32 state, records), the step keys planned ahead, and the
three phases of a request batch:

1. **decode loop** — the prompt's tokens, one decode step each (q = 1), from empty caches
   (zero windows and state: what a prefill of an empty prefix leaves);
2. **speculative verify loop** — each round: the last accepted token plus q−1 draft tokens
   are verified in one step, the drafts are checked against the target continuation, the
   accepted prefix (≥ 1 token, bonus included) is committed and the next round continues
   after it. Schemes: ``record`` (verify writes records, then ``commit(counts=accepted)``),
   ``fused`` (``pending = accepted`` is folded by the next verify; ``flush`` at the end),
   ``per_token`` (vLLM native: one state slot per token, the next round starts from slot
   ``accepted−1``);
3. a report against `TorchReference`: the same layer written out in float64 torch (the
   conv window, gate, delta rule and gated RMSNorm of the SPEC, request by request), fed
   the same bf16 projections.

The draft tokens come from a deterministic drafter (the target continuation with some
tokens replaced), so both sides accept the same tokens and the comparison is exact in
control flow. A batch row is padding (slot 0, vLLM's null block): its output must be zero.

`run_example(...)` returns the largest errors; ``tests/python/test_example.py`` runs it
(64 decode steps + 8 verify rounds) on the CPU, and on CUDA when present.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from torch import nn

import kda_decode as kd
import kda_decode.torch  # noqa: F401  (registers the torch ops; PreparedKda traces under torch.compile)

K = 128  # head dim
R = 128  # rank of the low-rank gate


# ---------------------------------------------------------------------------------------
# the layer (vLLM KimiK3DeltaAttention attribute names)
# ---------------------------------------------------------------------------------------
class GatedRMSNorm(nn.Module):
    """o_norm: RMSNorm over a head's 128 values times sigmoid(output gate)."""

    def __init__(self, dim: int = K, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps


class KdaLayer(nn.Module):
    """A KDA attention layer: projections in bf16, conv/gate/state parameters in fp32.

    in_proj: hidden → [q|k|v (3D) · output gate (D) · f_a (R) · beta (H) · zero padding]
    (the packed projection row of the SPEC; pitch a multiple of 16 elements).
    """

    def __init__(self, hidden: int = 256, heads: int = 2, conv_size: int = 4, lower_bound: Optional[float] = -5.0,
                 conv_bias: bool = True, eps: float = 1e-5, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        H, D = heads, heads * K
        self.hidden, self.num_heads, self.D, self.conv_size = hidden, H, D, conv_size
        self.min_pitch = 4 * D + R + H
        self.pitch = -(-self.min_pitch // 16) * 16

        def normal(*shape, std):
            return torch.randn(*shape, generator=g) * std

        self.in_proj = nn.Linear(hidden, self.pitch, bias=False, dtype=torch.bfloat16)
        w = normal(self.pitch, hidden, std=hidden ** -0.5)
        w[self.min_pitch:] = 0
        self.in_proj.weight.data.copy_(w)
        self.f_b_proj = nn.Linear(R, D, bias=False, dtype=torch.bfloat16)
        self.f_b_proj.weight.data.copy_(normal(D, R, std=R ** -0.5))
        self.conv1d = nn.Conv1d(3 * D, 3 * D, conv_size, groups=3 * D, bias=conv_bias, padding=conv_size - 1)
        self.conv1d.weight.data.copy_(normal(3 * D, 1, conv_size, std=0.5))
        if conv_bias:
            self.conv1d.bias.data.copy_(normal(3 * D, std=0.1))
        self.A_log = nn.Parameter(torch.log(torch.rand(H, generator=g) * 15 + 1))
        self.dt_bias = nn.Parameter(normal(D, std=0.5))
        self.o_norm = GatedRMSNorm(K, eps)
        self.o_norm.weight.data.copy_(1 + normal(K, std=0.1))
        self.gate_lower_bound = lower_bound
        self.o_proj = nn.Linear(D, hidden, bias=False, dtype=torch.bfloat16)
        self.o_proj.weight.data.copy_(normal(hidden, D, std=D ** -0.5))
        for p in self.parameters():
            p.requires_grad_(False)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, hidden] bf16 → packed projection [rows, pitch] bf16."""
        return self.in_proj(x)


# ---------------------------------------------------------------------------------------
# the engine side: caches, prepared core, steps
# ---------------------------------------------------------------------------------------
class KdaServer:
    """Cache pools and the prepared core for one layer (slot 0 is the null slot).

    Request b owns slot ``1 + b`` (its state / window / records row). ``per_token`` also
    uses q slots per request: ``1 + B + b·q + t`` for t ≥ 1 (token 0 writes the request's
    own slot).
    """

    def __init__(self, layer: KdaLayer, B: int, q: int, scheme: str, device: torch.device):
        self.layer, self.B, self.q, self.scheme, self.device = layer, B, q, scheme, device
        H, D, W = layer.num_heads, layer.D, layer.conv_size
        n = 1 + B + B * q
        window = W - 2 + q
        self.caches = kd.Caches(
            conv_state=torch.zeros(n, window, 3 * D, dtype=torch.bfloat16, device=device),  # SD (vLLM default)
            state=torch.zeros(n, H, K, K, dtype=torch.float32, device=device),
            correction=torch.zeros(n, H, q, K, dtype=torch.float32, device=device),
            key_gate=torch.zeros(n, H, q, 2 * K, dtype=torch.float32, device=device),
            pending=torch.zeros(n, dtype=torch.int32, device=device),
        )
        verify_mode = {"record": "record", "fused": "fused", "per_token": "per_token"}[scheme]
        self.kda = kd.PreparedKda.from_module(
            layer, {("decode", B, 1): kd.Policy(), (verify_mode, B, q): kd.Policy()}, conv_dim_first=False)
        self.kda.prepare(self.caches)
        self.verify_mode = verify_mode

    def tensor(self, values, dtype=torch.int32) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def decode(self, proj: torch.Tensor, slots: torch.Tensor, out: torch.Tensor) -> None:
        """One decode step: proj [B, pitch] bf16 → out [B, D] bf16."""
        self.kda.run(proj, out, self.caches, slots)

    def verify(self, proj: torch.Tensor, slots: torch.Tensor, accepted: torch.Tensor, out: torch.Tensor) -> None:
        """One verify step of q tokens per request."""
        self.kda.run(proj, out, self.caches, slots, q=self.q, accepted=accepted, mode=self.verify_mode)


# ---------------------------------------------------------------------------------------
# the pure-torch reference (float64, request by request)
# ---------------------------------------------------------------------------------------
@dataclass
class _RefRequest:
    hist: torch.Tensor  # [W-1, 3D] the newest W-1 qkv inputs, oldest first
    S: torch.Tensor  # [H, V, K]


class TorchReference:
    """The same layer in float64 torch (SPEC §3), one request at a time."""

    def __init__(self, layer: KdaLayer, B: int):
        f = lambda t: t.detach().to("cpu", torch.float64)  # noqa: E731
        self.H, self.D, self.W = layer.num_heads, layer.D, layer.conv_size
        self.conv_w = f(layer.conv1d.weight)[:, 0, :]  # [3D, W]
        self.conv_b = None if layer.conv1d.bias is None else f(layer.conv1d.bias)
        self.f_b = f(layer.f_b_proj.weight)  # [D, R]
        self.A = torch.exp(f(layer.A_log))  # [H]
        self.dt_bias = f(layer.dt_bias)
        self.norm_w = f(layer.o_norm.weight)
        self.eps = layer.o_norm.eps
        self.lb = layer.gate_lower_bound
        self.reqs = [_RefRequest(torch.zeros(self.W - 1, 3 * self.D, dtype=torch.float64),
                                 torch.zeros(self.H, K, K, dtype=torch.float64)) for _ in range(B)]

    def run(self, b: int, proj_rows: torch.Tensor, keep: int) -> torch.Tensor:
        """Runs request b over its rows ([n, pitch] bf16), keeps the state and window after the
        first ``keep`` tokens (the accepted ones), returns the outputs [n, D] float64."""
        H, D = self.H, self.D
        p = proj_rows.detach().to("cpu", torch.float64)
        req = self.reqs[b]
        hist, S = req.hist.clone(), req.S.clone()
        outs = []
        for t in range(p.shape[0]):
            x = p[t, :3 * D]
            og = p[t, 3 * D:4 * D]
            fa = p[t, 4 * D:4 * D + R]
            beta = torch.sigmoid(p[t, 4 * D + R:4 * D + R + H])
            window = torch.cat([hist, x[None]], 0)  # [W, 3D], newest last
            a = (self.conv_w * window.T).sum(1)
            if self.conv_b is not None:
                a = a + self.conv_b
            y = a * torch.sigmoid(a)
            yq, yk, yv = (y[i * D:(i + 1) * D].view(H, K) for i in range(3))
            qv = yq / torch.sqrt((yq * yq).sum(-1, keepdim=True) + 1e-6) * K ** -0.5
            kv = yk / torch.sqrt((yk * yk).sum(-1, keepdim=True) + 1e-6)
            z = (self.f_b @ fa + self.dt_bias).view(H, K)
            if self.lb is None:
                g = -self.A[:, None] * torch.nn.functional.softplus(z, threshold=20.0)
            else:
                g = self.lb * torch.sigmoid(self.A[:, None] * z)
            S = S * torch.exp(g)[:, None, :]
            u = beta[:, None] * (yv - torch.einsum("hvk,hk->hv", S, kv))
            S = S + u[:, :, None] * kv[:, None, :]
            o = torch.einsum("hvk,hk->hv", S, qv)
            o = o * torch.rsqrt((o * o).mean(-1, keepdim=True) + self.eps) * self.norm_w
            outs.append((o * torch.sigmoid(og.view(H, K))).reshape(D))
            hist = window[1:]
            if t + 1 == keep:
                req.hist, req.S = hist.clone(), S.clone()
        return torch.stack(outs)


# ---------------------------------------------------------------------------------------
# the example
# ---------------------------------------------------------------------------------------
@dataclass
class Report:
    decode_steps: int = 0
    verify_rounds: int = 0
    accepted: List[int] = field(default_factory=list)
    out_ratio: float = 0.0  # max over steps of max(|out − ref| / (2⁻⁸·|ref| + 2e-3·max|ref|)) (≤ 1 passes)
    hidden_rel: float = 0.0  # max |o_proj(out) − o_proj(ref)| / max|o_proj(ref)| over steps
    state_rel: float = 0.0  # final committed states: max|S − ref| / max|ref|
    pad_zero: bool = True
    status_ok: bool = True

    @property
    def passed(self) -> bool:
        return self.out_ratio <= 1.0 and self.hidden_rel <= 2e-2 and self.state_rel <= 1e-3 and self.pad_zero \
            and self.status_ok

    def describe(self) -> str:
        return (f"{self.decode_steps} decode steps, {self.verify_rounds} verify rounds (accepted {self.accepted}); "
                f"out err/bound {self.out_ratio:.3f}, hidden rel {self.hidden_rel:.2e}, state rel {self.state_rel:.2e}, "
                f"pad rows zero: {self.pad_zero}, status ok: {self.status_ok} -> {'PASS' if self.passed else 'FAIL'}")


def _out_ratio(got: torch.Tensor, ref: torch.Tensor) -> float:
    g = got.detach().to("cpu", torch.float64)
    bound = 2.0 ** -8 * ref.abs() + 2e-3 * ref.abs().max()
    return float(((g - ref).abs() / bound.clamp_min(1e-300)).max())


def run_example(device: str = "cpu", steps: int = 64, rounds: int = 8, scheme: str = "record", B: int = 3,
                q: int = 4, heads: int = 2, hidden: int = 256, lower_bound: Optional[float] = -5.0,
                cuda_graph: bool = False, seed: int = 0, verbose: bool = False) -> Report:
    """Runs the decode loop and the verify loop on `device` and compares with the reference.

    B real requests plus one padding row (slot 0); request b's token stream is a fixed
    random sequence (the "target"); ``cuda_graph`` captures the decode step (in_proj → core
    → o_proj) once and replays it with each step's tokens copied into the captured input.
    """
    dev = torch.device(device)
    torch.manual_seed(seed)
    layer = KdaLayer(hidden=hidden, heads=heads, lower_bound=lower_bound, seed=seed).to(dev)
    vocab = 512
    embed = nn.Embedding(vocab, hidden, dtype=torch.bfloat16).to(dev)
    embed.weight.requires_grad_(False)
    g = torch.Generator().manual_seed(seed + 1)
    total = steps + rounds * q + 1
    target = torch.randint(0, vocab, (B, total), generator=g)  # the continuation each request follows
    server = KdaServer(layer, B + 1, q, scheme, dev)  # batch row B is padding
    ref = TorchReference(layer, B)
    rep = Report()
    D = layer.D

    # ---- 1. decode loop --------------------------------------------------------------------
    slots = server.tensor([1 + b for b in range(B)] + [0])  # the last row is a pad (null slot)
    tok = torch.zeros(B + 1, dtype=torch.long, device=dev)
    out = torch.empty(B + 1, D, dtype=torch.bfloat16, device=dev)
    proj_buf = torch.empty(B + 1, layer.pitch, dtype=torch.bfloat16, device=dev)
    hidden_out = torch.empty(B + 1, hidden, dtype=torch.bfloat16, device=dev)

    def decode_step():
        proj_buf.copy_(layer.project(embed(tok)))
        server.decode(proj_buf, slots, out)
        hidden_out.copy_(layer.o_proj(out))

    graph = None
    if cuda_graph:
        if dev.type != "cuda":
            raise ValueError("cuda_graph needs device='cuda'")
        # warm up on a side stream (allocator, cuBLAS) with a pad-only batch: no cache is touched
        real = slots.clone()
        slots.fill_(0)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            decode_step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            decode_step()
        slots.copy_(real)

    for i in range(steps):
        tok[:B] = target[:, i].to(dev)
        if graph is not None:
            graph.replay()
        else:
            decode_step()
        for b in range(B):
            r = ref.run(b, proj_buf[b:b + 1], keep=1)
            rep.out_ratio = max(rep.out_ratio, _out_ratio(out[b:b + 1], r))
            rh = r @ layer.o_proj.weight.detach().to("cpu", torch.float64).T
            gh = hidden_out[b].detach().to("cpu", torch.float64)
            rep.hidden_rel = max(rep.hidden_rel, float((gh - rh[0]).abs().max() / rh.abs().max()))
        rep.pad_zero &= bool((out[B] == 0).all())
        rep.decode_steps += 1

    # ---- 2. speculative verify loop ----------------------------------------------------------
    Bq = B + 1
    pos = [steps] * B  # index in `target` of each request's next unprocessed token
    prev_acc = [1] * Bq  # tokens of the previous step accepted (decode: 1)
    g_draft = torch.Generator().manual_seed(seed + 2)
    vout = torch.empty(Bq * q, D, dtype=torch.bfloat16, device=dev)
    vtok = torch.zeros(Bq * q, dtype=torch.long, device=dev)
    if scheme == "per_token":
        # fixed [B+1, q] slot table: token t's state goes to column t; column 0 is the
        # request's own slot (its window lives there); the pad row is all null
        table = [[1 + b] + [1 + Bq + b * q + t for t in range(1, q)] for b in range(B)] + [[0] * q]
        vslots = server.tensor(table)
    else:
        vslots = server.tensor([1 + b for b in range(B)] + [0])  # checkpoints (= records rows)
    for r_i in range(rounds):
        drafts = []
        for b in range(B):
            seq = target[b, pos[b]:pos[b] + q].clone()  # the last accepted token + q-1 drafts
            wrong = torch.rand(q - 1, generator=g_draft) < 0.35  # the drafter's mistakes
            seq[1:] = torch.where(wrong, (seq[1:] + 1) % vocab, seq[1:])
            drafts.append(seq)
            vtok[b * q:(b + 1) * q] = seq.to(dev)
        # accepted (previous step) sets the conv offset, and in per_token mode the start
        # state column accepted-1 of the table
        acc_t = server.tensor(prev_acc)
        vproj = layer.project(embed(vtok))
        server.verify(vproj, vslots, acc_t, vout)
        # accept: the longest correct draft prefix + the bonus (target) token
        acc = []
        for b in range(B):
            n = 1
            while n < q and bool(drafts[b][n] == target[b, pos[b] + n]):
                n += 1
            acc.append(n)
            r = ref.run(b, vproj[b * q:(b + 1) * q], keep=n)
            rep.out_ratio = max(rep.out_ratio, _out_ratio(vout[b * q:(b + 1) * q], r))
            pos[b] += n
        rep.pad_zero &= bool((vout[B * q:] == 0).all())
        rep.accepted.extend(acc)
        # commit the accepted tokens
        if scheme == "record":
            server.kda.commit(server.caches, vslots, None, server.tensor(acc + [0]))
        elif scheme == "fused":
            server.caches.pending[vslots[:B].long()] = server.tensor(acc)
        # per_token: nothing to commit, the state after token n-1 already is in column n-1
        prev_acc = acc + [1]
        rep.verify_rounds += 1
    if scheme == "fused":
        server.kda.flush(server.caches, server.tensor([1 + b for b in range(B)]))

    # ---- 3. final states ------------------------------------------------------------------
    st = server.kda.status()
    rep.status_ok = st.ok
    worst = 0.0
    for b in range(B):
        slot = table[b][prev_acc[b] - 1] if scheme == "per_token" else 1 + b
        got = server.caches.state[slot].detach().to("cpu", torch.float64)
        want = ref.reqs[b].S
        worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    rep.state_rel = worst
    if verbose:
        print(rep.describe())
    return rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() and kd.cuda_built() else "cpu")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--scheme", choices=["record", "fused", "per_token"], default="record")
    ap.add_argument("--softplus", action="store_true", help="softplus gate (Kimi Linear) instead of lower bound -5")
    ap.add_argument("--cuda-graph", action="store_true", help="capture the decode step in a CUDA graph")
    a = ap.parse_args(argv)
    rep = run_example(a.device, a.steps, a.rounds, a.scheme, lower_bound=None if a.softplus else -5.0,
                      cuda_graph=a.cuda_graph)
    print(f"[{a.device}, {a.scheme}] " + rep.describe())
    return 0 if rep.passed else 1


if __name__ == "__main__":
    sys.exit(main())
