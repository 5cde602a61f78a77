"""The automatic variant policy (include/kda/heuristics.h) against the committed sweeps.

Issue "Performance": on the sweep, the planner's pick is within 5% of the best variant at
>= 95% of the points and within 15% everywhere. The sweeps measured on the H200 live in
docs/data/ (kda_bench CSVs); benchmarks/policy_eval.py parses the rule tables from the C++
header and scores them. This test runs without a GPU: it fails when a threshold is edited
in a way the measurements do not support, or when the scorer stops reading the header.
"""
import os

import pytest

from harness import load_tree_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the sweeps of the kernels in this tree (Split/Wide streamed through shared memory, WS):
# session 11's, and for the verify kinds at q >= 2 session 17's and 26's (Wide against WS in gate
# modes 0 and 2; policy_eval.load_points leaves the earlier q >= 2 verify rows out, and a later
# file's point supersedes an earlier one's)
S26_RUN1 = os.path.join(ROOT, "docs", "data", "ladder_s26", "run1")
S26_WS_WIDE = [os.path.join(S26_RUN1, f"ladder_final_{i}.csv") for i in (4, 5, 6, 7)]
SWEEPS = [os.path.join(ROOT, "docs", "data", f) for f in
          ("sweep_s11_run3_decode.csv", "sweep_s11_run3_verify_q4.csv", "sweep_s11_run3_verify_q.csv",
           os.path.join("ladder_s17", "run3", "ladder_pn_0.csv"))] + S26_WS_WIDE


def _policy_eval():
    return load_tree_script("benchmarks/policy_eval.py")


# Split against the planner's pick at up to 12 items, every verify kind under the planner's gate
# rule (session 20, run 5): these points supersede the earlier sweeps' at the same key
AUTO_GATE_SWEEPS = [os.path.join(ROOT, "docs", "data", "ladder_s20", "run5", f"ladder_s20_{i}.csv")
                    for i in (10, 11, 12, 13)]


# Split against Wide at 12-32 items under the planner's gate rule with the shared gate (session
# 28, run 3: binaries that differ only in the decode / append rule, the kernels of this tree):
# these points supersede the earlier ones at the same key, fp32 and bf16 state
def _s28_rule_sweeps():
    import glob

    return sorted(glob.glob(os.path.join(ROOT, "docs", "data", "ladder_s28", "run3", "ladder_gs*_*.csv")))


# Split with one CTA per SM against Wide at 4-64 items under the planner's gate rule (session 34, runs
# 4 and 5: `main` ran session 33's rule and split, `new` / `s34` this tree's; a later file's point
# supersedes an earlier one's, so the split this tree plans replaces the old split's time at a key)
def _s34_rule_sweeps():
    import glob

    return [p for r in ("run4", "run5")
            for p in sorted(glob.glob(os.path.join(ROOT, "docs", "data", "ladder_s34", r, "ladder_*.csv")))]


# Split against Wide (and WS) for decode and append with the kernels of this tree, under the
# planner's gate rule (session 48: run 1 on the H200 at 12-24,576 items, fp32 and bf16; runs 2 and 3
# on an H100, the same 132 SMs, where Wide holds one to two items per SM, 60-240 items): a later
# file's point supersedes an earlier one's
S48 = os.path.join(ROOT, "docs", "data", "ladder_s48")
S48_RULE_SWEEPS = [os.path.join(S48, "run1", f"ladder_kda_bench_{i}.csv") for i in (13, 11, 12)] + [
    os.path.join(S48, "run2", f"ladder_kda_bench_{i}.csv") for i in (4, 5, 6, 7, 8, 11)] + [
    os.path.join(S48, "run3", f"ladder_kda_bench_{i}.csv") for i in (3, 4, 5)]
