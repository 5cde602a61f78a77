"""Plots kda-decode's decode times against fla's chain (docs/decode_vs_fla.png).

Usage: python benchmarks/plot.py OUT.png FLA.csv OURS.csv [OURS.csv ...]
OURS.csv: benchmarks/kda_bench --csv output; one line per requested variant (`variant_req`),
  skipping rows where another variant ran (`variant` != `variant_req`: a fallback; rows
  requested as `auto` form the "auto" line, whatever variant the planner picked); a later
  file overrides an earlier one at the same (variant, H, B).
FLA.csv: benchmarks/fla_chain.py --out output. Only the H values that FLA.csv holds are
  plotted. All from runs of the same day on one H200.
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out_png, fla_csv, *ours_csvs):
    ours = defaultdict(dict)  # variant -> {(H, B): (us, pct, floor)}
    for path in ours_csvs:
        for r in csv.DictReader(open(path)):
            if r["mode"] != "decode" or (r["variant"] != r["variant_req"] and r["variant_req"] != "auto"):
                continue
            ours[r["variant_req"]][(int(r["H"]), int(r["B"]))] = (float(r["us"]), float(r["pct_ceiling"]),
                                                                   float(r["floor_us"]))
    fla = {}
    for r in csv.DictReader(open(fla_csv)):
        us, fl = float(r["us"]), float(r["floor_us"])
        fla[(int(r["H"]), int(r["B"]))] = (us, 100.0 * fl / us, fl)
    series = [(f"kda-decode ({v})", d, "o-") for v, d in sorted(ours.items())] + [("fla chain", fla, "s--")]
    Hs = sorted({h for (h, _) in fla})
    fig, axes = plt.subplots(2, len(Hs), figsize=(4 * len(Hs), 7), squeeze=False)
    colors = {name: f"C{i}" for i, (name, _, _) in enumerate(series)}  # one colour per series everywhere
    for j, H in enumerate(Hs):
        floor = {}
        for name, d, style in series:
            pts = sorted((b, v) for (h, b), v in d.items() if h == H)
            if not pts:
                continue
            B = [b for b, _ in pts]
            axes[0][j].plot(B, [v[0] for _, v in pts], style, label=name, color=colors[name])
            axes[1][j].plot(B, [v[1] for _, v in pts], style, label=name, color=colors[name])
            floor.update({b: v[2] for b, v in pts})
        fb = sorted(floor)
        axes[0][j].plot(fb, [floor[b] for b in fb], ":", color="gray", label="floor")
        axes[0][j].set(xscale="log", yscale="log", title=f"decode, H = {H}", xlabel="B", ylabel="µs per step")
        axes[1][j].set(xscale="log", ylim=(0, 100), xlabel="B", ylabel="% of copy ceiling")
        axes[0][j].legend(fontsize=7)
        axes[1][j].grid(True, alpha=0.3)
        axes[0][j].grid(True, alpha=0.3)
    fig.suptitle("H200, fp32 state, BENCHMARKS.md protocol (cold caches, graph replay)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
