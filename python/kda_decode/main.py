"""python -m kda_decode.main — the main job: realistic KDA layers through the prepared core.

For the Kimi-Linear shard (H = 32) and the Kimi K3 shards (H = 12, H = 96), W = 4, with the
lower-bound and the softplus gate, it runs

1. a 64-step decode trajectory of B requests, on the GPU when one is present (torch CUDA
   tensors, CUDA backend), else on the CPU backend (numpy);
2. the same trajectory as append steps (records per row Qr = 8: the state is written once
   every 8 steps) and a flush, checked against the decode trajectory bitwise (SPEC §8, fp32
   state: every step's outputs, the windows, the state after the flush), both on one variant;
3. one verify step per scheme, q = 4: ``per_token``; ``record`` followed by ``commit``;
   ``fused`` (pending = accepted) — each after the trajectory;
4. an agreement check: on a GPU, the CUDA backend against the CPU backend on the same
   inputs (SPEC §8 backend vs backend: out within 1 bf16 ulp + 2e-3·max|ref|, state within
   2e-5·n·max|ref|, windows bitwise); on the CPU, the contract identities commit(n) after a
   record verify == the per-token state after n tokens, and fused == flush + record,
   both bitwise;
5. the golden cases (``--golden DIR``, default ``tests/golden`` when present);

and prints a short report: agreement, the append check, µs per step (wall time of eager steps, host launch
included; the benchmark in ``benchmarks/`` times by the BENCHMARKS.md protocol). Exit code
0 only when every check passes.

Run at a terminal, it also prints a line per stage (each layer and gate, each golden case)
with the stage's time, the elapsed time and an ETA, to stderr; in CI (``CI`` set) or with
output redirected it stays quiet (``--progress on|off`` decides instead).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import kda_decode as kd
from kda_decode._progress import Progress
from kda_decode.devices import Device, cuda_usable

K = 128
W = 4


def make_layer(H: int, lower_bound: Optional[float], seed: int) -> Dict[str, Any]:
    rng = np.random.default_rng(seed)
    D = H * K
    return dict(
        conv_weight=(rng.normal(0, 0.4, size=(3 * D, 1, W))).astype(np.float32),
        conv_bias=(rng.normal(0, 0.05, size=3 * D)).astype(np.float32),
        f_b_weight=kd.float32_to_bf16(rng.normal(0, 0.08, size=(D, K))),
        A_log=np.log(rng.uniform(1, 16, size=H)).astype(np.float32),
        dt_bias=(rng.normal(0, 0.5, size=D)).astype(np.float32),
        norm_weight=(1 + rng.normal(0, 0.1, size=K)).astype(np.float32),
        lower_bound=lower_bound,
    )


class Setup:
    """One layer on one backend with its caches (DS windows, fp32 state, records)."""

    def __init__(
        self,
        be: Device,
        layer: dict,
        H: int,
        slots: int,
        q_max: int = 4,
        records_per_row: Optional[int] = None,
        policies: Optional[Dict[Tuple[str, int, int], kd.Policy]] = None,
    ):
        self.be, self.H, self.D = be, H, H * K
        rng = np.random.default_rng(11)
        w = {k: (be.put(v, bf16=(k == "f_b_weight")) if isinstance(v, np.ndarray) else v) for k, v in layer.items()}
        self.window = W - 2 + q_max
        Qr = q_max if records_per_row is None else records_per_row
        self.kda = kd.PreparedKda(conv_dim_first=True, policies=policies, **w)
        conv = kd.float32_to_bf16(rng.normal(0, 1, size=(slots, 3 * self.D, self.window)))
        state = (rng.normal(0, 0.02, size=(slots, H, K, K))).astype(np.float32)
        self.caches = kd.Caches(
            conv_state=be.put(conv, bf16=True),
            state=be.put(state),
            correction=be.put(np.zeros((slots, H, Qr, K), np.float32)),
            key_gate=be.put(np.zeros((slots, H, Qr, 2 * K), np.float32)),
            pending=be.put(np.zeros(slots, np.int32)),
        )
        self.kda.prepare(self.caches)

    def inputs(self, rows: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        pitch = 4 * self.D + K + self.H + 8  # padding columns
        return kd.float32_to_bf16(rng.normal(0, 1, size=(rows, pitch)))

    def step(self, proj: np.ndarray, slots: np.ndarray, **kw: Any) -> Any:
        be = self.be
        out = be.put(np.zeros((proj.shape[0], self.D), np.uint16), bf16=True)
        self.kda.run(
            be.put(proj, bf16=True),
            out,
            self.caches,
            be.put(slots.astype(np.int32)),
            **{k: (be.put(v.astype(np.int32)) if isinstance(v, np.ndarray) else v) for k, v in kw.items()},
        )
        return out

    def snapshot(self) -> dict:
        c = self.caches
        return dict(conv=self.be.host(c.conv_state), state=self.be.host(c.state))


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """max|a − b| / max|b|."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    m = np.max(np.abs(b)) or 1.0
    return float(np.max(np.abs(a - b)) / m)