# the tables' edges on the H200 (run 5), gate `auto` and gate mode 2
S48_H200_EDGES = [os.path.join(S48, "run5", f"ladder_kda_bench_{i}.csv") for i in (3, 4, 5)]
S48_H200_EDGES_GATE2 = [os.path.join(S48, "run5", f"ladder_kda_bench_{i}.csv") for i in (0, 1, 2, 6)]
# session 49 on the H200 (run 1): fp32 decode at 145-155 items, gate `auto` and gate mode 2
S49 = os.path.join(ROOT, "docs", "data", "ladder_s49")
S49_H200_EDGES = [os.path.join(S49, "run1", "ladder_base_24.csv")]
S49_H200_EDGES_GATE2 = [os.path.join(S49, "run1", "ladder_base_23.csv")]
# the same in gate mode 2 (runs 2 and 3, H100)
S48_GATE2_SWEEPS = [os.path.join(S48, "run2", f"ladder_kda_bench_{i}.csv") for i in (0, 1, 2, 3, 9)] + [
    os.path.join(S48, "run3", f"ladder_kda_bench_{i}.csv") for i in (0, 1, 2, 6)]


def _s48_decode_points(pe):
    if not all(os.path.exists(p) for p in S48_RULE_SWEEPS):
        pytest.skip("the committed sweeps are not in this tree")
    return {k: v for k, v in pe.load_points(S48_RULE_SWEEPS, gate="auto").items()
            if k[0] in ("decode", "decode/bf16", "append")}


def _points(pe):
    if not all(os.path.exists(p) for p in SWEEPS + AUTO_GATE_SWEEPS) or not _s28_rule_sweeps():
        pytest.skip("the committed sweeps are not in this tree")
    points = pe.load_points(SWEEPS)
    points.update(pe.load_points(AUTO_GATE_SWEEPS, gate="auto"))
    points.update(pe.load_points(_s28_rule_sweeps(), gate="auto"))
    for k, v in pe.load_points(_s34_rule_sweeps(), gate="auto").items():
        if k[0] in ("decode", "decode/bf16", "append"):  # (their verify rows are the twins' controls)
            points.setdefault(k, {}).update(v)
    points.update(_s48_decode_points(pe))
    return {k: v for k, v in points.items() if len(v) >= 2}


def test_split_up_to_66_items():
    # the pairs behind the decode / append table's Split up to 66 items (one CTA per SM)
    pe = _policy_eval()
    paths = _s34_rule_sweeps()
    if not paths:
        pytest.skip("the committed sweeps are not in this tree")
    pts = {k: v for k, v in pe.load_points(paths, gate="auto").items()
           if len(v) >= 2 and k[0] in ("decode", "decode/bf16", "append")}
    rows = pe.score(pe.rules_from_header(), pts)
    assert len(rows) >= 20, rows
    for key, best, p, ratio, times in rows:
        assert ratio is not None and ratio <= 1.02, (key, best, p, times)
    assert {p for key, _, p, *_ in rows if 13 <= key[2] * key[3] <= 66} == {"split"}, rows
    # and it can fail: the previous table (Split up to 12 items and at 17-24) loses here
    old = dict(pe.rules_from_header(), kDecodeRules=[(0, "split"), (13, "wide"), (17, "split"), (25, "wide")],
               kAppendRules=[(0, "split"), (13, "wide"), (17, "split"), (25, "wide")])
    assert max(r for *_, r, _ in pe.score(old, pts) if r is not None) > 1.05


