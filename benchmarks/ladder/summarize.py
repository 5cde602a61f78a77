"""benchmarks/ladder/summarize.py — one table from kda_bench CSVs of several binaries (the
rungs of a ladder): per (mode, q, H, B, state, gate, layout) the µs of every rung, the best
rung's × floor and, where the CSV carries the peer's figure, best / peer. A rung run more than
once (the same binary on alternating LADDER lines) shows the median of its runs, and a last line
per such rung gives how many runs it had and the largest spread (max / min − 1) over its points.

    python3 benchmarks/ladder/summarize.py gpu-out/ladder_*.csv
"""
import csv
import os
import re
import statistics
import sys
from collections import OrderedDict


def main(paths):
    rows = OrderedDict()
    rungs = []
    for path in paths:
        m = re.match(r"ladder_(.+)_\d+\.csv$", os.path.basename(path))
        rung = m.group(1) if m else os.path.basename(path)
        with open(path) as f:
            for r in csv.DictReader(f):
                name = rung if r["variant_req"] in ("auto",) else f"{rung}:{r['variant_req']}"
                if name not in rungs:
                    rungs.append(name)
                mode = r["mode"] + (f"/{r['qr']}" if r.get("qr", "0") not in ("0", "") else "")
                key = (mode, int(r["q"]), int(r["H"]), int(r["B"]), r["state"], r.get("gate", "0"),
                       r.get("layout", "ds"))
                e = rows.setdefault(key, {"floor": float(r["floor_us"]), "peer": float(r.get("peer_us") or 0), "us": {}})
                e["us"].setdefault(name, []).append(float(r["us"]))
    spread = {}
    for e in rows.values():
        for n, runs in e["us"].items():
            if len(runs) > 1:
                k, sp = spread.get(n, (0, 0.0))
                spread[n] = (max(k, len(runs)), max(sp, max(runs) / min(runs) - 1))
        e["us"] = {n: statistics.median(runs) for n, runs in e["us"].items()}
    head = f"{'mode':9} {'q':>2} {'H':>3} {'B':>4} {'st':4} g ly {'floor':>8} " + " ".join(f"{n[:14]:>14}" for n in rungs)
    print(head + f" {'best':>14} {'x flr':>6} {'peer':>8} {'b/peer':>6}")
    for key, e in rows.items():
        mode, q, H, B, st, g, ly = key
        cells = " ".join(f"{e['us'][n]:14.2f}" if n in e["us"] else f"{'-':>14}" for n in rungs)
        best = min(e["us"], key=e["us"].get)
        bu = e["us"][best]
        peer = f"{e['peer']:8.2f} {bu / e['peer']:6.3f}" if e["peer"] > 0 else f"{'':8} {'':6}"
        print(f"{mode:9} {q:2d} {H:3d} {B:4d} {st:4} {g} {ly:2} {e['floor']:8.2f} {cells} {best[:14]:>14} {bu / e['floor']:6.2f} {peer}")
    for n, (k, sp) in spread.items():
        print(f"{n}: up to {k} runs per point, median shown; largest spread {100 * sp:.2f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