def out_ok(gpu_bits: np.ndarray, cpu_bits: np.ndarray) -> bool:
    g, c = kd.bf16_to_float32(gpu_bits).astype(np.float64), kd.bf16_to_float32(cpu_bits).astype(np.float64)
    return bool(np.all(np.abs(g - c) <= np.abs(c) / 128 + 2e-3 * np.max(np.abs(c))))


def trajectory(
    be: Device, layer: Dict[str, Any], H: int, B: int, steps: int, seed: int, q_max: int = 4
) -> Tuple[Setup, List[np.ndarray], float]:
    """A decode trajectory of requests in slots 1..B; returns (setup, outputs, µs per step)."""
    s = Setup(be, layer, H, slots=B * q_max + 2, q_max=q_max)
    slots = np.arange(1, B + 1, dtype=np.int32)
    outs, times = [], []
    for i in range(steps):
        proj = s.inputs(B, seed * 1000 + i)
        be.sync()
        t0 = time.perf_counter()
        o = s.step(proj, slots)
        be.sync()
        times.append((time.perf_counter() - t0) * 1e6)
        outs.append(be.host(o))
    st = s.kda.status()
    if not st.ok:
        raise RuntimeError(f"status after the trajectory: {st.describe()}")
    return s, outs, float(np.median(times))


APPEND_QR = 8


def append_check(
    be: Device, layer: Dict[str, Any], H: int, B: int, steps: int, seed: int, dec: Setup, dec_outs: List[np.ndarray]
) -> Tuple[bool, str, float]:
    """The trajectory of :func:`trajectory` (same initial caches, inputs and slots) as append
    steps (Qr = 8), then a flush; bitwise against the decode trajectory ``dec`` / ``dec_outs``
    (SPEC §8: n append steps then flush == n decode steps, fp32 state) on the same variant.
    Returns (ok, detail, µs per append step)."""
    slots_n = B * 4 + 2
    vd = dec.kda.plan("decode", B, 1, dec.caches)["variant"]
    probe = Setup(be, layer, H, slots=slots_n, records_per_row=APPEND_QR)
    va = probe.kda.plan("append", B, 1, probe.caches)["variant"]
    del probe
    if va != vd:  # e.g. WS for decode (no append path): compare with a decode run on the append variant
        pol = {("decode", B, 1): kd.Policy(variant=va)}
        dec = Setup(be, layer, H, slots=slots_n, policies=pol)
        dec_outs = []
        for i in range(steps):
            dec_outs.append(be.host(dec.step(dec.inputs(B, seed * 1000 + i), np.arange(1, B + 1, dtype=np.int32))))
    a = Setup(
        be, layer, H, slots=slots_n, records_per_row=APPEND_QR, policies={("append", B, 1): kd.Policy(variant=va)}
    )
    slots = np.arange(1, B + 1, dtype=np.int32)
    same_out, times = True, []
    for i in range(steps):
        proj = a.inputs(B, seed * 1000 + i)
        be.sync()
        t0 = time.perf_counter()
        o = a.step(proj, slots, mode="append")
        be.sync()
        times.append((time.perf_counter() - t0) * 1e6)
        same_out &= bool(np.array_equal(be.host(o), dec_outs[i]))
    a.kda.flush(a.caches, be.put(slots))
    want, got = dec.snapshot(), a.snapshot()
    same_state = bool(np.array_equal(got["state"].view(np.uint32), want["state"].view(np.uint32)))
    same_win = bool(np.array_equal(got["conv"], want["conv"]))
    pend = be.host(a.caches.pending)
    st = a.kda.status()
    ok = same_out and same_state and same_win and st.ok and not pend.any()
    detail = (
        f"append(Qr={APPEND_QR})+flush==decode [{va}]: outputs {'bitwise' if same_out else 'DIFFER'}, state "
        f"{'bitwise' if same_state else 'DIFFERS'}, windows {'bitwise' if same_win else 'DIFFER'}"
        + ("" if st.ok else f", status {st.describe()}")
    )
    return ok, detail, float(np.median(times))