def test_split_2_where_wide_is_unbalanced():
    # kDecodeRules' Split 2 at 144-198 items (Wide would put two items on some SMs; Split 2's
    # halves at most three per SM) and kDecodeBf16Rules' Split up to 132 (one wave of its two-CTA
    # form): within 5% of the better variant at every point from 60 to 240 items, gate modes 0
    # (under the planner's gate rule) and 2, on the H100 (session 48 runs 2, 3) and the H200
    # (session 48 run 5, session 49 run 1)
    pe = _policy_eval()
    h200, h200_2 = S48_H200_EDGES + S49_H200_EDGES, S48_H200_EDGES_GATE2 + S49_H200_EDGES_GATE2
    paths = S48_RULE_SWEEPS + S48_GATE2_SWEEPS + h200 + h200_2
    if not all(os.path.exists(p) for p in paths):
        pytest.skip("the committed sweeps are not in this tree")
    sets = [(pe.load_points(S48_RULE_SWEEPS[3:], gate="auto"), "0"), (pe.load_points(S48_GATE2_SWEEPS, gate="2"), "2"),
            (pe.load_points(h200, gate="auto"), "0"), (pe.load_points(h200_2, gate="2"), "2")]
    # and it can fail: Wide from 67 items (the tables before) loses by more than 5% on each card
    old = dict(pe.rules_from_header(), kDecodeRules=[(0, "split"), (67, "wide")],
               kDecodeBf16Rules=[(0, "split"), (67, "wide")])
    n, worst_old = 0, {}
    for i, (pts, gate) in enumerate(sets):
        pts = {k: v for k, v in pts.items() if k[0] in ("decode", "decode/bf16") and len(v) >= 2}
        for (mode, q, H, B), best, p, ratio, times in pe.score(pe.rules_from_header(), pts, gate=gate):
            assert ratio is not None and ratio <= 1.05, ((mode, q, H, B), gate, best, p, times)
            n += 1
        card = "H100" if i < 2 else "H200"
        worst = max(r for *_, r, _ in pe.score(old, pts, gate=gate) if r is not None)
        worst_old[card] = max(worst_old.get(card, 0.0), worst)
    assert n >= 65, n
    assert min(worst_old.values()) > 1.05, worst_old
    # and the H200's edge: at 145-155 items the pick is the better variant within 1% (Split), where
    # Split from 156 (the edge before) gives away more than 3%
    pts = {k: v for k, v in pe.load_points(S49_H200_EDGES, gate="auto").items() if k[0] == "decode"}
    assert len(pts) == 5 and all(r <= 1.01 for *_, r, _ in pe.score(pe.rules_from_header(), pts, gate="0")), pts
    later = dict(pe.rules_from_header(), kDecodeRules=[(0, "split"), (67, "wide"), (156, "split"), (199, "wide")])
    assert max(r for *_, r, _ in pe.score(later, pts, gate="0") if r is not None) > 1.03


def test_small_verify_grids_run_split():
    # the pairs behind the tables' first rule (Split up to 12 items) for the verify kinds, session
    # 20's points, scored with gate mode 0's pick (the tables' own)
    pe = _policy_eval()
    if not all(os.path.exists(p) for p in AUTO_GATE_SWEEPS):
        pytest.skip("the committed sweeps are not in this tree")
    rows = pe.score(pe.rules_from_header(), pe.load_points(AUTO_GATE_SWEEPS, gate="auto"))
    assert len(rows) >= 30, rows
    for key, best, p, ratio, times in rows:
        assert p == "split" and ratio is not None and ratio <= 1.05, (key, best, p, times)


# Split against Wide at up to 12 items for every verify kind under the planner's gate rule (mode 1
# at q >= 2), with the kernels of this tree on the H200 (session 48, run 1; session 49, run 1: q = 4-7)
S48_SMALL_VERIFY = [os.path.join(ROOT, "docs", "data", "ladder_s48", "run1", f"ladder_kda_bench_{i}.csv")
                    for i in (8, 9)] + [os.path.join(S49, "run1", f"ladder_base_{i}.csv") for i in (20, 21)]


def test_small_verify_grids_without_fb_run_wide():
    # kVerifyQ2RulesWithoutFb, kRecordQ4RulesWithoutFb: record and fused at q = 2, 3 and record at
    # q = 4 run Wide where the step has no F_B path; every other kind and q keeps Split up to 12 items
    pe = _policy_eval()
    if not all(os.path.exists(p) for p in S48_SMALL_VERIFY):
        pytest.skip("the committed sweeps are not in this tree")
    plans = {}
    pts = pe.load_points(S48_SMALL_VERIFY, gate="auto", plans=plans)
    rows = [r for r in pe.score(pe.rules_from_header(), pts, gate="auto", plans=plans)
            if r[0][0] in ("record", "fused", "per_token") and r[0][2] * r[0][3] <= 12]
    assert len(rows) >= 60, rows
    for (mode, q, H, B), best, p, ratio, times in rows:
        assert ratio is not None and ratio <= 1.07, ((mode, q, H, B), best, p, times)
        if q >= 2:
            assert plans[(mode, q, H, B)] == "1", "the gate rule takes mode 1 for verify at q >= 2"
        wide = (mode in ("record", "fused") and q in (2, 3)) or (mode == "record" and q == 4)
        assert p == ("wide" if wide else "split"), ((mode, q, H, B), p, times)
    within5 = sum(r <= 1.05 for *_, r, _ in rows)
    assert within5 >= 0.9 * len(rows), sorted(r for *_, r, _ in rows)[-5:]
    # and it can fail: Split for them, as the tables say, loses by more than 15% (record q = 2),
    # and by more than 3% for record at q = 4 alone
    old = dict(pe.rules_from_header(), kVerifyQ2RulesWithoutFb=[(0, "split"), (13, "wide")])
    assert max(r for *_, r, _ in pe.score(old, pts, gate="auto", plans=plans) if r is not None) > 1.15
    old = dict(pe.rules_from_header(), kRecordQ4RulesWithoutFb=[(0, "split"), (13, "wide")])
    assert max(r for *_, r, _ in pe.score(old, pts, gate="auto", plans=plans) if r is not None) > 1.03


