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

    python3 benchmarks/policy_eval.py --auto-gate docs/data/ladder_s20/run5/ladder_s20_1[0-3].csv

scores the variants measured under the planner's gate rule (`--gate auto`): a forced variant
against the `auto` rows, which count as the variant the plan ran.

    python3 benchmarks/policy_eval.py --gate-2 docs/data/ladder_s26/run1/ladder_final_*.csv

scores the forced variants of runs with the gate precomputed (`--gate 2`), where the pick is
auto_variant_without_fb's (Wide for WS; record and fused at q = 2, 3 by their own table).

    python3 benchmarks/policy_eval.py --gate docs/data/ladder_s13/run3/*.csv ...

scores the gate rule instead (auto_shared_gate: mode 1 or mode 0 under `gate auto`) against
runs that measured both modes with one binary: per point (mode, q, H, B, state, binary,
session/run folder) the time of `--gate 0` and of `--gate 1`. Pairs at grids that session 15
began to spread over the SMs (up to three CTAs per SM) are left out for the runs before it.
"""
import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


TABLES = ("kDecodeRules", "kDecodeBf16Rules", "kAppendRules", "kPerTokenQ1Rules", "kPerTokenRules",
          "kVerifyQ1Rules", "kVerifyQ2Rules", "kVerifyQ4Rules", "kVerifyQ2RulesWithoutFb", "kRecordQ4RulesWithoutFb")


def rules_from_header(path=os.path.join(ROOT, "include", "kda", "heuristics.h")):
    """{'kDecodeRules': [(min_items, 'wide'), ...], ...}: the C++ rule tables (auto_variant in
    include/kda/heuristics.h says which table serves which step kind and q)."""
    text = open(path).read()
    out = {}
    for name in TABLES:
        key = name
        m = re.search(name + r"\[\]\s*=\s*\{(.*?)\};", text, re.S)
        if not m:
            raise SystemExit(f"policy_eval: {name} not found in {path}")
        pairs = re.findall(r"\{\s*(\d+)\s*,\s*Variant::k(\w+)\s*\}", m.group(1))
        out[key] = [(int(n), v.lower()) for n, v in pairs]
    return out


def table_of(mode, q):
    """The table auto_variant reads for a step kind and q."""
    if mode == "decode/bf16":
        return "kDecodeBf16Rules"
    if mode == "decode":
        return "kDecodeRules"
    if mode == "append":
        return "kAppendRules"
    if mode == "per_token":
        return "kPerTokenQ1Rules" if q == 1 else "kPerTokenRules"
    return "kVerifyQ1Rules" if q == 1 else "kVerifyQ4Rules" if q >= 4 else "kVerifyQ2Rules"


def pick(rules, mode, items, q=1, gate="0"):
    """auto_variant's pick; without the F_B path in the step (gate modes 1 and 2)
    auto_variant_without_fb's: record and fused at q = 2, 3 by kVerifyQ2RulesWithoutFb, record at
    q = 4 by kRecordQ4RulesWithoutFb, else Wide where the table says WS."""
    without_fb = gate in ("1", "2")
    name = table_of(mode, q)
    if without_fb and mode in ("record", "fused") and q in (2, 3):
        name = "kVerifyQ2RulesWithoutFb"
    elif without_fb and mode == "record" and q == 4:
        name = "kRecordQ4RulesWithoutFb"
    table = rules[name]
    v = table[0][1]
    for n, var in table:
        if items >= n:
            v = var
    return "wide" if v == "ws" and without_fb else v


def load_points(paths, gate="0", plans=None):
    """{(mode, q, H, B): {variant: us}} over the CSVs: rows that ran the requested variant
    (a fallback row measures another variant and is skipped) in gate mode `gate` with fp32
    state, and decode with bf16 state as mode "decode/bf16" (its own table); a later file
    overrides. gate="auto": runs under the planner's gate rule (a forced variant against the
    `auto` rows, which count as the variant they ran); `plans`, a dict, then receives per point
    the gate mode the `auto` row's plan took (its CSV column gate_plan), which decides the pick
    (score). The verify kinds at q >= 2 count only from runs of the q >= 2 Split/Wide kernel in
    this tree (VERIFY_KERNEL_SESSION on), bf16 decode on Split 2 only from its one-chunk form
    (BF16_SPLIT2_SESSION on)."""
    points = {}
    for path in paths:
        m = re.search(r"(?:sweep|ladder)_s(\d+)", path)
        current = m is not None and int(m.group(1)) >= VERIFY_KERNEL_SESSION
        bf16_split2_current = m is not None and int(m.group(1)) >= BF16_SPLIT2_SESSION
        for r in csv.DictReader(open(path)):
            if r["variant"] != r["variant_req"] and not (gate == "auto" and r["variant_req"] == "auto"):
                continue
            if r["mode"] in ("record", "fused", "per_token") and int(r["q"]) >= 2 and not current:
                continue
            state = r.get("state", "f32")
            if r.get("gate", "0") != gate or (state != "f32" and r["mode"] != "decode"):
                continue
            mode = r["mode"] + ("/bf16" if state == "bf16" else "")
            items = int(r["H"]) * int(r["B"])
            if mode == "decode/bf16" and r["variant"] == "split" and 25 <= items <= 132 and not bf16_split2_current:
                continue
            key = (mode, int(r["q"]), int(r["H"]), int(r["B"]))
            points.setdefault(key, {})[r["variant"]] = float(r["us"])
            if plans is not None and gate == "auto" and r["variant_req"] == "auto" and r.get("gate_plan"):
                plans[key] = r["gate_plan"]
    return points


def score(rules, points, gate="0", plans=None):
    """One row per point with >= 2 variants: (key, best, pick, pick/best or None if the pick
    was not measured, times); `gate`: the gate mode the points ran (pick); `plans`: per point
    the gate mode the planner took under gate="auto" (load_points), so that a table's WS counts
    as the Wide the plan runs where that is gate mode 1 (auto_variant_without_fb)."""
    rows = []
    for key in sorted(points):
        times = points[key]
        if len(times) < 2:
            continue
        mode, q, H, B = key
        best = min(times, key=times.get)
        p = pick(rules, mode, B * H, q, (plans or {}).get(key, gate))
        rows.append((key, best, p, times[p] / times[best] if p in times else None, times))
    return rows


GATE_MODES = ("decode", "per_token", "record", "fused", "append")  # StepMode order


def gate_rule_from_header(path=os.path.join(ROOT, "include", "kda", "heuristics.h")):
    """{'decode': min, ..., 'q1_verify': min, 'q16_verify': min, 'decode_bf16': min}:
    kSharedGateMinItems (in StepMode order), kSharedGateMinItemsQ1Verify,
    kSharedGateMinItemsQ16Verify and kSharedGateMinItemsBf16Decode of
    include/kda/heuristics.h."""
    text = open(path).read()
    m = re.search(r"kSharedGateMinItems\[\]\s*=\s*\{(.*?)\};", text, re.S)
    m1 = re.search(r"kSharedGateMinItemsQ1Verify\s*=\s*(\d+)", text)
    m16 = re.search(r"kSharedGateMinItemsQ16Verify\s*=\s*(\d+)", text)
    mq = re.search(r"kSharedGateMinQPerToken\s*=\s*(\d+)", text)
    mb = re.search(r"kSharedGateMinItemsBf16Decode\s*=\s*(\d+)", text)
    if not m or not m1 or not m16 or not mb or not mq:
        raise SystemExit(f"policy_eval: the gate thresholds are not found in {path}")
    nums = [int(n) for n in re.findall(r"(?<![\w/])(\d+)(?![\w*])", re.sub(r"/\*.*?\*/", "", m.group(1)))]
    if len(nums) != len(GATE_MODES):
        raise SystemExit(f"policy_eval: kSharedGateMinItems has {len(nums)} entries, expected {len(GATE_MODES)}")
    out = dict(zip(GATE_MODES, nums))
    out["q1_verify"] = int(m1.group(1))
    out["q16_verify"] = int(m16.group(1))
    out["decode_bf16"] = int(mb.group(1))
    out["per_token_min_q"] = int(mq.group(1))
    return out


