"""Argument conversion for the extension: types only, no checks of values or shapes (the C++
validator does those, once, and raises the typed errors of :mod:`kda_decode`).

- tensors: numpy ``ml_dtypes.bfloat16`` arrays become uint16 views (bf16 bit patterns);
  everything else goes to the extension as it is (DLPack);
- caches: a :class:`Caches` or a dict becomes the extension's ``_core.Caches``;
- step arguments: ``_core.StepArgs``; streams: an int ``cudaStream_t`` handle;
- policies: ``{(mode, B, q): Policy | dict}`` becomes a list of ``(mode, B, q, Policy)``.
"""

from __future__ import annotations

import dataclasses
import operator
import sys
from typing import Any, List, Mapping, Optional, Tuple

import numpy as np

from . import _core
from ._core import Policy

__all__ = ["MODES", "Caches"]

#: The step modes (SPEC §1), as the C++ core knows them.
MODES: Tuple[str, ...] = tuple(_core.MODES)

CACHE_KEYS = ("conv_state", "state", "correction", "key_gate", "pending")


@dataclasses.dataclass
class Caches:
    """The caches a step reads and writes (SPEC §2). A ``dict`` with these keys also works.

    Attributes:
        conv_state: conv windows, bf16 or fp32. ``conv_dim_first=True`` (DS):
            ``[slots, 3D, window]``; ``False`` (SD, vLLM's default): ``[slots, window, 3D]``.
            Any slot stride.
        state: recurrent state ``[slots, H, V=128, K=128]`` fp32 (or bf16), inner
            ``[H, V, K]`` dense, any slot stride ≥ H·V·K.
        correction: records ``u`` ``[rows_r, H, Qr, V]`` fp32 (record / fused / append / commit /
            flush only). Inner dense, any row stride.
        key_gate: records ``(k, g)`` ``[rows_r, H, Qr, 2K]`` fp32 (with ``correction``).
        pending: ``[rows_r]`` int32, records waiting to be folded (fused steps and flush).

    A plain Python class (not the extension's): torch.compile traces reading its fields.
    """

    conv_state: Any
    state: Any
    correction: Any = None
    key_gate: Any = None
    pending: Any = None


def tensor(x: Any) -> Any:
    """A tensor as the extension takes it: ``ml_dtypes.bfloat16`` numpy arrays as uint16 views."""
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.view(np.uint16)
    return x


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def cache_fields(caches: Any) -> Tuple[Any, Any, Any, Any, Any]:
    """(conv_state, state, correction, key_gate, pending) of a :class:`Caches` or a dict."""
    if isinstance(caches, Caches):
        return caches.conv_state, caches.state, caches.correction, caches.key_gate, caches.pending
    if isinstance(caches, dict):
        for k in caches:
            if k not in CACHE_KEYS:
                raise TypeError(f"caches: unknown key {k!r} (expected {', '.join(CACHE_KEYS)})")
        return (
            caches.get("conv_state"),
            caches.get("state"),
            caches.get("correction"),
            caches.get("key_gate"),
            caches.get("pending"),
        )
    raise TypeError(f"caches: expected a kda_decode.Caches or a dict, got {type(caches).__name__}")


def native_caches(caches: Any) -> _core.Caches:
    """The extension's Caches of a :class:`Caches` or a dict."""
    return _core.Caches(*(tensor(v) for v in cache_fields(caches)))


def count(value: Any, name: str) -> int:
    """An int argument (bool refused: it is no count)."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None


def step_args(
    slots: Any,
    q: Any,
    mode: Any,
    accepted: Any,
    out_slots: Any,
    record_rows: Any,
    stream: int,
) -> _core.StepArgs:
    """The extension's StepArgs (``mode`` must be a str; its value is checked in C++)."""
    if not isinstance(mode, str):
        raise TypeError(f"mode: expected a str (one of {', '.join(MODES)}), got {type(mode).__name__}")
    return _core.StepArgs(slots, count(q, "q"), mode, accepted, out_slots, record_rows, stream)


def resolve_stream(stream: Any, probe: Any) -> int:
    """The cudaStream_t handle (int) a call launches on.

    None: the current torch stream of ``probe``'s device when ``probe`` is a CUDA torch
    tensor, else 0 (the default stream; ignored by the CPU backend). An int is taken as a
    raw handle; an object with ``cuda_stream`` (torch.cuda.Stream) or ``ptr`` (cupy) gives
    its handle.
    """
    if stream is None:
        if probe is not None and is_torch(probe) and getattr(probe, "is_cuda", False):
            torch = sys.modules["torch"]  # a torch tensor implies torch is imported
            return int(torch.cuda.current_stream(probe.device).cuda_stream)
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: expected None, an int cudaStream_t handle or a torch.cuda.Stream, got bool")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError(f"stream: expected a non-negative cudaStream_t handle, got {stream}")
        return stream
    for attr in ("cuda_stream", "ptr"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    raise TypeError(
        f"stream: expected None, an int cudaStream_t handle or a torch.cuda.Stream, got {type(stream).__name__}"
    )


def policy(p: Any, where: str) -> Policy:
    """A :class:`Policy` of a Policy, a dict of its fields, or None (the default policy)."""
    if p is None:
        return Policy()
    if isinstance(p, Policy):
        return p
    if isinstance(p, Mapping):
        return Policy(**p)
    raise TypeError(f"{where}: expected a kda_decode.Policy (or a dict of its fields), got {type(p).__name__}")


def policy_list(policies: Optional[Mapping[Any, Any]]) -> List[Tuple[str, int, int, Policy]]:
    """``{(mode, B, q): policy}`` as the extension takes it: ``[(mode, B, q, Policy)]``."""
    if policies is None:
        return []
    if not isinstance(policies, Mapping):
        raise TypeError(f"policies: expected a dict {{(mode, B, q): Policy}}, got {type(policies).__name__}")
    out = []
    for key, pol in policies.items():
        if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], str)):
            raise TypeError(f"policies: keys are (mode, B, q) tuples, got {key!r}")
        mode, B, q = key
        out.append(
            (
                mode,
                count(B, f"policies: B of {key!r}"),
                count(q, f"policies: q of {key!r}"),
                policy(pol, f"policies[{key!r}]"),
            )
        )
    return out
