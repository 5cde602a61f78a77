"""Runs one golden case (SPEC §10) through the public API and checks it (SPEC §8).

Usage::

    python -m kda_decode.golden CASE_DIR [--device cpu|cuda] [--layout ds|sd] [--seed N]

A case folder holds ``case.json`` (shapes, parameters, a tensor table and ``num_slots``)
and raw little-endian ``.bin`` arrays (bf16 as uint16 bit patterns). The runner builds a
pool of ``num_slots`` slots filled with random non-zero sentinels, puts ``state_in`` /
``conv_state_in`` at the ``pool_slots`` rows, runs the case's ``steps`` steps (decode when
the case has q = 1 and no ``accepted``, else ``per_token`` with the case's ``[B, q]`` slots
and ``accepted``), and checks:

* out (bf16 written vs the fp32 reference), per element and step:
  ``|out − ref| ≤ 2⁻⁸·|ref| + 2e-3·max|ref|`` (max over the step's output);
* state at the pool slots: ``max|err| / max|ref| ≤ 1e-5·n`` with n = steps (the measured
  ratio is printed);
* conv windows at the pool slots bitwise equal to ``conv_state_out``;
* every other slot (windows and state) bitwise unchanged.

``--device cuda`` allocates everything with torch on the current CUDA device (needs torch
and a CUDA build); ``--layout sd`` stores the windows as ``[slots, window, 3D]`` (vLLM's
layout, ``conv_dim_first=False``) instead of DS ``[slots, 3D, window]``.

Exit status: 0 on PASS, 1 on FAIL, 2 when the case cannot be run (bad folder, no torch or
no CUDA backend for ``--device cuda``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import kda_decode as kd
from kda_decode.devices import Device

_NP_DTYPES = {
    "bf16": np.uint16,
    "f32": np.float32,
    "f64": np.float64,
    "i32": np.int32,
    "i64": np.int64,
    "f16": np.float16,
}

#: SPEC §8 state bound per chained step.
STATE_BOUND_PER_STEP = 1e-5


@dataclasses.dataclass
class GoldenResult:
    """Outcome of one golden case.

    Attributes:
        name: the case name.
        device, layout: what it ran with ('cpu' / 'cuda', 'ds' / 'sd').
        steps: chained steps n.
        passed: all checks passed.
        out_max_abs_err: max |out − ref| over all steps.
        out_worst_ratio: max over elements of |out − ref| / bound (≤ 1 passes).
        state_rel_err: max|err| / max|ref| of the state at the pool slots.
        state_bound: the bound it is checked against (1e-5·n).
        conv_bitwise: windows at the pool slots bitwise equal to the reference.
        untouched_bitwise: every other slot bitwise unchanged.
        status: the status() description after the run ('ok' expected).
        failures: human-readable reasons for a FAIL.
    """

    name: str
    device: str
    layout: str
    steps: int
    passed: bool = False
    out_max_abs_err: float = float("nan")
    out_worst_ratio: float = float("nan")
    state_rel_err: float = float("nan")
    state_bound: float = float("nan")
    conv_bitwise: bool = False
    untouched_bitwise: bool = False
    status: str = ""
    failures: List[str] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One line: PASS/FAIL, the case and the measured errors."""
        head = "PASS" if self.passed else "FAIL"
        s = (
            f"{head} {self.name} [{self.device}, {self.layout}, steps={self.steps}]: "
            f"out max|err|={self.out_max_abs_err:.3e} (worst err/bound {self.out_worst_ratio:.3f}); "
            f"state max|err|/max|ref|={self.state_rel_err:.3e} (bound {self.state_bound:.1e}); "
            f"conv windows bitwise {'ok' if self.conv_bitwise else 'MISMATCH'}; "
            f"untouched slots bitwise {'ok' if self.untouched_bitwise else 'CHANGED'}; "
            f"status {self.status}"
        )
        if self.failures:
            s += "\n  " + "\n  ".join(self.failures)
        return s


def load_case(case_dir: str) -> dict:
    """Reads ``case.json`` and every tensor of its table as numpy arrays.

    Returns:
        dict: the json fields, plus ``arrays`` {name: np.ndarray} (bf16 as uint16).
    Raises:
        FileNotFoundError: no case.json or a missing .bin. ValueError: a size mismatch or
        an unknown dtype.
    """
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    arrays: Dict[str, np.ndarray] = {}
    for name, t in case["tensors"].items():
        if t["dtype"] not in _NP_DTYPES:
            raise ValueError(f"{case_dir}: tensor {name}: unknown dtype {t['dtype']}")
        dt = np.dtype(_NP_DTYPES[t["dtype"]]).newbyteorder("<")
        a = np.fromfile(os.path.join(case_dir, t["file"]), dtype=dt)
        shape = tuple(int(s) for s in t["shape"])
        if a.size != int(np.prod(shape)):
            raise ValueError(f"{case_dir}: tensor {name}: {a.size} elements in {t['file']}, shape {shape}")
        arrays[name] = a.reshape(shape).astype(dt.newbyteorder("="))
    case["arrays"] = arrays
    return dict(case)


