#!/usr/bin/env python3
"""benchmarks/policy_eval.py — scores the automatic variant policy against measured sweeps.

Reads kda_bench CSVs (columns mode, q, H, B, variant_req, variant, us, ...), keeps for every
point (mode, q, H, B) the time of each variant that really ran as requested (rows whose
`variant` differs from `variant_req` fell back and are skipped; a later file overrides an
earlier one), and compares the variant the rule tables of include/kda/heuristics.h pick
(auto_variant: the last rule whose min_items <= B·H) with the fastest measured variant.

    python3 benchmarks/policy_eval.py docs/data/sweep_s9_run1_wide.csv \\
        docs/data/sweep_s9_run4_ws.csv docs/data/sweep_s9_run5.csv

Prints one line per point where at least two variants were measured, then the share of
points where the pick is within 5% of the best and the worst ratio (the issue's criterion:
within 5% at >= 95% of the points, within 15% everywhere). A point whose pick was not
measured is listed as such and not scored.
"""
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rules_from_header(path=os.path.join(ROOT, "include", "kda", "heuristics.h")):
    """{'decode': [(min_items, 'wide'), ...], 'verify': ..., 'fused': ...} from the C++ tables."""
    text = open(path).read()
    out = {}
    for name, key in (("kDecodeRules", "decode"), ("kVerifyRules", "verify"), ("kFusedRules", "fused")):
        m = re.search(name + r"\[\]\s*=\s*\{(.*?)\};", text, re.S)
        if not m:
            raise SystemExit(f"policy_eval: {name} not found in {path}")
        pairs = re.findall(r"\{\s*(\d+)\s*,\s*Variant::k(\w+)\s*\}", m.group(1))
        out[key] = [(int(n), v.lower()) for n, v in pairs]
    return out


def pick(rules, mode, items):
    table = rules["decode" if mode == "decode" else "fused" if mode == "fused" else "verify"]
    v = table[0][1]
    for n, var in table:
        if items >= n:
            v = var
    return v


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    rules = rules_from_header()
    points = {}
    for path in paths:
        for r in csv.DictReader(open(path)):
            if r["variant"] != r["variant_req"]:
                continue  # fell back: not a measurement of the requested variant
            key = (r["mode"], int(r["q"]), int(r["H"]), int(r["B"]))
            points.setdefault(key, {})[r["variant"]] = float(r["us"])
    scored = within5 = 0
    worst = (1.0, None)
    print(f"{'mode':9s} {'q':>2s} {'H':>3s} {'B':>4s} {'items':>6s}  {'best':6s} {'pick':6s} {'pick/best':>9s}  times")
    for key in sorted(points):
        times = points[key]
        if len(times) < 2:
            continue
        mode, q, H, B = key
        best = min(times, key=times.get)
        p = pick(rules, mode, B * H)
        detail = " ".join(f"{v}={t:.1f}" for v, t in sorted(times.items()))
        if p not in times:
            print(f"{mode:9s} {q:2d} {H:3d} {B:4d} {B * H:6d}  {best:6s} {p:6s} {'n/a':>9s}  {detail}")
            continue
        ratio = times[p] / times[best]
        scored += 1
        within5 += ratio <= 1.05
        if ratio > worst[0]:
            worst = (ratio, key)
        print(f"{mode:9s} {q:2d} {H:3d} {B:4d} {B * H:6d}  {best:6s} {p:6s} {ratio:9.3f}  {detail}")
    if scored:
        print(f"\npolicy: pick within 5% of the best at {within5}/{scored} points ({100.0 * within5 / scored:.1f}%); "
              f"worst pick/best {worst[0]:.3f}" + (f" at {worst[1]}" if worst[1] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
