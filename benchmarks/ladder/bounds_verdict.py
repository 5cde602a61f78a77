"""benchmarks/ladder/bounds_verdict.py — the verdict of a bounds run (docs/data/ladder_s41): per
target point, the fastest `rows_prepared` rung that is a whole step with its prologue free (its row
work, the norm, the state written back), the target from `kda_bench` in the same run or the issue's
figure, and whether the target is out of reach for every structure measured.

    python3 benchmarks/ladder/bounds_verdict.py gpu-out/     # the folder of ladder_*.txt / *.csv

Targets (the issues'):
- append Qr = 8 from 6144 items: <= 0.65 x decode (`auto`) in the same run and <= 0.7 x vLLM's figure;
- fused q = 4, H = 96, B = 1 / 2 / 6: <= 12 / 17 / 33 us;
- bf16 decode from 6144 items: <= 1.15 x its floor (also against `rows16io`, its own bytes);
- fp32 decode, gate mode 2, below 6144 items: <= 0.90 x vLLM; from 6144: <= 1.05 x its floor (each also
  against the rungs that move the step's own bytes, `rowsio`);
- fp32 decode, `auto`, from 6144 items: <= 1.08 x its floor (also against `rowsio`, whose gate mode 2 bytes are
  fewer than `auto`'s).
"""

import csv
import glob
import os
import re
import statistics
import sys

# The rungs that are a whole decode step with the prologue free (not: the movement alone, a
# step without its norm's exchange, the prologue alone, a record step).
DECODE_STEPS = {"rows", "split"} | {f"rows/{s}" for s in (1, 2, 4, 8)} | {f"rowsa/{s}" for s in (2, 4, 8)}
# ... of those, the ones that move the decode step's own bytes (its window columns, inputs and output
# beside the state, in gate mode 2): the others read 2 KiB of prepared vectors per item instead of the
# step's 6 KiB, so they bound a step with fewer bytes. The decode targets get a second line against
# these: a target above such a bound is out of reach for a step with the prologue free *and* its bytes.
DECODE_STEPS_OWN_BYTES = {"rowsio", "rowsio/1"}
APPEND8 = {"arows/8", "arows4/8"}
FUSED = {"frows5/q4", "frows4/q4", "frows2/q4"}
BF16 = {"rows16", "rows16/4", "rows16c4"}
# ... and the bf16 forms that move the step's own bytes (gate mode 2's: fewer than `auto`'s, so a bound still)
BF16_OWN_BYTES = {"rows16io", "rows16io/4"}
FUSED_TARGET = {1: 12.0, 2: 17.0, 6: 33.0}


def rows_prepared(folder):
    """{(H, B): {rung: (us, x step floor)}} and the checks that failed, from rows_prepared tables."""
    points, failed, excluded = {}, [], set()
    for path in sorted(glob.glob(os.path.join(folder, "ladder_rows_prepared_*.txt"))):
        hb = None
        with open(path) as f:
            for line in f:
                m = re.match(r"# rows_prepared: H = (\d+), B = (\d+)", line)
                if m:
                    hb = (int(m.group(1)), int(m.group(2)))
                    points.setdefault(hb, {})
                    continue
                if line.startswith("# check") and "FAIL" in line:
                    failed.append(f"{os.path.basename(path)}: {line.strip()}")
                    bad = re.match(r"# check (\S+?)[, ]", line)
                    if hb and bad:
                        excluded.add((hb, bad.group(1)))
                parts = line.split()
                if hb and len(parts) == 6 and not line.startswith("#") and parts[0] != "rung":
                    try:
                        us, xstep = float(parts[1]), float(parts[5])
                    except ValueError:
                        continue
                    points[hb].setdefault(parts[0], []).append((us, xstep))
    # a rung run twice (two ladder lines) keeps its faster run; a rung whose check failed is dropped
    return {
        hb: {r: min(v) for r, v in rungs.items() if (hb, r) not in excluded} for hb, rungs in points.items()
    }, failed


