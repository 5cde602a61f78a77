#!/usr/bin/env python3
"""benchmarks/policy_eval.py — scores the automatic variant policy against measured sweeps.

Reads kda_bench CSVs (columns mode, q, H, B, variant_req, variant, us, ...), keeps for every
point (mode, q, H, B) the time of each variant that really ran as requested (rows whose
`variant` differs from `variant_req` fell back and are skipped; a later file overrides an
earlier one), and compares the variant the rule tables of include/kda/heuristics.h pick
(auto_variant: the last rule whose min_items <= B·H) with the fastest measured variant.

    python3 benchmarks/policy_eval.py docs/data/sweep_s9_*.csv docs/data/sweep_s10_*.csv

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


TABLES = (("kDecodeRules", "decode"), ("kAppendRules", "append"), ("kPerTokenRules", "per_token"),
          ("kVerifyRules", "record"), ("kFusedRules", "fused"))


def rules_from_header(path=os.path.join(ROOT, "include", "kda", "heuristics.h")):
    """{'decode': [(min_items, 'wide'), ...], 'append', 'per_token', 'record', 'fused'} from the
    C++ tables (kVerifyRules is the record table)."""
    text = open(path).read()
    out = {}
    for name, key in TABLES:
        m = re.search(name + r"\[\]\s*=\s*\{(.*?)\};", text, re.S)
        if not m:
            raise SystemExit(f"policy_eval: {name} not found in {path}")
        pairs = re.findall(r"\{\s*(\d+)\s*,\s*Variant::k(\w+)\s*\}", m.group(1))
        out[key] = [(int(n), v.lower()) for n, v in pairs]
    return out


def pick(rules, mode, items):
    table = rules[mode]
    v = table[0][1]
    for n, var in table:
        if items >= n:
            v = var
    return v


def load_points(paths):
    """{(mode, q, H, B): {variant: us}} over the CSVs: rows that ran the requested variant
    (a fallback row measures another variant and is skipped) in gate mode 0 with fp32 state
    (the policy is not keyed by them); a later file overrides."""
    points = {}
    for path in paths:
        for r in csv.DictReader(open(path)):
            if r["variant"] != r["variant_req"]:
                continue
            if r.get("gate", "0") != "0" or r.get("state", "f32") != "f32":
                continue
            key = (r["mode"], int(r["q"]), int(r["H"]), int(r["B"]))
            points.setdefault(key, {})[r["variant"]] = float(r["us"])
    return points


def score(rules, points):
    """One row per point with >= 2 variants: (key, best, pick, pick/best or None if the pick
    was not measured, times)."""
    rows = []
    for key in sorted(points):
        times = points[key]
        if len(times) < 2:
            continue
        mode, q, H, B = key
        best = min(times, key=times.get)
        p = pick(rules, mode, B * H)
        rows.append((key, best, p, times[p] / times[best] if p in times else None, times))
    return rows


def main(paths):
    if not paths:
        print(__doc__)
        return 2
    rows = score(rules_from_header(), load_points(paths))
    print(f"{'mode':9s} {'q':>2s} {'H':>3s} {'B':>4s} {'items':>6s}  {'best':6s} {'pick':6s} {'pick/best':>9s}  times")
    for (mode, q, H, B), best, p, ratio, times in rows:
        detail = " ".join(f"{v}={t:.1f}" for v, t in sorted(times.items()))
        shown = "n/a" if ratio is None else f"{ratio:.3f}"
        print(f"{mode:9s} {q:2d} {H:3d} {B:4d} {B * H:6d}  {best:6s} {p:6s} {shown:>9s}  {detail}")
    scored = [(ratio, key) for key, _, _, ratio, _ in rows if ratio is not None]
    if scored:
        within5 = sum(r <= 1.05 for r, _ in scored)
        worst = max(scored)
        print(f"\npolicy: pick within 5% of the best at {within5}/{len(scored)} points "
              f"({100.0 * within5 / len(scored):.1f}%); worst pick/best {worst[0]:.3f} at {worst[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