def verify_steps(s: Setup, B: int, seed: int) -> dict:
    """After a trajectory: a per_token step, a record step + commit of 2, then a fused step
    that folds those 2 records (pending = accepted = 2); q = 4. Returns µs per step."""
    q, be, res = 4, s.be, {}
    ck = np.arange(1, B + 1, dtype=np.int32)  # the requests' slots (and records rows)
    tbl = np.empty((B, q), np.int32)
    tbl[:, 0] = ck
    tbl[:, 1:] = B + 1 + np.arange(B * (q - 1), dtype=np.int32).reshape(B, q - 1)
    acc2 = np.full(B, 2, np.int32)
    pend = np.zeros(B * q + 2, np.int32)
    pend[ck] = 2
    for name, sl, kw in (
        ("per_token", tbl, dict(q=q, mode="per_token")),
        ("record", ck, dict(q=q, mode="record")),
        ("fused", ck, dict(q=q, mode="fused", accepted=acc2)),
    ):
        if name == "fused":
            be.assign(s.caches.pending, pend)  # the engine marks the 2 accepted records
        proj = s.inputs(B * q, seed)
        be.sync()
        t0 = time.perf_counter()
        s.step(proj, sl, **kw)
        be.sync()
        res[name] = (time.perf_counter() - t0) * 1e6
        if name == "record":
            t0 = time.perf_counter()
            # commit 2 tokens into a copy-free second view: the fused step below folds the
            # same 2 records itself, so commit here only to time it, on a spare slot pair
            s.kda.commit(s.caches, be.put(tbl[:, 1].copy()), be.put(ck), be.put(acc2))
            be.sync()
            res["commit"] = (time.perf_counter() - t0) * 1e6
    st = s.kda.status()
    if not st.ok:
        raise RuntimeError(f"status after the verify steps: {st.describe()}")
    return res


