#!/usr/bin/env python3
"""benchmarks/ladder/timeline.py — where a decode step's time goes across its grid.

Reads the outputs that `kda_bench --dump-out PREFIX` wrote with a KDA_TIMELINE build
(include/kda/cuda/step_kernel.cuh): every Wide CTA left in the first 48 bytes of its item's
output row %globaltimer (ns) at entry, after the PDL wait, at the row loop, at its first chunk,
at exit, and its SM. The graph's steps run back to back, so each step's handoff from the one
before, its fill (the first chunks landing) and its drain (the items left after the last one
started) are measured, not fitted.

Usage: timeline.py FILE.bin [...]   (name: PREFIX_<mode>_<state>_H<H>_B<B>.bin, q = 1)
"""

from __future__ import annotations

import re
import sys

import numpy as np

K = 128


def load(path: str) -> tuple[int, int, np.ndarray]:
    m = re.search(r"_H(\d+)_B(\d+)\.bin$", path)
    if not m:
        raise SystemExit(f"{path}: expected a name ending _H<H>_B<B>.bin")
    H, B = int(m.group(1)), int(m.group(2))
    raw = np.fromfile(path, dtype=np.uint8)
    row = H * K * 2  # one output row (bf16)
    if raw.size % (B * row):
        raise SystemExit(f"{path}: {raw.size} bytes is not a whole number of steps of {B} x {row}")
    steps = raw.size // (B * row)
    items = raw.reshape(steps, B, H, K * 2)[:, :, :, :48].copy().view(np.uint64)  # [steps, B, H, 6]
    return H, B, items.reshape(steps, B * H, 6).astype(np.int64)


def describe(path: str) -> None:
    H, B, t = load(path)
    steps, n = t.shape[0], t.shape[1]
    if (t[..., 1] == 0).any():
        raise SystemExit(f"{path}: an item without a timeline (not a KDA_TIMELINE build, or a pad)")
    # step 0 follows the graph's launch, not a step of its own kind: the medians below skip it
    first_step = 1 if steps > 2 else 0
    t0 = t[..., :5].min()
    ts = (t[..., :5] - t0) / 1e3  # µs
    entry, wait, rows, first, end = (ts[..., i] for i in range(5))
    start = wait.min(axis=1)  # each step's first item past its wait
    stop = end.max(axis=1)
    period = np.median(np.diff(stop))
    handoff = start[1:] - stop[:-1]  # last exit of step i -> first item past the wait in step i + 1
    nsm = len(np.unique(t[..., 5]))
    print(f"{path}: H = {H}, B = {B}, {n} items, {steps} steps, {nsm} SMs")
    print(f"  period (median of the steps' last exits)      {period:8.2f} µs")
    print(f"  handoff (last exit -> next step's first item)  {np.median(handoff):8.2f} µs")
    # per step, relative to the step's first item past its wait
    rel = lambda a: a - start[:, None]  # noqa: E731
    resident = entry < start[:, None]  # launched before the step was released (the PDL overlap)
    print(f"  items resident at the release                  {np.median(resident.sum(axis=1)[first_step:]):8.0f}")
    span = (stop - start)[first_step:]
    last_start = rel(wait).max(axis=1)[first_step:]
    print(f"  step span (first past wait -> last exit)       {np.median(span):8.2f} µs")
    print(f"  last item past its wait at                     {np.median(last_start):8.2f} µs")
    print(f"  drain (last item past wait -> last exit)       {np.median(span - last_start):8.2f} µs")
    q = lambda a: np.percentile(a, [10, 50, 90])  # noqa: E731
    for name, sel in (("resident at release", resident), ("launched later", ~resident)):
        sel = sel.copy()
        sel[:first_step] = False
        if not sel.any():
            continue
        pro, fc, life = (rows - wait)[sel], (first - wait)[sel], (end - wait)[sel]
        print(
            f"  {name:20s} prologue (wait -> rows) p10/50/90 {q(pro)[0]:5.2f} {q(pro)[1]:5.2f} {q(pro)[2]:5.2f}"
            f" | first chunk {q(fc)[1]:5.2f} | life {q(life)[0]:5.2f} {q(life)[1]:5.2f} {q(life)[2]:5.2f} µs"
        )
    # a later item's entry -> past its wait (its pre-wait work), and how soon an SM takes a slot again
    later = ~resident
    later[:first_step] = False
    turnover = []  # per later item: the SM's last exit before its entry -> that item past its wait
    if later.any():
        ew = (wait - entry)[later]
        reuse = []
        for i in range(first_step, steps):
            for sm in np.unique(t[i, :, 5]):
                on = t[i, :, 5] == sm
                exits = np.sort(end[i][on])
                for e, w in zip(entry[i][on & later[i]], wait[i][on & later[i]]):
                    prior = exits[exits <= e]
                    if prior.size:
                        reuse.append(e - prior[-1])
                        turnover.append(w - prior[-1])
        print(
            f"  later items' entry -> past the wait p10/50/90  {q(ew)[0]:5.2f} {q(ew)[1]:5.2f} {q(ew)[2]:5.2f} µs"
            + (f"; slot taken again {np.median(reuse):.2f} µs after an exit (median)" if reuse else "")
        )
    if turnover:
        # a slot between one item's exit and the next item past its wait holds no item's request
        # and no state bytes in flight (its first copies follow the request)
        print(
            f"  turnover (an exit -> the SM's next item past its wait) p50/90 {q(turnover)[1]:5.2f}"
            f" {q(turnover)[2]:5.2f} µs, {len(turnover) / (steps - first_step):.0f} a step"
        )
    # active items over the step (past the wait, not yet exited), in 0.25 µs bins, median over steps
    grid = np.arange(0.0, float(np.median(span)) + 0.25, 0.25)
    act = np.median(
        [
            ((rel(wait)[i][None, :] <= grid[:, None]) & (rel(end)[i][None, :] > grid[:, None])).sum(axis=1)
            for i in range(first_step, steps)
        ],
        axis=0,
    )
    top = act.max()
    below = grid[act < 0.9 * top]
    tail = below[below > grid[np.argmax(act)]]
    print(f"  most items active at once                      {top:8.0f}")
    if tail.size:
        before = np.median(span) - tail[0]
        print(f"  active below 90% of that from                  {tail[0]:8.2f} µs ({before:.2f} µs before the end)")
    # the grid's empty slots as time: Σ (top − active) / top over the bins, split at the peak
    peak = int(np.argmax(act))
    lost = (top - act) / max(top, 1) * 0.25
    print(f"  empty slots as µs of the full grid: fill {lost[:peak].sum():6.2f}, drain {lost[peak:].sum():6.2f}")
    if turnover:
        share = sum(turnover) / ((steps - first_step) * max(top, 1) * float(np.median(span)))
        print(f"  turnovers as a share of the step's slot time (most active x span)  {100 * share:5.1f}%")
    print("  active items over the step (µs: count):")
    for i in range(0, len(grid), max(1, len(grid) // 24)):
        print(f"    {grid[i]:7.2f}: {act[i]:5.0f} {'#' * int(40 * act[i] / max(top, 1))}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for f in sys.argv[1:]:
        describe(f)
