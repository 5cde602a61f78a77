"""flash-linear-attention's KDA decode and per-token verify chains, timed by the protocol of BENCHMARKS.md.

The peer of kda-decode in the side-by-side tables. Decode (``--mode decode``): three
``causal_conv1d_update`` calls (q, k, v sections), ``F.linear(f_a, F_B)`` for the raw gate,
``fused_recurrent_kda_fwd`` on a slot pool (in-kernel l2norm, gate and beta sigmoid, [V, K]
state) and the sigmoid-gated RMSNorm of ``FusedRMSNormGated``. Per-token verify (``--mode
per_token --q Q``): the same chain over q tokens per request — ``causal_conv1d`` over the q
tokens from each request's window (fla's update op takes one token), the gate GEMM over the
B·q rows, and ``fused_recurrent_kda_fwd`` with ``ssm_state_indices`` [B, q] (the state after
token t stored in slot [b, t]) and ``num_accepted_tokens`` (the start state in slot
[b, accepted − 1]), the kind kda-decode's ``per_token`` step runs. A benchmark-only
dependency: the library never imports fla. Run on the GPU machine with the fla wheels
installed (scripts/gpu_run.sh, stage fla).

Output: one line per (H, B) with µs per step, the floor of our step of the same kind (the
same bytes as kda_bench counts) and GB/s; ``--out FILE`` writes a CSV.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

K = 128
W = 4


def ceiling_bytes_per_s() -> float:
    """1 GiB device-to-device copy, median of 15, read + write bytes."""
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1)
    for _ in range(3):
        b.copy_(a)
    times = []
    for _ in range(15):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return 2 * n / (times[len(times) // 2] * 1e-3)


def floor_bytes(H: int, B: int, q: int = 1, per_token: bool = False) -> float:
    """The bytes a decode (or per-token verify) step must move once (BENCHMARKS.md §2), fp32
    state: kda_bench's floor_bytes for the same kind."""
    items = H * B
    tile = K * K * 4
    state = tile * (1 + q) if per_token else 2 * tile
    conv = 3 * K * ((W - 1) + (W - 2 + q)) * 2
    rows = q * (4 * K * 2 + 2 + K * 2)
    return items * (state + conv + rows) + B * q * K * 2 + H * (K * K * 2 + 3 * W * K * 4)