def kda_bench(folder):
    """{(mode, state, gate, H, B, qr): (us, floor_us, peer_us)}, the median of repeated runs (as
    summarize.py): the faster run would lower a target set relative to the step's own time, and so
    call a target out of reach too early."""
    runs = {}
    for path in glob.glob(os.path.join(folder, "ladder_kda_bench_*.csv")):
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (r["mode"], r["state"], r["gate"], int(r["H"]), int(r["B"]), int(r.get("qr") or 0))
                runs.setdefault(key, []).append(r)
    return {
        key: (statistics.median(float(r["us"]) for r in rows), float(rows[0]["floor_us"]), float(rows[0]["peer_us"]))
        for key, rows in runs.items()
    }


def best(rungs, names):
    have = [(rungs[n][0], rungs[n][1], n) for n in names if n in rungs]
    return min(have) if have else None


def verdict(bound_us, target_us, step_us=None):
    """A rung bounds the step only if the step is not faster than it: where the step itself (same
    run) beats the fastest rung, the rungs are slower forms of the row work, not a bound."""
    if bound_us <= target_us:
        return f"within reach ({target_us - bound_us:.2f} us left)"
    if step_us is not None and step_us < bound_us:
        return f"NO BOUND (the step, {step_us:.2f} us, beats every rung)"
    return "OUT OF REACH"


def main(folder):
    rp, failed = rows_prepared(folder)
    kb = kda_bench(folder)
    for line in failed:
        print(f"CHECK FAILED {line} (the rung's figures at that point are left out)")
    print(f"{'target':44} {'H':>3} {'B':>4} {'bound (rung)':>22} {'target':>9}  verdict")

    def row(name, H, B, b, target, step=None):
        us, _, rung = b
        step_us = step[0] if step else None
        print(f"{name:44} {H:>3} {B:>4} {us:>12.2f} ({rung:>8}) {target:>9.2f}  {verdict(us, target, step_us)}")

    for (H, B), rungs in sorted(rp.items()):
        items = H * B
        b = best(rungs, APPEND8)
        if b:
            dec = kb.get(("decode", "f32", "auto", H, B, 0))
            app = kb.get(("append", "f32", "auto", H, B, 8))
            if dec:
                row("append Qr=8 <= 0.65 x decode", H, B, b, 0.65 * dec[0], app)
                if dec[2] > 0:
                    row("append Qr=8 <= 0.7 x vLLM", H, B, b, 0.7 * dec[2], app)
        b = best(rungs, FUSED)
        if b and H == 96 and B in FUSED_TARGET:
            row("fused q=4 <= target", H, B, b, FUSED_TARGET[B], kb.get(("fused", "f32", "auto", H, B, 0)))
        for forms, own in ((BF16, ""), (BF16_OWN_BYTES, ", own bytes")):
            b = best(rungs, forms)
            if b and items >= 6144:
                # x step floor -> us at 1.15 x the floor
                step = kb.get(("decode", "bf16", "auto", H, B, 0))
                row(f"bf16 decode <= 1.15 x floor{own}", H, B, b, 1.15 * b[0] / b[1], step)
        m2 = kb.get(("decode", "f32", "2", H, B, 0))
        auto = kb.get(("decode", "f32", "auto", H, B, 0))
        for steps, own in ((DECODE_STEPS, ""), (DECODE_STEPS_OWN_BYTES, ", own bytes")):
            b = best(rungs, steps)
            if not b:
                continue
            if items < 6144 and m2 and m2[2] > 0:
                row(f"decode mode 2 <= 0.90 x vLLM{own}", H, B, b, 0.90 * m2[2], m2)
            if items >= 6144 and m2:
                row(f"decode mode 2 <= 1.05 x floor{own}", H, B, b, 1.05 * m2[1], m2)
            if items >= 6144 and auto:
                # the own-bytes rungs move gate mode 2's bytes, fewer than `auto`'s (its step reads the gate
                # kernel's output where mode 2 reads the raw gate, and the gate kernel reads F_B): a bound still
                row(f"decode auto <= 1.08 x floor{own}", H, B, b, 1.08 * auto[1], auto)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
