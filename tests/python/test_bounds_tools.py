"""benchmarks/ladder/decode_table.py (the decode table of docs/PERFORMANCE.md) and
benchmarks/ladder/bounds_verdict.py (each target against its rows_prepared bound) on synthetic
kda_bench CSVs and rows_prepared tables."""

from harness import load_tree_script

HEAD = (
    "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,vs_peer,"
    "gate_plan"
)


def _csv(tmp_path, name, rows):
    """rows: (mode, state, gate, H, B, qr, us, floor_us, peer_us, variant, split, gate_plan)"""
    p = tmp_path / name
    lines = [HEAD]
    for mode, state, gate, H, B, qr, us, fl, peer, variant, split, gp in rows:
        lines.append(f"{mode},1,{H},{B},auto,{variant},{split},{state},{gate},sd,{qr},{us},{fl},0,0,0,{peer},0,{gp}")
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_decode_table_medians_plans_and_missing_mode2(tmp_path, capsys):
    tool = load_tree_script("benchmarks/ladder/decode_table.py")
    a0 = _csv(
        tmp_path,
        "a0.csv",
        [
            ("decode", "f32", "auto", 12, 1, 0, 4.0, 0.5, 8.0, "split", 8, 0),
            ("decode", "f32", "auto", 96, 256, 0, 860.0, 800.0, 900.0, "wide", 1, 1),
            ("decode", "bf16", "auto", 96, 256, 0, 1.0, 1.0, 900.0, "wide", 1, 1),
        ],
    )
    a1 = _csv(
        tmp_path,
        "a1.csv",
        [
            ("decode", "f32", "auto", 12, 1, 0, 4.4, 0.5, 8.0, "split", 8, 0),
            ("decode", "f32", "auto", 96, 256, 0, 870.0, 800.0, 900.0, "wide", 1, 1),
        ],
    )
    m0 = _csv(tmp_path, "m0.csv", [("decode", "f32", "2", 96, 256, 0, 855.0, 798.0, 900.0, "wide", 1, 2)])
    tool.main(["--auto", a0, a1, "--mode2", m0, "--H", "12,96", "--B", "1,256"])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4  # header, rule, two points (the bf16 row and the missing points left out)
    assert out[2] == "| 12 | 1 | 0.5 | 4.20 (split/8) | 8.400 | 0.525 | — | — | — | 8.00 |"
    assert out[3] == "| 96 | 256 | 800.0 | 865.00 (wide+g1) | 1.081 | 0.961 | 855.00 | 1.071 | 0.950 | 900.00 |"


def _rows_prepared(tmp_path, name, H, B, lines):
    p = tmp_path / name
    p.write_text(
        f"# rows_prepared: H = {H}, B = {B}, 4 steps per graph, pool 9 slots (0.1 GB)\n" + "\n".join(lines) + "\n"
    )


