"""benchmarks/ladder/sass_blocks.py — where a kernel's instructions go, from the per-instruction
SASS table of an ncu run (`scripts/gpu_run.sh` stage ncu writes `ncu-N-sass.csv`): the
instructions executed per item, split by how often each instruction ran per item (x8 = once per
warp of an 8-warp CTA, x32 = per warp and chunk, …), and the largest straight-line blocks (runs
of instructions with the same count) with their share of the stall samples.

    python3 benchmarks/ladder/sass_blocks.py gpu-out/ncu-0-sass.csv --items 24576 [--top 20]
        [--lines kernel.dis [--phases include/kda/cuda/step_kernel.cuh]]

--lines attributes the instructions to the source lines they were compiled from: give it the
`nvdisasm -g -c` listing of the profiled kernel's cubin (the same binary: `cuobjdump -xelf all
kda_bench_X` extracts one cubin per instantiation file; the listing must hold as many
instructions as the table). nvdisasm and cuobjdump run on this machine from PyPI's
nvidia-cuda-nvdisasm / nvidia-cuda-cuobjdump wheels. An inlined helper's instructions go to the
helper's line (a table of the biggest lines, not of the caller's phases).

--phases FILE gives the caller's phases instead: with an `nvdisasm -gi -c` listing (each
instruction block preceded by its whole inline chain, innermost first), each instruction goes to
the innermost line of its chain that lies in FILE, and that line to the phase whose
`// ---- name` comment in FILE comes last before it (the step kernel's sections: the request,
the gate, the conv, the rows, …). Helpers from other files count where FILE calls them; a
lambda of FILE counts where its body is written, not where it is called.

A step kernel is bound by instruction issue where ncu's "Issued Warp Per Scheduler" is high
(record / fused verify: 0.7–0.8); its time then follows the count this prints.
"""
import argparse
import csv
import gzip
import os
import re
import sys
from collections import Counter