def test_rule_tables_parse_and_are_sorted():
    rules = _policy_eval().rules_from_header()
    assert set(rules) == set(_policy_eval().TABLES)
    for name, table in rules.items():
        assert table and table[0][0] == 0, f"{name}: the first rule must start at 0 items"
        assert [n for n, _ in table] == sorted(n for n, _ in table), f"{name}: rules out of order"
        assert all(v in ("wide", "ws", "split") for _, v in table), table


def test_pick_within_5_percent_at_95_percent_of_points_and_15_everywhere():
    pe = _policy_eval()
    pts = _points(pe)
    assert len(pts) >= 80, f"expected the committed sweep points, found {len(pts)}"
    rows = pe.score(pe.rules_from_header(), pts)
    for key, _, p, ratio, times in rows:
        assert ratio is not None, f"pick {p} at {key} was not measured: {times}"
    ratios = [(ratio, key) for key, _, _, ratio, _ in rows]
    within5 = sum(r <= 1.05 for r, _ in ratios)
    assert within5 >= 0.95 * len(ratios), sorted(ratios)[-5:]
    worst = max(ratios)
    assert worst[0] <= 1.15, f"pick/best {worst[0]:.3f} at {worst[1]}"


def test_precomputed_gate_runs_wide_where_mode_0_runs_ws():
    # gate mode 2 (vLLM's inputs): Wide beat WS at every verify point of session 26's run 1, so
    # auto_variant_without_fb takes Wide for WS; scored with the mode-0 pick, WS loses up to 2x
    pe = _policy_eval()
    if not all(os.path.exists(p) for p in S26_WS_WIDE):
        pytest.skip("the committed sweeps are not in this tree")
    pts = pe.load_points(S26_WS_WIDE, gate="2")
    assert len(pts) == 36, sorted(pts)
    rows = pe.score(pe.rules_from_header(), pts, gate="2")
    for key, best, p, ratio, times in rows:
        assert p != "ws" and ratio is not None and ratio <= 1.05, (key, best, p, times)
    as_mode0 = [ratio for *_, ratio, _ in pe.score(pe.rules_from_header(), pts, gate="0") if ratio is not None]
    assert max(as_mode0) > 1.5, "the mode-0 pick (WS) must lose somewhere, or the test cannot fail"


def test_scorer_catches_a_bad_table():
    # the criterion must be able to fail: always Wide loses > 15% in the verify steps
    pe = _policy_eval()
    bad = {name: [(0, "wide")] for name in pe.TABLES}
    worst = max(ratio for _, _, _, ratio, _ in pe.score(bad, _points(pe)) if ratio is not None)
    assert worst > 1.15


# decode with bf16 state, Wide against Split at 4-3072 items with small grids spread over the
# SMs (session 15, H200, run 4): the decode table holds for bf16 state too
BF16_SWEEPS = [os.path.join(ROOT, "docs", "data", "ladder_s15", "run4")]