def bench(H: int, B: int, ceiling: float, q: int = 1, per_token: bool = False) -> dict:
    from fla.modules.conv.causal_conv1d import causal_conv1d
    from fla.modules.conv.triton.ops import causal_conv1d_update
    from fla.modules.fused_norm_gate import rms_norm_gated
    from fla.ops.kda.fused_recurrent import fused_recurrent_kda_fwd

    D = H * K
    T = q if per_token else 1
    N = max(4, min(64, math.ceil(400e6 / (B * H * 65536))))
    P = B * N * T + 1  # per-token steps store T states per request
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(7)

    def rnd(*shape, dtype=torch.bfloat16, scale=1.0):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * scale).to(dtype)

    conv_w = [rnd(D, W, dtype=torch.float32, scale=0.4).to(torch.bfloat16) for _ in range(3)]
    f_b = rnd(D, K, scale=0.08)
    A_log = rnd(H, dtype=torch.float32, scale=0.5)
    dt_bias = rnd(D, dtype=torch.float32, scale=0.5)
    norm_w = rnd(K, dtype=torch.float32, scale=0.2) + 1.0
    state = rnd(P, H, K, K, dtype=torch.float32, scale=0.05)  # [V, K] per head
    # fla's conv update takes one cache row per batch entry: each step gets its own rows
    caches = [rnd(N * B, D, W, scale=1.0) for _ in range(3)]
    pitch = 4 * D + K + H
    proj = rnd(N, B, T, pitch) if per_token else rnd(N, B, pitch)
    outs = torch.empty(N, B * T, D, dtype=torch.bfloat16, device=dev)
    o_buf = torch.empty(N, B, T, H, K, dtype=torch.bfloat16, device=dev)
    perm = torch.randperm(P - 1, generator=torch.Generator().manual_seed(3)) + 1
    slots = perm[: N * B * T].to(torch.int32).view(N, B, T).to(dev)
    # per-token: accepted tokens of the previous verify, 1 … q (the start slot's column)
    accepted = torch.randint(1, T + 1, (N, B), generator=torch.Generator().manual_seed(5), dtype=torch.int32).to(dev)

    def step_verify(i: int):
        x = proj[i]  # [B, T, pitch]
        ys = []
        for s in range(3):
            rows = caches[s][i * B:(i + 1) * B]
            y, final = causal_conv1d(x[:, :, s * D:(s + 1) * D], weight=conv_w[s], initial_state=rows,
                                     output_final_state=True, activation="silu")
            rows.copy_(final)
            ys.append(y)
        graw = F.linear(x[:, :, 4 * D:4 * D + K].reshape(B * T, K), f_b)
        beta = x[:, :, 4 * D + K:4 * D + K + H]
        o, _ = fused_recurrent_kda_fwd(
            q=ys[0].view(B, T, H, K), k=ys[1].view(B, T, H, K), v=ys[2].view(B, T, H, K),
            g=graw.view(B, T, H, K), beta=beta.reshape(B, T, H), A_log=A_log, dt_bias=dt_bias,
            initial_state=state, inplace_final_state=True, state_v_first=True,
            ssm_state_indices=slots[i], num_accepted_tokens=accepted[i], use_qk_l2norm_in_kernel=True,
            use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True, lower_bound=-5.0, out=o_buf[i])
        y = rms_norm_gated(o.reshape(B * T * H, K), x[:, :, 3 * D:4 * D].reshape(B * T * H, K), norm_w, None,
                           activation="sigmoid", eps=1e-5)
        outs[i].copy_(y.view(B * T, D))

    def step(i: int):
        x = proj[i]
        ys = []
        for s in range(3):
            y, _ = causal_conv1d_update(x[:, s * D:(s + 1) * D], caches[s][i * B:(i + 1) * B], weight=conv_w[s],
                                        activation="silu")
            ys.append(y)
        graw = F.linear(x[:, 4 * D:4 * D + K], f_b)
        beta = x[:, 4 * D + K:4 * D + K + H]
        o, _ = fused_recurrent_kda_fwd(
            q=ys[0].view(B, 1, H, K), k=ys[1].view(B, 1, H, K), v=ys[2].view(B, 1, H, K),
            g=graw.view(B, 1, H, K), beta=beta.reshape(B, 1, H), A_log=A_log, dt_bias=dt_bias,
            initial_state=state, inplace_final_state=True, state_v_first=True,
            ssm_state_indices=slots[i, :, 0], use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
            use_beta_sigmoid_in_kernel=True, lower_bound=-5.0, out=o_buf[i])
        y = rms_norm_gated(o.reshape(B * H, K), x[:, 3 * D:4 * D].reshape(B * H, K), norm_w, None,
                           activation="sigmoid", eps=1e-5)
        outs[i].copy_(y.view(B, D))

    run_step = step_verify if per_token else step

    with torch.inference_mode():
        for i in range(N):  # warm-up: autotune and compile outside the capture
            run_step(i)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                for i in range(N):
                    run_step(i)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(15):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
    times.sort()
    us = times[len(times) // 2] * 1e3 / N
    fb = floor_bytes(H, B, T, per_token)
    return {"H": H, "B": B, "q": T, "us": us, "floor_us": fb / ceiling * 1e6, "GBs": fb / (us * 1e-6) / 1e9}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--H", default="12,32,96")
    ap.add_argument("--B", default="1,8,64,256")
    ap.add_argument("--mode", choices=["decode", "per_token"], default="decode")
    ap.add_argument("--q", type=int, default=4, help="tokens per request (per_token)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    per_token = args.mode == "per_token"
    q = args.q if per_token else 1
    ceiling = ceiling_bytes_per_s()
    print(f"# fla chain (flash-linear-attention), {args.mode}{f' q={q}' if per_token else ''}, "
          f"copy ceiling {ceiling / 1e9:.0f} GB/s")
    print(f"{'H':>3} {'B':>4} {'fla us':>9} {'floor us':>9} {'x':>6} {'GB/s':>7}")
    rows = []
    for H in [int(x) for x in args.H.split(",")]:
        for B in [int(x) for x in args.B.split(",")]:
            try:
                r = bench(H, B, ceiling, q, per_token)
            except Exception as e:  # a peer failure must not hide our own numbers
                print(f"{H:>3} {B:>4} failed: {type(e).__name__}: {e}")
                continue
            rows.append(r)
            print(f"{H:>3} {B:>4} {r['us']:>9.2f} {r['floor_us']:>9.2f} {r['us'] / r['floor_us']:>6.2f} {r['GBs']:>7.0f}",
                  flush=True)
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            f.write("mode,q,H,B,us,floor_us,GBs\n")
            for r in rows:
                f.write(f"{args.mode},{r['q']},{r['H']},{r['B']},{r['us']:.3f},{r['floor_us']:.3f},{r['GBs']:.1f}\n")


if __name__ == "__main__":
    main()
