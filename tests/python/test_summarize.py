"""benchmarks/ladder/summarize.py (one table of a ladder's rungs) on synthetic kda_bench CSVs: a
rung run twice shows the median of its runs and a line with its runs and largest spread."""
from harness import load_tree_script

HEAD = "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,vs_peer,gate_plan"


def _csv(tmp_path, name, rows):
    p = tmp_path / name
    lines = [HEAD] + [f"record,4,96,{B},auto,wide,1,f32,auto,sd,0,{us},2.0,0,0,0,0,0,1" for B, us in rows]
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_repeated_rung_median_and_spread(tmp_path, capsys):
    tool = load_tree_script("benchmarks/ladder/summarize.py")
    paths = [_csv(tmp_path, "ladder_main_0.csv", [(1, 10.0), (6, 30.0)]),
             _csv(tmp_path, "ladder_w1_1.csv", [(1, 11.0), (6, 33.0)]),
             _csv(tmp_path, "ladder_main_2.csv", [(1, 10.2), (6, 30.0)]),
             _csv(tmp_path, "ladder_main_3.csv", [(1, 10.1), (6, 30.3)])]
    tool.main(paths)
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[8:10] == ["main", "w1"]
    b1 = out[1].split()
    assert b1[3] == "1" and b1[8] == "10.10" and b1[9] == "11.00" and b1[10] == "main"
    b6 = out[2].split()
    assert b6[8] == "30.00" and b6[9] == "33.00"
    assert out[3] == "main: up to 3 runs per point, median shown; largest spread 2.00%"
    assert len(out) == 4  # w1 ran once: no spread line