def _bf16_points(pe):
    import glob

    paths = [p for d in BF16_SWEEPS for p in sorted(glob.glob(os.path.join(d, "ladder_sp3_*.csv")))]
    if not paths:
        pytest.skip("the committed bf16 decode sweeps are not in this tree")
    pts = {k: v for k, v in pe.load_points(paths).items() if k[0] == "decode/bf16" and len(v) >= 2}
    pts.update({k: v for k, v in pe.load_points(_s28_rule_sweeps(), gate="auto").items()
                if k[0] == "decode/bf16" and len(v) >= 2})
    for k, v in pe.load_points(_s34_rule_sweeps(), gate="auto").items():
        if k[0] == "decode/bf16":
            pts.setdefault(k, {}).update(v)
    pts.update({k: v for k, v in _s48_decode_points(pe).items() if k[0] == "decode/bf16"})
    return {k: v for k, v in pts.items() if len(v) >= 2}


def test_bf16_decode_rule_within_5_percent_everywhere():
    pe = _policy_eval()
    pts = _bf16_points(pe)
    assert len(pts) >= 24, f"expected the committed bf16 comparisons, found {len(pts)}"
    rows = pe.score(pe.rules_from_header(), pts)
    worst = max(rows, key=lambda row: row[3])
    assert worst[3] <= 1.05, f"pick/best {worst[3]:.3f} at {worst[0]}: {worst[4]}"
    # and it can fail: session 14's bf16 rule (Split from 96 to 383 items, measured without the
    # spread) loses > 15% here
    old = dict(pe.rules_from_header(), kDecodeBf16Rules=[(0, "split"), (13, "wide"), (96, "split"), (384, "wide")])
    assert max(r for *_, r, _ in pe.score(old, pts)) > 1.15


# the same-binary comparisons of gate mode 0 against mode 1 on the gate mode 1 of this tree
# (session 19: the late wait and the gate kernel's row tiles): run 2, the decode grid (H = 12 …
# 96, B = 1 … 256); run 3, decode at B = 2 / 4 / 16, bf16 decode, append, record / fused at
# q = 2 / 4 / 8 and per_token at q = 4 / 8 (H = 12 and 96, one to 64 requests). The earlier
# sessions' pairs (ladder_s13 … ladder_s17) measured an earlier mode 1 and are left out by
# policy_eval.current_gate_points; their folders stay listed so the scorer is run on them too.
GATE_RUNS = [os.path.join(ROOT, "docs", "data", "ladder_s13", r) for r in ("run3", "run4", "run5")] + [
    os.path.join(ROOT, "docs", "data", "ladder_s14", r) for r in ("run4", "run7")] + [
    os.path.join(ROOT, "docs", "data", "ladder_s15", "run5"),
    os.path.join(ROOT, "docs", "data", "ladder_s16", "run7"),
    os.path.join(ROOT, "docs", "data", "ladder_s17", "run3")] + [
    os.path.join(ROOT, "docs", "data", "ladder_s19", r) for r in ("run2", "run3")] + [
    os.path.join(ROOT, "docs", "data", "ladder_s25", "run2")]


def _gate_points(pe):
    import glob

    paths = [p for d in GATE_RUNS for p in sorted(glob.glob(os.path.join(d, "ladder_*.csv")))]
    if not paths:
        pytest.skip("the committed gate-mode runs are not in this tree")
    # grids of at most three CTAs per SM are spread over the SMs since session 15: the pairs
    # measured before no longer describe the product there (policy_eval.current_gate_points)
    return pe.current_gate_points(pe.load_gate_points(paths))


def test_gate_rule_parses():
    rule = _policy_eval().gate_rule_from_header()
    assert set(rule) == set(_policy_eval().GATE_MODES) | {"q1_verify", "q16_verify", "decode_bf16", "per_token_min_q"}
    assert all(n >= 1 for n in rule.values()), rule


def test_gate_rule_within_5_percent_at_95_percent_of_points_and_10_everywhere():
    # heuristics::auto_shared_gate against the measurements it was set from: decode, append,
    # the verify kinds at q in {1, 2, 4, 8, 16}, fp32 and bf16 state
    pe = _policy_eval()
    pts = _gate_points(pe)
    assert len(pts) >= 80, f"expected the committed gate comparisons, found {len(pts)}"
    rows = pe.score_gate(pe.gate_rule_from_header(), pts)
    within5 = sum(r <= 1.05 for *_, r in rows)
    assert within5 >= 0.95 * len(rows), sorted(rows, key=lambda row: row[3])[-5:]
    worst = max(rows, key=lambda row: row[3])
    assert worst[3] <= 1.10, f"pick/best {worst[3]:.3f} at {worst[0]}"


