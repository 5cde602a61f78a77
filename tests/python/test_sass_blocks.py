"""benchmarks/ladder/sass_blocks.py (the instruction breakdown of an ncu SASS table) on a
synthetic table and on the committed profile it was written for (docs/data/ladder_s16/run4)."""
import os

import pytest

from harness import load_tree_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tool():
    return load_tree_script("benchmarks/ladder/sass_blocks.py")


def _write(tmp_path, rows):
    head = ['"Kernel Name","k"', '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"']
    body = [f'"0x{i:x}","{src}","{samp}","{n}"' for i, (src, n, samp) in enumerate(rows)]
    p = tmp_path / "ncu-0-sass.csv"
    p.write_text("\n".join(head + body) + "\n")
    return str(p)


def test_counts_per_item_and_blocks(tmp_path):
    sb = _tool()
    # 2 items: a prologue of 3 instructions once per warp of 8 warps (x8), a loop body of 2
    # instructions 32 times per item, then 1 instruction once per item
    rows = [("LDC R1", 16, 1), ("S2R R0", 16, 1), ("BAR.SYNC", 16, 5),
            ("FFMA R1", 64, 10), ("SHFL.BFLY", 64, 3), ("EXIT", 2, 0)]
    instrs = sb.load(_write(tmp_path, rows))
    assert [n for _, n, _ in instrs] == [16, 16, 16, 64, 64, 2]
    assert sb.blocks(instrs) == [(0, 2, 16, 48, 7), (3, 4, 64, 128, 13), (5, 5, 2, 2, 0)]
    out = sb.report(instrs, items=2, top=2)
    assert out[0].startswith("89.0 instructions per item")
    assert any(line.strip().startswith("x32") and "64.0" in line for line in out)
    assert any(line.strip().startswith("x8") and "24.0" in line for line in out)
    # the largest block first: the loop body, 64 instructions per item, 13 of 20 samples
    blk = [line for line in out if " len " in line]
    assert len(blk) == 2 and "len    2" in blk[0] and "64.0" in blk[0] and "65.0%" in blk[0]


def test_committed_profile():
    sb = _tool()
    path = os.path.join(ROOT, "docs", "data", "ladder_s16", "run4", "ncu-0-sass.csv.gz")
    if not os.path.exists(path):
        pytest.skip("the committed profile is not in this tree")
    # record q = 4, H = 96, B = 256 (docs/PERFORMANCE.md, "Token groups"): 31,271 per item, the
    # token group block 311 instructions per warp and chunk (x32)
    instrs = sb.load(path)
    out = sb.report(instrs, items=96 * 256, top=1)
    assert out[0].startswith("31271.0 instructions per item")
    assert "len  311" in out[-1] and "9952.0" in out[-1]


def test_source_lines(tmp_path):
    sb = _tool()
    rows = [("LDC R1", 16, 1), ("S2R R0", 16, 1), ("FFMA R1", 64, 10), ("EXIT", 2, 0)]
    instrs = sb.load(_write(tmp_path, rows))
    dis = tmp_path / "k.dis"
    dis.write_text("\n".join([
        "\t//## File \"/x/step_kernel.cuh\", line 10",
        "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
        "        /*0010*/                   S2R R0, SR_TID.X ;",
        "\t//## File \"/x/item.cuh\", line 29",
        "        /*0020*/                   FFMA R1, R2, R3, R1 ;",
        "\t//## File \"/x/step_kernel.cuh\", line 10",
        "        /*0030*/                   EXIT ;",
    ]) + "\n")
    locs = sb.source_lines(str(dis))
    assert locs == ["step_kernel.cuh:10", "step_kernel.cuh:10", "item.cuh:29", "step_kernel.cuh:10"]
    got = sb.by_line(instrs, locs, items=2)
    assert got[0][0] == "item.cuh:29" and got[0][1] == 32.0 and abs(got[0][2] - 10 / 12) < 1e-12
    assert got[1][0] == "step_kernel.cuh:10" and got[1][1] == 17.0
    with pytest.raises(ValueError, match="not the same kernel"):
        sb.by_line(instrs, locs[:3], items=2)


def test_phases(tmp_path):
    sb = _tool()
    # a kernel file of two sections; a helper inlined into a lambda of the second one, which the first one calls
    # (counted where the lambda is written); an instruction with no line of the file
    src = tmp_path / "step_kernel.cuh"
    src.write_text("\n".join([
        "template <class T>",                                  # 1
        "  // ---- the request: one load --------------",     # 2
        "  const int slot = p.slots[b];",                      # 3
        "  // ---- the rows ------------------------------",   # 4
        "  for (int c = 0; c < NCH; ++c)",                     # 5
        "    fold_record_e(S, u, k, e);",                      # 6
    ]) + "\n")
    dis = tmp_path / "k.dis"
    dis.write_text("\n".join([
        "\t//## File \"/x/step_kernel.cuh\", line 3",
        "        /*0000*/                   LDG R1, [R2] ;",
        "\t//## File \"/x/item.cuh\", line 274 inlined at \"/x/step_kernel.cuh\", line 6",
        "\t//## File \"/x/step_kernel.cuh\", line 6 inlined at \"/x/step_kernel.cuh\", line 3",
        "\t//## File \"/x/step_kernel.cuh\", line 3",
        "        /*0010*/                   FFMA R1, R2, R3, R1 ;",
        "        /*0020*/                   FMUL R4, R5, R6 ;",
        "\t//## File \"/x/common.cuh\", line 97",
        "        /*0030*/                   EXIT ;",
    ]) + "\n")
    rows = [("LDG R1", 16, 6), ("FFMA R1", 64, 2), ("FMUL R4", 64, 2), ("EXIT", 2, 0)]
    instrs = sb.load(_write(tmp_path, rows))
    chains = sb.source_chains(str(dis))
    assert chains[1] == [("item.cuh", 274), ("step_kernel.cuh", 6), ("step_kernel.cuh", 3)]
    # the -g view keeps the last marker of the block (here the outermost caller)
    assert sb.source_lines(str(dis)) == ["step_kernel.cuh:3", "step_kernel.cuh:3", "step_kernel.cuh:3", "common.cuh:97"]
    assert [name for _, name in sb.phase_marks(str(src))] == ["(before the first section)", "the request", "the rows"]
    got = {name: (v, share) for name, v, share in sb.by_phase(instrs, chains, str(src), items=2)}
    assert got["the rows"][0] == 64.0 and abs(got["the rows"][1] - 0.4) < 1e-12
    assert got["the request"][0] == 8.0 and abs(got["the request"][1] - 0.6) < 1e-12
    assert got["(no line in the file)"][0] == 1.0
    with pytest.raises(ValueError, match="not the same kernel"):
        sb.by_phase(instrs, chains[:3], str(src), items=2)
