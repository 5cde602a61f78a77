"""kda_decode.torch — torch custom ops over the prepared KDA core (``torch.library``).

Importing this module (it imports torch; ``import kda_decode`` alone never does) registers
four ops in the ``kda_decode`` namespace::

    torch.ops.kda_decode.run(handle, projected, out!, conv_state!, state!, correction!?,
                             key_gate!?, pending!?, slots, q, step_mode, accepted?, out_slots?,
                             record_rows?) -> ()
    torch.ops.kda_decode.run_views(handle, qkv, out_gate, gate_in, beta, out!, conv_state!,
                                   state!, correction!?, key_gate!?, pending!?, slots, q,
                                   step_mode, accepted?, out_slots?, record_rows?) -> ()
    torch.ops.kda_decode.commit(handle, conv_state, state!, correction, key_gate, pending?,
                                slots, record_rows?, counts) -> ()
    torch.ops.kda_decode.flush(handle, conv_state, state!, correction, key_gate, pending!,
                               slots, record_rows?) -> ()

(``!`` = mutated in place, declared to torch; ``?`` = optional.) ``handle`` is the integer
id of a live :class:`kda_decode.PreparedKda` (``kda._handle``): op arguments can only be
tensors and scalars, so the object is looked up by id. Every op has a fake (meta)
implementation that returns nothing, so the ops trace under ``torch.compile`` (also with
``fullgraph=True``) and pass ``torch.library.opcheck``.

Use the wrappers below (same arguments as the :class:`~kda_decode.PreparedKda` methods,
the object first) or simply call the methods: once this module is imported,
``PreparedKda.run / run_views / commit / flush`` go through these ops while torch.compile
traces them, and call the extension directly otherwise (no dispatcher cost in eager mode).

Under torch.compile the methods' ``stream`` argument is ignored: the ops launch on the
current stream (use ``with torch.cuda.stream(s):`` around the compiled call instead).

Devices: a PreparedKda built from CPU tensors runs the CPU backend on CPU tensors; one
built from CUDA tensors runs the CUDA backend and launches on
``torch.cuda.current_stream()`` of the tensors' device (what CUDA-graph capture and
torch.compile expect). Mixing devices raises ``ValueError`` naming the operand.

Errors: as the methods — ``TypeError`` / ``ValueError`` for operand errors (raised when the
op runs; the fake implementations do not validate), data errors are read with
``kda.status()`` (not an op: it synchronises the stream).
"""
import sys
from typing import Optional

import torch

import kda_decode as _kd

__all__ = ["run", "run_views", "commit", "flush", "prepared_of", "from_module", "OPS"]

# Mutated arguments (declared to torch). Records and pending are declared for every mode:
# record / fused steps write them; decode and per-token steps leave them untouched.
_STEP_MUTATES = ("out", "conv_state", "state", "correction", "key_gate", "pending")


def prepared_of(handle: int) -> "_kd.PreparedKda":
    """The live PreparedKda with this handle.

    Raises:
        RuntimeError: no live object has this handle (it was garbage-collected: keep the
            PreparedKda alive as long as graphs or compiled functions use it).
    """
    kda = _kd._LIVE.get(int(handle))
    if kda is None:
        raise RuntimeError(f"kda_decode: no live PreparedKda with handle {handle} (was it garbage-collected?)")
    return kda


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except AttributeError:  # pragma: no cover - very old torch
        return False


# ---------------------------------------------------------------------------------------
# ops (annotations must be real types here: torch infers the schema from them)
# ---------------------------------------------------------------------------------------
@torch.library.custom_op("kda_decode::run", mutates_args=_STEP_MUTATES)
def _run_op(
    handle: int,
    projected: torch.Tensor,
    out: torch.Tensor,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    correction: Optional[torch.Tensor],
    key_gate: Optional[torch.Tensor],
    pending: Optional[torch.Tensor],
    slots: torch.Tensor,
    q: int,
    step_mode: str,
    accepted: Optional[torch.Tensor],
    out_slots: Optional[torch.Tensor],
    record_rows: Optional[torch.Tensor],
) -> None:
    kda = prepared_of(handle)
    kda._core.run(projected, out, conv_state, state, correction, key_gate, pending, slots, q, step_mode, accepted,
                  out_slots, record_rows, _kd._resolve_stream(None, projected))