def test_gate_points_take_auto_rows_by_their_plans_mode(tmp_path):
    # a --gate auto row counts as the mode its plan ran (gate_plan) where that mode was not forced;
    # a forced row of the same point and mode keeps its own time
    pe = _policy_eval()
    head = "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,vs_peer,gate_plan"
    run = tmp_path / "ladder_s25" / "run9"
    run.mkdir(parents=True)
    (run / "ladder_x_0.csv").write_text(head + "\n"
                                        "per_token,2,96,8,wide,wide,1,f32,1,sd,0,50.0,1,0,0,0,0,0,1\n"
                                        "per_token,3,96,8,wide,wide,1,f32,1,sd,0,70.0,1,0,0,0,0,0,1\n")
    (run / "ladder_x_1.csv").write_text(head + "\n"
                                        "per_token,2,96,8,auto,ws,1,f32,auto,sd,0,60.0,1,0,0,0,0,0,0\n"
                                        "per_token,3,96,8,auto,wide,1,f32,auto,sd,0,71.0,1,0,0,0,0,0,1\n"
                                        "per_token,3,96,8,ws,ws,1,f32,0,sd,0,80.0,1,0,0,0,0,0,0\n")
    pts = pe.load_gate_points(sorted(str(p) for p in run.glob("ladder_*.csv")))
    assert pts == {("per_token", 2, 96, 8, "f32", "x", "ladder_s25/run9"): {"1": 50.0, "0": 60.0},
                   ("per_token", 3, 96, 8, "f32", "x", "ladder_s25/run9"): {"1": 70.0, "0": 80.0}}


def test_gate_scorer_catches_a_bad_rule():
    # mode 1 everywhere loses 1.10-1.16x at one to four requests of decode (the gate kernel's
    # latency, which a grid of under a few hundred items does not hide), and mode 0 for the
    # verify kinds loses up to 1.66x: both must fail
    pe = _policy_eval()
    pts = _gate_points(pe)
    always = {k: 1 for k in pe.gate_rule_from_header()}
    assert max(r for *_, r in pe.score_gate(always, pts)) > 1.10
    never = dict(pe.gate_rule_from_header(), per_token=1 << 40, record=1 << 40, fused=1 << 40, q16_verify=1 << 40)
    assert max(r for *_, r in pe.score_gate(never, pts)) > 1.5


def test_auto_gate_pick_is_the_plans_gate_mode(tmp_path):
    # under the planner's gate rule a verify step at q >= 2 takes gate mode 1, whose plan runs Wide
    # where the table says WS (auto_variant_without_fb): the scorer must pick what the `auto` row's
    # plan ran (its gate_plan), not the table's WS. Record q = 2 at 768 items: WS is the table's pick.
    pe = _policy_eval()
    head = "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,vs_peer,gate_plan"
    rows = ["record,2,96,8,ws,ws,1,f32,auto,sd,0,51.5,1,1,1,1,0,0,0",
            "record,2,96,8,wide,wide,1,f32,auto,sd,0,29.8,1,1,1,1,0,0,1",
            "record,2,96,8,auto,wide,1,f32,auto,sd,0,29.7,1,1,1,1,0,0,1"]
    path = tmp_path / "ladder_s47_policy.csv"
    path.write_text("\n".join([head] + rows) + "\n")
    plans = {}
    pts = pe.load_points([str(path)], gate="auto", plans=plans)
    assert plans == {("record", 2, 96, 8): "1"}
    [(key, best, p, ratio, times)] = pe.score(pe.rules_from_header(), pts, gate="auto", plans=plans)
    assert (best, p, ratio) == ("wide", "wide", 1.0), (key, times)
    # and it can fail: without the plan's gate mode the table's WS is scored and loses
    [(_, _, p0, ratio0, _)] = pe.score(pe.rules_from_header(), pts, gate="auto")
    assert p0 == "ws" and ratio0 > 1.5