def load(path):
    """[(sass text, instructions executed, stall samples)] in address order."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    # the first line names the kernel; the second is the header
    hdr_i = next(i for i, r in enumerate(rows) if "Instructions Executed" in r)
    hdr = rows[hdr_i]
    ia, isrc = hdr.index("Instructions Executed"), hdr.index("Source")
    isamp = hdr.index("Warp Stall Sampling (All Samples)")
    out = []
    for r in rows[hdr_i + 1:]:
        if len(r) <= max(ia, isamp):
            continue
        out.append((r[isrc].strip(), int(r[ia] or 0), int(r[isamp] or 0)))
    return out


def blocks(instrs):
    """Runs of consecutive instructions with the same execution count: (first, last, count,
    instructions, samples)."""
    out = []
    for i, (_, n, s) in enumerate(instrs):
        if out and out[-1][2] == n and out[-1][1] == i - 1:
            f, _, c, tot, samp = out[-1]
            out[-1] = (f, i, c, tot + n, samp + s)
        else:
            out.append((i, i, n, n, s))
    return out


def report(instrs, items, top=20):
    lines = []
    total = sum(n for _, n, _ in instrs)
    samples = sum(s for *_, s in instrs) or 1
    lines.append(f"{total / items:.1f} instructions per item ({len(instrs)} SASS instructions)")
    by_mult = Counter()
    for _, n, _ in instrs:
        by_mult[round(n / items, 2)] += n / items
    lines.append("per item, by executions per item:")
    for m, v in sorted(by_mult.items(), key=lambda kv: -kv[1]):
        if v >= 0.005 * total / items:
            lines.append(f"  x{m:<8g} {v:9.1f}  ({100 * v * items / total:4.1f}%)")
    lines.append(f"largest blocks (first-last SASS index, x per item, length, instructions per item, stall samples):")
    for f, l, c, tot, samp in sorted(blocks(instrs), key=lambda b: -b[3])[:top]:
        lines.append(f"  {f:5d}-{l:5d} x{c / items:<7g} len {l - f + 1:4d} {tot / items:9.1f}  {100 * samp / samples:5.1f}%  "
                     f"{instrs[f][0][:48]}")
    return lines


def source_lines(dis_path):
    """The file:line each SASS instruction of an `nvdisasm -g` listing came from, in address
    order (None before the first line marker): the last marker before it (with `-gi`, the
    outermost caller of its inline chain)."""
    return [f"{c[-1][0]}:{c[-1][1]}" if c else None for c in source_chains(dis_path)]


def by_line(instrs, locs, items, top=40):
    """The source lines with the most instructions per item: (line, instructions per item,
    share of the stall samples)."""
    if len(locs) != len(instrs):
        raise ValueError(f"the listing has {len(locs)} instructions, the table {len(instrs)}: not the same kernel")
    n, s = Counter(), Counter()
    for loc, (_, cnt, samp) in zip(locs, instrs):
        n[loc] += cnt / items
        s[loc] += samp
    samples = sum(s.values()) or 1
    return [(loc, v, s[loc] / samples) for loc, v in n.most_common(top)]


def source_chains(dis_path):
    """Each SASS instruction's inline chain [(file basename, line), …], innermost first, from an
    `nvdisasm -gi` listing, in address order ([] before the first line marker)."""
    chain, fresh, out = [], False, []
    with open(dis_path) as f:
        for line in f:
            m = re.search(r'//## File "([^"]+)", line (\d+)', line)
            if m:
                if not fresh:
                    chain, fresh = [], True
                chain.append((os.path.basename(m.group(1)), int(m.group(2))))
            elif re.match(r"^\s+/\*[0-9a-f]{4,}\*/", line):
                fresh = False
                out.append(chain)
    return out


def phase_marks(src_path):
    """[(first line, phase name)] of the `// ---- name ---…` comments of a kernel source."""
    marks = [(1, "(before the first section)")]
    with open(src_path) as f:
        for no, line in enumerate(f, 1):
            m = re.match(r"\s*// ---- (.*?)\s*-*\s*$", line)
            if m:
                name = re.split(r"[:.(]", m.group(1))[0].strip()
                marks.append((no, name[:40] or m.group(1)[:40]))
    return marks


def by_phase(instrs, chains, src_path, items):
    """Instructions per item and share of the stall samples by the phase of src_path each came from."""
    if len(chains) != len(instrs):
        raise ValueError(f"the listing has {len(chains)} instructions, the table {len(instrs)}: not the same kernel")
    base, marks = os.path.basename(src_path), phase_marks(src_path)
    n, s = Counter(), Counter()
    for chain, (_, cnt, samp) in zip(chains, instrs):
        line = next((ln for f, ln in chain if f == base), None)
        name = "(no line in the file)" if line is None else [nm for first, nm in marks if first <= line][-1]
        n[name] += cnt / items
        s[name] += samp
    samples = sum(s.values()) or 1
    return [(name, v, s[name] / samples) for name, v in n.most_common()]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu-N-sass.csv(.gz) of one profiled launch")
    ap.add_argument("--items", type=int, required=True, help="(request, head) items of the launch: B·H")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--lines", help="nvdisasm -g -c listing of the same kernel: instructions per source line")
    ap.add_argument("--phases", help="the kernel's source (with --lines from nvdisasm -gi): instructions per section")
    a = ap.parse_args(argv)
    instrs = load(a.csv)
    print("\n".join(report(instrs, a.items, a.top)))
    if a.lines:
        print("by source line (instructions per item, share of the stall samples):")
        for loc, v, share in by_line(instrs, source_lines(a.lines), a.items, a.top):
            print(f"  {v:9.1f}  {100 * share:5.1f}%  {loc}")
    if a.lines and a.phases:
        print(f"by section of {os.path.basename(a.phases)} (instructions per item, share of the stall samples):")
        for name, v, share in by_phase(instrs, source_chains(a.lines), a.phases, a.items):
            print(f"  {v:9.1f}  {100 * share:5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
