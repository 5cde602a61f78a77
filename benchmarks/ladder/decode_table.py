"""benchmarks/ladder/decode_table.py — the decode table of docs/PERFORMANCE.md from kda_bench CSVs:
per (H, B) of the issue's grid, the floor, `auto`'s time and plan, × floor and / vLLM, the same for
gate mode 2, and vLLM's stored figure. A point measured in several CSVs (passes of one binary)
shows the median of its runs.

    python3 benchmarks/ladder/decode_table.py --auto a0.csv a1.csv --mode2 m0.csv m1.csv \
        [--H 12,24,48,96] [--B 1,8,32,64,128,256]
"""

import argparse
import csv
import statistics


def load(paths, gate):
    """{(H, B): [rows]} of the fp32 decode rows of `paths` run with gate request `gate`."""
    points = {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["mode"] == "decode" and r["state"] == "f32" and r["gate"] == gate:
                    points.setdefault((int(r["H"]), int(r["B"])), []).append(r)
    return points


def median(rows, key):
    return statistics.median(float(r[key]) for r in rows)


def vs_peer(us, peer):
    return f"{us / peer:.3f}" if peer > 0 else "—"


def plan(row):
    v = row["variant"] + (f"/{row['split']}" if row["variant"] == "split" else "")
    return v + ("+g1" if row.get("gate_plan") == "1" else "")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--auto", nargs="+", required=True, help="CSVs of `kda_bench --gate auto`")
    ap.add_argument("--mode2", nargs="*", default=[], help="CSVs of `kda_bench --gate 2`")
    ap.add_argument("--H", default="12,24,48,96")
    ap.add_argument("--B", default="1,8,32,64,128,256")
    a = ap.parse_args(argv)
    auto, mode2 = load(a.auto, "auto"), load(a.mode2, "2")
    print("| H | B | floor µs | `auto` µs (plan) | × floor | / vLLM | mode 2 µs | × floor | / vLLM | vLLM µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for H in map(int, a.H.split(",")):
        for B in map(int, a.B.split(",")):
            rows = auto.get((H, B))
            if not rows:
                continue
            us, fl, peer = median(rows, "us"), median(rows, "floor_us"), float(rows[0]["peer_us"])
            m = mode2.get((H, B))
            mode2_cells = "— | — | —"
            if m:
                mu = median(m, "us")
                mode2_cells = f"{mu:.2f} | {mu / median(m, 'floor_us'):.3f} | {vs_peer(mu, peer)}"
            print(
                f"| {H} | {B} | {fl:.1f} | {us:.2f} ({plan(rows[0])}) | {us / fl:.3f} | {vs_peer(us, peer)} | "
                f"{mode2_cells} | {peer:.2f} |"
            )


if __name__ == "__main__":
    main()