def _sentinel(rng: np.random.Generator, shape: Tuple[int, ...], np_dtype: Any) -> np.ndarray:
    """Random non-zero finite values (bf16 as uint16 bit patterns)."""
    v = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    if np_dtype == np.uint16:
        return kd.float32_to_bf16(v)
    out: np.ndarray = v.astype(np_dtype)
    return out


def _device(device: str) -> Device:
    """The data adapter for ``device``; RuntimeError when 'cuda' cannot run here."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        if not kd.cuda_built():
            raise RuntimeError("--device cuda: kda_decode was built without the CUDA backend")
    return Device(device)


def run_case(case_dir: str, device: str = "cpu", layout: str = "ds", seed: int = 0) -> GoldenResult:
    """Runs and checks one golden case through :class:`kda_decode.PreparedKda`.

    Args:
        case_dir: a folder in the SPEC §10 format.
        device: 'cpu' (numpy arrays, CPU backend) or 'cuda' (torch CUDA tensors).
        layout: 'ds' (windows ``[slots, 3D, window]``, conv_dim_first=True) or 'sd'
            (``[slots, window, 3D]``, conv_dim_first=False).
        seed: seed of the sentinel values.
    Returns:
        :class:`GoldenResult` (``.passed``, measured errors, ``.summary()``).
    Raises:
        ValueError: bad device/layout or a malformed case. RuntimeError / ImportError:
        ``device='cuda'`` without torch, a CUDA device or the CUDA backend.
    """
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu' or 'cuda', got {device!r}")
    if layout not in ("ds", "sd"):
        raise ValueError(f"layout: expected 'ds' or 'sd', got {layout!r}")
    case = load_case(case_dir)
    A = case["arrays"]
    T = case["tensors"]
    name = case.get("name", os.path.basename(os.path.normpath(case_dir)))
    H, D, B, q = int(case["H"]), int(case["D"]), int(case["B"]), int(case["q"])
    steps = int(case.get("steps", 1))
    window = int(case["window"])
    N = int(case["num_slots"])
    rows = B * q
    res = GoldenResult(name=name, device=device, layout=layout, steps=steps)
    be = _device(device)
    rng = np.random.default_rng(seed)

    pool_slots = A["pool_slots"].astype(np.int64).reshape(-1)
    slots_np = A["slots"].astype(np.int32)
    accepted_np = A["accepted"].astype(np.int32).reshape(-1) if "accepted" in A else None
    per_token = accepted_np is not None or q > 1 or slots_np.ndim == 2
    mode = "per_token" if per_token else "decode"
    if per_token and slots_np.ndim == 1:
        slots_np = slots_np.reshape(B, 1)
    if len(np.unique(pool_slots)) != len(pool_slots) or pool_slots.min() < 0 or pool_slots.max() >= N:
        raise ValueError(f"{name}: pool_slots {pool_slots.tolist()} must be distinct ids in [0, {N})")
    # The null slot is 0 (vLLM's NULL_BLOCK_ID) unless the case uses slot 0.
    null_slot = -1 if (0 in pool_slots or (slots_np == 0).any()) else 0

    # ---- weights ---------------------------------------------------------------------
    conv_bf16 = T["conv_weight"]["dtype"] == "bf16"
    weights = dict(
        conv_weight=be.put(A["conv_weight"], bf16=conv_bf16),
        A_log=be.put(A["A_log"]),
        dt_bias=be.put(A["dt_bias"]),
        norm_weight=be.put(A["norm_weight"], bf16=T["norm_weight"]["dtype"] == "bf16"),
        f_b_weight=be.put(A["f_b_weight"], bf16=True) if "f_b_weight" in A else None,
        conv_bias=be.put(A["conv_bias"]) if "conv_bias" in A else None,
    )
    lb = case.get("lower_bound")
    kda = kd.PreparedKda(
        **weights,
        eps=float(case.get("eps", 1e-5)),
        lower_bound=None if lb is None else float(lb),
        policies={(mode, B, q): kd.Policy(pitch=int(case.get("pitch", 0)))},
        conv_dim_first=(layout == "ds"),
        null_slot=null_slot,
    )

    # ---- pool with sentinels ------------------------------------------------------------
    conv_dt = _NP_DTYPES[T["conv_state_in"]["dtype"]]
    state_dt = _NP_DTYPES[T["state_in"]["dtype"]]
    conv_pool = _sentinel(rng, (N, 3 * D, window), conv_dt)  # logical DS
    state_pool = _sentinel(rng, (N, H, 128, 128), state_dt)
    conv_pool[pool_slots] = A["conv_state_in"]
    state_pool[pool_slots] = A["state_in"]
    conv_before = conv_pool.copy()
    state_before = state_pool.copy()
    phys = conv_pool if layout == "ds" else np.ascontiguousarray(conv_pool.transpose(0, 2, 1))
    conv_dev = be.put(phys, bf16=conv_dt == np.uint16)
    state_dev = be.put(state_pool, bf16=state_dt == np.uint16)
    caches = kd.Caches(conv_state=conv_dev, state=state_dev)
    kda.prepare(caches)

    projected = A["projected"].reshape(steps, rows, -1)
    out_ref = A["out"].reshape(steps, rows, D).astype(np.float64)
    slots_dev = be.put(slots_np)
    acc_dev = be.put(accepted_np) if accepted_np is not None else None
    out_dev = be.zeros_bf16((rows, D))

    worst_ratio, max_err = 0.0, 0.0
    for s in range(steps):
        proj_dev = be.put(projected[s], bf16=True)
        kda.run(proj_dev, out_dev, caches, slots_dev, q=q, accepted=acc_dev, mode=mode)
        be.sync()
        out = kd.bf16_to_float32(be.host(out_dev)).astype(np.float64)
        ref = out_ref[s]
        err = np.abs(out - ref)
        bound = 2.0**-8 * np.abs(ref) + 2e-3 * np.abs(ref).max()
        err = np.where(np.isfinite(out), err, np.inf)
        max_err = max(max_err, float(err.max()))
        ratio = float((err / np.maximum(bound, 1e-300)).max())
        worst_ratio = max(worst_ratio, ratio)
        if not (err <= bound).all():
            bad = np.argwhere(~(err <= bound))
            r, c = bad[0]
            res.failures.append(
                f"out step {s}: {len(bad)} elements over the bound, first [{r}, {c}]: "
                f"out {out[r, c]:.6g} ref {ref[r, c]:.6g} bound {bound[r, c]:.3g}"
            )
    st = kda.status()
    res.status = st.describe()
    if not st.ok:
        res.failures.append(f"status after the run: {st.describe()}")
    res.out_max_abs_err = max_err
    res.out_worst_ratio = worst_ratio

    # ---- caches --------------------------------------------------------------------------
    conv_after = be.host(conv_dev)
    if layout == "sd":
        conv_after = np.ascontiguousarray(conv_after.transpose(0, 2, 1))
    state_after = be.host(state_dev)

    st_ref = A["state_out"].astype(np.float64)
    st_got = state_after[pool_slots].astype(np.float64)
    if state_dt == np.uint16:
        st_got = kd.bf16_to_float32(state_after[pool_slots]).astype(np.float64)
        st_ref = kd.bf16_to_float32(A["state_out"]).astype(np.float64)
    max_ref = float(np.abs(st_ref).max())
    st_err = np.abs(st_got - st_ref)
    st_err = np.where(np.isfinite(st_got), st_err, np.inf)
    res.state_rel_err = float(st_err.max()) / max(max_ref, 1e-300)
    res.state_bound = STATE_BOUND_PER_STEP * steps
    if not res.state_rel_err <= res.state_bound:
        res.failures.append(f"state: max|err|/max|ref| = {res.state_rel_err:.3e} > {res.state_bound:.1e}")

    def bits(a: np.ndarray) -> np.ndarray:
        a = np.ascontiguousarray(a)
        return a.view(np.uint16 if a.itemsize == 2 else np.uint32 if a.itemsize == 4 else np.uint64)

    res.conv_bitwise = bool(np.array_equal(bits(conv_after[pool_slots]), bits(A["conv_state_out"])))
    if not res.conv_bitwise:
        diff = np.argwhere(bits(conv_after[pool_slots]) != bits(A["conv_state_out"]))
        res.failures.append(
            f"conv windows: {len(diff)} elements differ, first (pool row, channel, column) "
            f"{tuple(int(x) for x in diff[0])}"
        )
    others = np.setdiff1d(np.arange(N), pool_slots)
    res.untouched_bitwise = bool(
        np.array_equal(bits(conv_after[others]), bits(conv_before[others]))
        and np.array_equal(bits(state_after[others]), bits(state_before[others]))
    )
    if not res.untouched_bitwise:
        res.failures.append(f"slots outside pool_slots {others.tolist()} were modified")
    res.passed = not res.failures
    return res


def main(argv: Optional[List[str]] = None) -> int:
    """CLI entry point; returns the exit status (0 PASS, 1 FAIL, 2 cannot run)."""
    ap = argparse.ArgumentParser(prog="python -m kda_decode.golden", description=__doc__.split("\n\n")[0])
    ap.add_argument("case_dir", help="a golden case folder (case.json + .bin arrays)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--layout", choices=("ds", "sd"), default="ds")
    ap.add_argument("--seed", type=int, default=0, help="seed of the sentinel values")
    a = ap.parse_args(argv)
    try:
        res = run_case(a.case_dir, device=a.device, layout=a.layout, seed=a.seed)
    except (OSError, ValueError, RuntimeError, ImportError, KeyError) as e:
        print(f"ERROR {a.case_dir}: {type(e).__name__}: {e}")
        return 2
    print(res.summary())
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
