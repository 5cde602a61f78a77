"""Plots kda-decode's decode times against fla's chain (docs/decode_vs_fla.png).

Usage: python benchmarks/plot.py OURS.csv FLA.csv OUT.png
OURS.csv: benchmarks/kda_bench --csv output (rows of the variant the planner picks, 'wide');
FLA.csv: benchmarks/fla_chain.py --out output. Both from runs of the same day on one H200.
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(ours_csv, fla_csv, out_png):
    ours = defaultdict(list)
    for r in csv.DictReader(open(ours_csv)):
        if r["mode"] == "decode" and r["variant"] == "wide":
            ours[int(r["H"])].append((int(r["B"]), float(r["us"]), float(r["pct_ceiling"]), float(r["floor_us"])))
    fla = defaultdict(list)
    for r in csv.DictReader(open(fla_csv)):
        us, fl = float(r["us"]), float(r["floor_us"])
        fla[int(r["H"])].append((int(r["B"]), us, 100.0 * fl / us, fl))
    Hs = sorted(set(ours) | set(fla))
    fig, axes = plt.subplots(2, len(Hs), figsize=(4 * len(Hs), 7), squeeze=False)
    for j, H in enumerate(Hs):
        for name, data, style in (("kda-decode (wide)", ours.get(H, []), "o-"), ("fla chain", fla.get(H, []), "s--")):
            data = sorted(data)
            if not data:
                continue
            B = [d[0] for d in data]
            axes[0][j].plot(B, [d[1] for d in data], style, label=name)
            axes[1][j].plot(B, [d[2] for d in data], style, label=name)
        fl = sorted(ours.get(H, []) or fla.get(H, []))
        axes[0][j].plot([d[0] for d in fl], [d[3] for d in fl], ":", color="gray", label="floor")
        axes[0][j].set(xscale="log", yscale="log", title=f"decode, H = {H}", xlabel="B", ylabel="µs per step")
        axes[1][j].set(xscale="log", ylim=(0, 100), xlabel="B", ylabel="% of copy ceiling")
        axes[0][j].legend(fontsize=8)
        axes[1][j].grid(True, alpha=0.3)
        axes[0][j].grid(True, alpha=0.3)
    fig.suptitle("H200, fp32 state, BENCHMARKS.md protocol (cold caches, graph replay)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:4])