def shared_gate(rule, mode, items, q, state="f32", max_q=16):
    """auto_shared_gate of include/kda/heuristics.h."""
    m = rule[mode]
    if mode == "decode":
        return items >= (rule["decode_bf16"] if state == "bf16" else m)
    if mode == "append":
        return items >= m
    if mode == "per_token":
        return q >= rule["per_token_min_q"] and items >= (rule["q16_verify"] if q == max_q else m)
    return items >= (rule["q1_verify"] if q == 1 else rule["q16_verify"] if q == max_q else m)


def load_gate_points(paths):
    """{(mode, q, H, B, state, binary, "session/run"): {'0': us, '1': us}}: kda_bench CSVs of the
    ladder (ladder_<binary>_<i>.csv) with --gate 0 and --gate 1 (a row of --gate auto counts as
    the mode its plan ran, gate_plan, where that mode was not forced); append keyed by Qr too. Where
    a run forced several variants, the pair takes the one `auto` runs in that mode (mode 0:
    auto_variant; mode 1: Wide for WS)."""
    points = {}
    rules = rules_from_header()
    for path in paths:
        binary = os.path.basename(path)[len("ladder_"):].rsplit("_", 1)[0]
        for r in csv.DictReader(open(path)):
            gate = r.get("gate")
            forced = gate in ("0", "1")
            if gate == "auto" and r.get("gate_plan") in ("0", "1"):
                gate = r["gate_plan"]  # the planner's pick, by the mode it ran
            elif not forced:
                continue
            if r.get("variant_req", "auto") != "auto" and r["mode"] != "append":
                want = pick(rules, r["mode"], int(r["H"]) * int(r["B"]), int(r["q"]), gate)
                if r["variant"] != want:
                    continue
            mode = r["mode"] + (f"/{r['qr']}" if r["mode"] == "append" else "")
            run = os.path.dirname(os.path.abspath(path))
            key = (mode, int(r["q"]), int(r["H"]), int(r["B"]), r.get("state", "f32"), binary,
                   os.path.basename(os.path.dirname(run)) + "/" + os.path.basename(run))
            # a forced mode's time stands; a run under `auto` only fills a mode not forced
            if forced or gate not in points.get(key, {}):
                points.setdefault(key, {})[gate] = float(r["us"])
    return {k: v for k, v in points.items() if len(v) == 2}