@_run_op.register_fake
def _run_fake(handle, projected, out, conv_state, state, correction, key_gate, pending, slots, q, step_mode, accepted,
              out_slots, record_rows) -> None:
    return None


@torch.library.custom_op("kda_decode::run_views", mutates_args=_STEP_MUTATES)
def _run_views_op(
    handle: int,
    qkv: torch.Tensor,
    out_gate: torch.Tensor,
    gate_in: torch.Tensor,
    beta: torch.Tensor,
    out: torch.Tensor,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    correction: Optional[torch.Tensor],
    key_gate: Optional[torch.Tensor],
    pending: Optional[torch.Tensor],
    slots: torch.Tensor,
    q: int,
    step_mode: str,
    accepted: Optional[torch.Tensor],
    out_slots: Optional[torch.Tensor],
    record_rows: Optional[torch.Tensor],
) -> None:
    kda = prepared_of(handle)
    kda._core.run_views(qkv, out_gate, gate_in, beta, out, conv_state, state, correction, key_gate, pending, slots,
                        q, step_mode, accepted, out_slots, record_rows, _kd._resolve_stream(None, qkv))


@_run_views_op.register_fake
def _run_views_fake(handle, qkv, out_gate, gate_in, beta, out, conv_state, state, correction, key_gate, pending,
                    slots, q, step_mode, accepted, out_slots, record_rows) -> None:
    return None


@torch.library.custom_op("kda_decode::commit", mutates_args=("state",))
def _commit_op(
    handle: int,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    correction: torch.Tensor,
    key_gate: torch.Tensor,
    pending: Optional[torch.Tensor],
    slots: torch.Tensor,
    record_rows: Optional[torch.Tensor],
    counts: torch.Tensor,
) -> None:
    kda = prepared_of(handle)
    kda._core.commit(conv_state, state, correction, key_gate, pending, slots, record_rows, counts,
                     _kd._resolve_stream(None, state))


@_commit_op.register_fake
def _commit_fake(handle, conv_state, state, correction, key_gate, pending, slots, record_rows, counts) -> None:
    return None


@torch.library.custom_op("kda_decode::flush", mutates_args=("state", "pending"))
def _flush_op(
    handle: int,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    correction: torch.Tensor,
    key_gate: torch.Tensor,
    pending: torch.Tensor,
    slots: torch.Tensor,
    record_rows: Optional[torch.Tensor],
) -> None:
    kda = prepared_of(handle)
    kda._core.flush(conv_state, state, correction, key_gate, pending, slots, record_rows,
                    _kd._resolve_stream(None, state))


@_flush_op.register_fake
def _flush_fake(handle, conv_state, state, correction, key_gate, pending, slots, record_rows) -> None:
    return None


#: The op overloads, e.g. for ``torch.library.opcheck(OPS["run"], args)``.
OPS = {
    "run": torch.ops.kda_decode.run.default,
    "run_views": torch.ops.kda_decode.run_views.default,
    "commit": torch.ops.kda_decode.commit.default,
    "flush": torch.ops.kda_decode.flush.default,
}


# ---------------------------------------------------------------------------------------
# wrappers (traceable by torch.compile: attribute reads and an op call only)
# ---------------------------------------------------------------------------------------
def _caches(caches):
    """(conv_state, state, correction, key_gate, pending) of a Caches or a dict."""
    if isinstance(caches, _kd.Caches):
        return caches.conv_state, caches.state, caches.correction, caches.key_gate, caches.pending
    if isinstance(caches, dict):
        for k in caches:
            if k not in _kd._CACHE_KEYS:
                raise ValueError(f"caches: unknown key {k!r} (expected {', '.join(_kd._CACHE_KEYS)})")
        return (caches.get("conv_state"), caches.get("state"), caches.get("correction"), caches.get("key_gate"),
                caches.get("pending"))
    raise TypeError(f"caches: expected a kda_decode.Caches or a dict, got {type(caches).__name__}")