def identities(be: Device, layer: dict, H: int, B: int) -> tuple:
    """commit(n) == per-token state after n tokens, and fused == flush + record (bitwise)."""
    q, n = 4, 3
    a = Setup(be, layer, H, slots=B * q + 2)
    b = Setup(be, layer, H, slots=B * q + 2)
    proj = a.inputs(B * q, 5)
    tbl = (1 + np.arange(B * q, dtype=np.int32)).reshape(B, q)
    a.step(proj, tbl, q=q, mode="per_token")
    ck = tbl[:, 0].copy()
    b.step(proj, ck, q=q, mode="record")
    b.kda.commit(b.caches, be.put(ck), None, be.put(np.full(B, n, np.int32)))
    sa, sb = a.snapshot()["state"], b.snapshot()["state"]
    commit_ok = bool(np.array_equal(sa[tbl[:, n - 1]].view(np.uint32), sb[ck].view(np.uint32)))
    # fused with pending = accepted vs flush then record
    c = Setup(be, layer, H, slots=B * q + 2)
    d = Setup(be, layer, H, slots=B * q + 2)
    for s in (c, d):
        s.step(proj, ck, q=q, mode="record")
    acc = np.full(B, 2, np.int32)
    pend = np.zeros(B * q + 2, np.int32)
    pend[ck] = 2
    for s in (c, d):
        be.assign(s.caches.pending, pend)
    proj2 = c.inputs(B * q, 6)
    oc = be.host(c.step(proj2, ck, q=q, mode="fused", accepted=acc))
    d.kda.flush(d.caches, be.put(ck))
    od = be.host(d.step(proj2, ck, q=q, mode="record", accepted=acc))
    fused_ok = bool(np.array_equal(oc, od)) and bool(
        np.array_equal(c.snapshot()["state"].view(np.uint32), d.snapshot()["state"].view(np.uint32))
    )
    return commit_ok, fused_ok


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="kda-decode main job: realistic layers, verify schemes, golden cases")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--steps", type=int, default=64, help="decode steps of each trajectory (and append steps)")
    ap.add_argument("--golden", default="tests/golden")
    ap.add_argument(
        "--progress",
        choices=["auto", "on", "off"],
        default="auto",
        help="a line per stage with elapsed time and ETA on stderr (auto: at a terminal, not in CI)",
    )
    args = ap.parse_args(argv)

    cuda = args.device in ("auto", "cuda") and cuda_usable()
    if args.device == "cuda" and not cuda:
        print("--device cuda: no usable GPU (torch with CUDA and a CUDA build of kda_decode are needed)")
        return 2
    be = Device("cuda" if cuda else "cpu")
    B = 64 if cuda else 4
    print(
        f"kda-decode main job — backend {'CUDA (' + be.torch.cuda.get_device_name() + ')' if cuda else 'CPU'}, "
        f"B = {B}, {args.steps} decode steps and {args.steps} append steps (Qr = {APPEND_QR}), W = {W}"
    )
    ok = True
    rows = []
    layers = [
        (name, H, gate, lb)
        for name, H in (("Kimi-Linear shard", 32), ("Kimi K3 shard", 12), ("Kimi K3 shard", 96))
        for gate, lb in (("lower-bound", -5.0), ("softplus", None))
    ]
    cases = sorted(glob.glob(os.path.join(args.golden, "*", "case.json")))
    # stage weights ~ relative cost (measured on the CPU backend): a layer's work grows with H
    # (the state is H·64 KiB per request) and with the steps (decode, then append), plus about
    # 70 steps' worth for its verify steps and the agreement check; a golden case costs about a
    # quarter of an H = 1 layer
    layer_w = (2 * args.steps + 70) / (2 * 64 + 70)
    golden_w = 0.25
    prog = Progress(
        sum(H * layer_w for _, H, _, _ in layers) + golden_w * len(cases),
        len(layers) + len(cases),
        enabled=None if args.progress == "auto" else args.progress == "on",
    )
    for name, H, gate, lb in layers:
        with prog.stage(
            f"{name} H={H}, {gate} gate: {args.steps} decode + append steps, verify, agreement", H * layer_w
        ):
            layer = make_layer(H, lb, seed=H)
            s, outs, us = trajectory(be, layer, H, B, args.steps, seed=H)
            app_ok, app_detail, app_us = append_check(be, layer, H, B, args.steps, H, s, outs)
            ver = verify_steps(s, B, seed=H + 1)
            # agreement
            if cuda:
                cpu = Device("cpu")
                Bc, n = 4, 8
                gs, go, _ = trajectory(be, layer, H, Bc, n, seed=7)
                cs, co, _ = trajectory(cpu, layer, H, Bc, n, seed=7)
                agree_out = all(out_ok(g, c) for g, c in zip(go, co))
                st_rel = rel(gs.snapshot()["state"], cs.snapshot()["state"])
                win_ok = bool(np.array_equal(gs.snapshot()["conv"], cs.snapshot()["conv"]))
                agree = agree_out and st_rel <= 2e-5 * n and win_ok
                detail = (
                    f"GPU vs CPU over {n} steps: out {'ok' if agree_out else 'FAIL'}, state rel {st_rel:.1e}, "
                    f"windows {'bitwise' if win_ok else 'DIFFER'}"
                )
            else:
                c_ok, f_ok = identities(be, layer, H, 2)
                agree = c_ok and f_ok
                detail = (
                    f"commit==per_token {'bitwise' if c_ok else 'DIFFERS'}, fused==flush+record "
                    f"{'bitwise' if f_ok else 'DIFFERS'}"
                )
            finite = all(np.all(np.isfinite(kd.bf16_to_float32(o))) for o in outs)
            good = agree and finite and app_ok
            ok &= good
            rows.append((f"{name} H={H}", gate, us, app_us, ver, good, detail + "; " + app_detail))
    print()
    head = (
        f"{'layer':<22} {'gate':<12} {'decode µs':>10} {'append µs':>10} {'per_token':>10} {'record':>8} "
        f"{'commit':>8} {'fused':>8}"
    )
    print(head + "  agreement")
    for lname, gate, us, app_us, ver, good, detail in rows:
        print(
            f"{lname:<22} {gate:<12} {us:>10.1f} {app_us:>10.1f} {ver['per_token']:>10.1f} {ver['record']:>8.1f} "
            f"{ver['commit']:>8.1f} {ver['fused']:>8.1f}  {'PASS' if good else 'FAIL'} ({detail})"
        )
    print("(µs: median wall time of eager steps incl. host launch; benchmarks/ time by the BENCHMARKS.md protocol)")
    # golden cases
    if cases:
        from kda_decode import golden

        print()
        for c in cases:
            with prog.stage(f"golden case {os.path.basename(os.path.dirname(c))}", golden_w):
                for layout in ("ds", "sd"):
                    res = golden.run_case(os.path.dirname(c), device="cuda" if cuda else "cpu", layout=layout)
                    ok &= bool(res.passed)
                    print(
                        ("PASS " if res.passed else "FAIL ") + os.path.basename(os.path.dirname(c)) + f" [{layout}]",
                        flush=True,
                    )
    else:
        print(f"\n(no golden cases under {args.golden})")
    print("\nmain job:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