SPREAD_SESSION = 15  # the session whose runs first spread small grids over the SMs
# the session of the q >= 2 Split/Wide kernel in this tree: token groups (session 16) with the
# token norms formed once per token and the out gate read in the epilogue (17)
VERIFY_KERNEL_SESSION = 17
# bf16 decode on Split 2 (25-132 items) runs a form with its 64 rows as one chunk at two CTAs per
# SM since session 47 (nc2b); earlier runs' Split rows there measured the four-CTA form
BF16_SPLIT2_SESSION = 47
# the session whose gate mode 1 the tree runs: the step overlaps the gate kernel up to its
# logits (the late wait) and the gate kernel's CTAs take 16-64 rows (19); every earlier mode 1
# time is slower by up to 25% at small grids
GATE_KERNEL_SESSION = 19
# per_token with q = 2, 3: the Wide kernel's first waves (sessions 23, 24) and its out-gate
# prefetch (25) made mode 1 on Wide faster than WS in mode 0, which won before (ladder_s17/run3)
PER_TOKEN_LOW_Q_SESSION = 25
H200_SMS = 132


def spread_items(path=os.path.join(ROOT, "include", "kda", "heuristics.h"), sms=H200_SMS):
    """Grids of at most this many items are spread over the SMs (kStepSpreadCtasPerSm · SMs)."""
    m = re.search(r"#define KDA_STEP_SPREAD_CTAS_PER_SM (\d+)", open(path).read())
    if not m:
        raise SystemExit(f"policy_eval: KDA_STEP_SPREAD_CTAS_PER_SM not found in {path}")
    return int(m.group(1)) * sms


def current_gate_points(points):
    """The pairs that still describe the product: runs before session 15 measured grids of up
    to three CTAs per SM without the spread, which moved them by up to 40%, so those pairs are
    left out (session 15's runs measure them); and the verify kinds with q >= 2 before session
    17 ran an earlier q >= 2 Split/Wide kernel (session 17's: record q = 4 8%, q = 8 12% faster at
    H = 96, B = 256), so their pairs are left out too; and since session 19 gate mode 1 overlaps
    the step with the gate kernel (3-25% faster at 12-3072 items), so every pair before it is
    left out; and per_token with q = 2, 3 before session 25 ran a Wide kernel without its first
    waves and out-gate prefetch."""
    limit = spread_items()

    def session(run):
        m = re.match(r"ladder_s(\d+)", run)
        return int(m.group(1)) if m else 0

    def stale(k):
        before = session(k[6])
        verify_qn = k[0] in ("record", "fused", "per_token") and k[1] >= 2
        return (
            (before < SPREAD_SESSION and k[2] * k[3] <= limit)
            or (before < VERIFY_KERNEL_SESSION and verify_qn)
            or before < GATE_KERNEL_SESSION
            or (before < PER_TOKEN_LOW_Q_SESSION and k[0] == "per_token" and 2 <= k[1] <= 3)
        )

    return {k: v for k, v in points.items() if not stale(k)}


def score_gate(rule, points):
    """One row per point: (key, best mode, picked mode, pick/best)."""
    rows = []
    for key in sorted(points):
        times = points[key]
        mode, q, H, B, state = key[0].split("/")[0], key[1], key[2], key[3], key[4]
        p = "1" if shared_gate(rule, mode, B * H, q, state) else "0"
        best = min(times, key=times.get)
        rows.append((key, best, p, times[p] / times[best]))
    return rows


def main_gate(paths):
    rows = score_gate(gate_rule_from_header(), current_gate_points(load_gate_points(paths)))
    for key, best, p, ratio in rows:
        print(f"{' '.join(str(k) for k in key):48s} best mode {best}  pick mode {p}  pick/best {ratio:.3f}")
    if rows:
        within5 = sum(r <= 1.05 for *_, r in rows)
        worst = max(rows, key=lambda row: row[3])
        print(f"\ngate rule: pick within 5% of the best at {within5}/{len(rows)} points "
              f"({100.0 * within5 / len(rows):.1f}%); worst pick/best {worst[3]:.3f} at {worst[0]}")
    return 0


def main(paths):
    if paths and paths[0] == "--gate":
        return main_gate(paths[1:])
    gate = "0"
    if paths and paths[0] == "--auto-gate":  # runs under the planner's gate rule (load_points)
        gate, paths = "auto", paths[1:]
    elif paths and paths[0] == "--gate-2":  # forced variants with the gate precomputed
        gate, paths = "2", paths[1:]
    if not paths:
        print(__doc__)
        return 2
    plans = {}
    rows = score(rules_from_header(), load_points(paths, gate, plans), gate, plans)
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