def _check_step(q, mode):
    if isinstance(q, bool) or not isinstance(q, int):
        raise TypeError(f"q: expected an int in [1, {_kd.MAX_Q}], got {type(q).__name__}")
    if mode not in _kd.MODES:
        raise ValueError(f"mode: expected one of {', '.join(_kd.MODES)}, got {mode!r}")


def run(kda, projected, out, caches, slots, *, q: int = 1, accepted=None, out_slots=None, record_rows=None,
        mode: str = "decode") -> None:
    """:meth:`kda_decode.PreparedKda.run` through the ``kda_decode::run`` op.

    Args:
        kda: the :class:`~kda_decode.PreparedKda` (CPU or CUDA, as the tensors).
        projected: ``[B·q, pitch]`` bf16 packed projection (unit inner stride).
        out: ``[B·q, D]`` bf16, written.
        caches: :class:`~kda_decode.Caches` or dict of torch tensors (windows, state,
            records, pending), updated in place.
        slots: int32 slot ids (``[≥B]``; per_token ``[≥B, ≥q]``).
        q, accepted, out_slots, record_rows, mode: as :meth:`PreparedKda.run`.
    Launches on the current CUDA stream (CUDA tensors). Allocates nothing, never
    synchronises; capturable in a CUDA graph and traceable by ``torch.compile``.
    Raises:
        TypeError / ValueError: operand errors (message names the operand).
        RuntimeError: ``kda`` is not alive any more (see :func:`prepared_of`).
    """
    _check_step(q, mode)
    cs, st, cr, kg, pd = _caches(caches)
    torch.ops.kda_decode.run(kda._handle, projected, out, cs, st, cr, kg, pd, slots, q, mode, accepted, out_slots,
                             record_rows)


def run_views(kda, qkv, out_gate, gate_in, beta, out, caches, slots, *, q: int = 1, accepted=None,
              out_slots=None, record_rows=None, mode: str = "decode") -> None:
    """:meth:`kda_decode.PreparedKda.run_views` through the ``kda_decode::run_views`` op.

    Args:
        qkv: ``[rows, 3D]``, out_gate: ``[rows, D]``, gate_in: ``[rows, R]`` (gate modes
            0/1) or ``[rows, D]`` (mode 2), beta: ``[rows, H]`` — bf16, unit inner stride,
            any row stride. Other arguments as :func:`run`.
    Raises:
        As :func:`run`.
    """
    _check_step(q, mode)
    cs, st, cr, kg, pd = _caches(caches)
    torch.ops.kda_decode.run_views(kda._handle, qkv, out_gate, gate_in, beta, out, cs, st, cr, kg, pd, slots, q,
                                   mode, accepted, out_slots, record_rows)


def commit(kda, caches, slots, record_rows, counts) -> None:
    """:meth:`kda_decode.PreparedKda.commit` through the ``kda_decode::commit`` op.

    Args:
        caches: needs state, correction and key_gate (state is written).
        slots: ``[B]`` int32 checkpoints; record_rows: ``[≥B]`` int32 or None; counts:
            ``[≥B]`` int32 in [0, Qr].
    Raises:
        As :func:`run`.
    """
    cs, st, cr, kg, pd = _caches(caches)
    torch.ops.kda_decode.commit(kda._handle, cs, st, cr, kg, pd, slots, record_rows, counts)


def flush(kda, caches, slots, record_rows=None) -> None:
    """:meth:`kda_decode.PreparedKda.flush` through the ``kda_decode::flush`` op.

    Args:
        caches: needs state, correction, key_gate and pending (state and pending are
            written). slots / record_rows: as :func:`commit`.
    Raises:
        As :func:`run`.
    """
    cs, st, cr, kg, pd = _caches(caches)
    torch.ops.kda_decode.flush(kda._handle, cs, st, cr, kg, pd, slots, record_rows)


def from_module(attention, policies=None, **kw) -> "_kd.PreparedKda":
    """Same as :meth:`kda_decode.PreparedKda.from_module` (vLLM ``KimiK3DeltaAttention`` names)."""
    return _kd.PreparedKda.from_module(attention, policies, **kw)


# PreparedKda methods route through the ops while torch.compile traces them.
_kd._TORCH_OPS = sys.modules[__name__]