def test_bounds_verdict_targets_and_failed_checks(tmp_path, capsys):
    tool = load_tree_script("benchmarks/ladder/bounds_verdict.py")
    # append at 24,576 items: arows/8 fails its check, so arows4/8 is the bound
    _rows_prepared(
        tmp_path,
        "ladder_rows_prepared_0.txt",
        96,
        256,
        [
            "# check arows/8, 8 pending (64 items): state ... -> FAIL",
            "# check arows4/8, 8 pending (64 items): state ... -> PASS",
            "rung        us/step     floor us        x     %ceil x step floor",
            "arows/8      500.00       490.00    1.020     90.0%        0.980",
            "arows4/8     570.00       490.00    1.163     88.0%        1.113",
            "amove/8      480.00       470.00    1.021     95.0%        0.940",
            "rows16       470.00       400.00    1.175     85.0%        1.130",
            "rows16io     505.00       430.00    1.174     85.1%        1.214",
            "rows16io/4   500.00       430.00    1.163     86.0%        1.202",
            "rows/1       824.00       777.00    1.061     94.2%        1.034",
            "rows-/8      700.00       777.00    0.900     99.0%        0.900",
            "rowsio       850.00       798.00    1.065     93.9%        1.065",
            "rowsio/1     845.00       798.00    1.059     94.4%        1.059",
        ],
    )
    # fused at six requests: the fastest checked form
    _rows_prepared(
        tmp_path,
        "ladder_rows_prepared_1.txt",
        96,
        6,
        [
            "rung         us/step     floor us        x     %ceil x step floor",
            "frows5/q4      30.10        20.00    1.505     66.4%        1.349",
            "frows2/q4      34.00        20.00    1.700     60.0%        1.500",
            "fmove/q4       25.00        20.00    1.250     80.0%        1.121",
        ],
    )
    # decode at 768 items: every step rung above 0.90 x vLLM
    _rows_prepared(
        tmp_path,
        "ladder_rows_prepared_2.txt",
        96,
        8,
        [
            "rung   us/step     floor us        x     %ceil x step floor",
            "rows     32.00        25.00    1.280     78.0%        1.240",
            "rowsa/4  31.60        25.00    1.264     79.0%        1.225",
            "move/8   26.50        25.00    1.060     94.0%        1.030",
            "moveio   28.00        25.80    1.085     92.0%        1.085",
        ],
    )
    # decode at 1536 items: `rows` within reach, `rowsio` (the step's own bytes) not
    _rows_prepared(
        tmp_path,
        "ladder_rows_prepared_3.txt",
        12,
        128,
        [
            "rung   us/step     floor us        x     %ceil x step floor",
            "rows     55.90        48.70    1.148     87.1%        1.117",
            "rowsio   57.10        50.04    1.141     87.6%        1.141",
        ],
    )
    _csv(
        tmp_path,
        "ladder_kda_bench_0.csv",
        [
            ("decode", "f32", "auto", 96, 256, 0, 860.0, 800.0, 900.0, "wide", 1, 1),
            ("decode", "f32", "2", 96, 256, 0, 855.0, 798.0, 900.0, "wide", 1, 2),
            ("decode", "f32", "2", 96, 8, 0, 31.6, 25.0, 34.94, "wide", 1, 2),
            ("decode", "f32", "2", 12, 128, 0, 58.35, 50.04, 62.59, "wide", 1, 2),
        ],
    )
    rc = tool.main(str(tmp_path))
    out = capsys.readouterr().out
    assert rc == 1 and "CHECK FAILED ladder_rows_prepared_0.txt" in out
    lines = [" ".join(x.split()) for x in out.splitlines()]

    def line(prefix):
        return next(x for x in lines if x.startswith(prefix))

    # 570 > 0.65 x 860 = 559: out of reach (arows/8's 500 left out)
    assert "arows4/8" in line("append Qr=8 <= 0.65 x decode 96 256") and "OUT OF REACH" in line(
        "append Qr=8 <= 0.65 x decode 96 256"
    )
    assert "within reach" in line("append Qr=8 <= 0.7 x vLLM 96 256")  # 570 < 630
    assert "frows5/q4" in line("fused q=4 <= target 96 6") and "2.90 us left" in line("fused q=4 <= target 96 6")
    assert "within reach (8.32 us left)" in line("bf16 decode <= 1.15 x floor 96 256")  # 1.15 x 470 / 1.13
    # own bytes: rows16io/4 500 us at 1.202 x the floor (416 us): 500 > 1.15 x 416 = 478.4, no bf16 step beside it
    own16 = line("bf16 decode <= 1.15 x floor, own bytes 96 256")
    assert "rows16io/4" in own16 and "OUT OF REACH" in own16
    # rows-/8 is not a step: rows/1 is the bound
    assert "rows/1" in line("decode mode 2 <= 1.05 x floor 96 256") and "13.90 us left" in line(
        "decode mode 2 <= 1.05 x floor 96 256"
    )
    # the faster own-bytes form, rowsio/1 (845 > 1.05 x 798 = 837.9, the step at 855 not faster): out of reach;
    # for `auto` (floor 800) 845 < 864: within reach
    assert "rowsio/1" in line("decode mode 2 <= 1.05 x floor, own bytes 96 256")
    assert "OUT OF REACH" in line("decode mode 2 <= 1.05 x floor, own bytes 96 256")
    assert "within reach (19.00 us left)" in line("decode auto <= 1.08 x floor, own bytes 96 256")
    assert "OUT OF REACH" in line("decode mode 2 <= 0.90 x vLLM 96 8")  # 31.60 > 31.45
    # moveio moves the step's bytes but is no step: no own-bytes line at 768 items
    assert not any(x.startswith("decode mode 2 <= 0.90 x vLLM, own bytes 96 8") for x in lines)
    # 1536 items: rows (fewer bytes) 55.90 < 56.33, rowsio (the step's bytes) 57.10 > 56.33
    assert "rows" in line("decode mode 2 <= 0.90 x vLLM 12 128") and "0.43 us left" in line(
        "decode mode 2 <= 0.90 x vLLM 12 128"
    )
    own = line("decode mode 2 <= 0.90 x vLLM, own bytes 12 128")
    assert "rowsio" in own and "OUT OF REACH" in own


def test_bounds_verdict_takes_the_median_of_repeated_runs(tmp_path, capsys):
    # the faster decode run (860 us) would set the append target at 559 us and call 570 out of reach;
    # the median of the three (900 us) sets it at 585
    tool = load_tree_script("benchmarks/ladder/bounds_verdict.py")
    _rows_prepared(
        tmp_path,
        "ladder_rows_prepared_0.txt",
        96,
        256,
        [
            "rung        us/step     floor us        x     %ceil x step floor",
            "arows4/8     570.00       490.00    1.163     88.0%        1.113",
        ],
    )
    for i, us in enumerate((900.0, 860.0, 900.0)):
        _csv(
            tmp_path,
            f"ladder_kda_bench_{i}.csv",
            [("decode", "f32", "auto", 96, 256, 0, us, 800.0, 900.0, "wide", 1, 1)],
        )
    assert tool.main(str(tmp_path)) == 0
    out = [" ".join(x.split()) for x in capsys.readouterr().out.splitlines()]
    line = next(x for x in out if x.startswith("append Qr=8 <= 0.65 x decode 96 256"))
    assert "within reach (15.00 us left)" in line
