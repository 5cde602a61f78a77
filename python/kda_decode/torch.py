"""kda_decode.torch — torch custom ops over the prepared KDA core (``torch.library``).

Importing this module (it imports torch; ``import kda_decode`` alone never does) registers
four ops in the ``kda_decode`` namespace::

    torch.ops.kda_decode.run(handle, projected, out!, conv_state!, state!, correction!?,
                             key_gate!?, pending!?, slots, q, step_mode, accepted?, out_slots?,
                             record_rows?) -> ()
    torch.ops.kda_decode.run_views(handle, qkv, out_gate?, gate_in, beta, out!, conv_state!,
                                   state!, correction!?, key_gate!?, pending!?, slots, q,
                                   step_mode, accepted?, out_slots?, record_rows?) -> ()
    torch.ops.kda_decode.commit(handle, conv_state, state!, correction, key_gate, pending?,
                                slots, record_rows?, counts) -> ()
    torch.ops.kda_decode.flush(handle, conv_state, state!, correction, key_gate, pending!,
                               slots, record_rows?) -> ()

(``!`` = mutated in place, declared to torch; ``?`` = optional: ``out_gate`` may be None for a
layer built with ``output_norm=False``.) ``step_mode`` is one of ``kda_decode.MODES``
(``decode``, ``append``, ``per_token``, ``record``, ``fused``). ``handle`` is the integer
id of a live :class:`kda_decode.PreparedKda` (``kda._handle``): op arguments can only be
tensors and scalars, so the object is looked up by id. Every op has a fake (meta)
implementation that returns nothing, so the ops trace under ``torch.compile`` (also with
``fullgraph=True``) and pass ``torch.library.opcheck``.

Use the wrappers below (same arguments as the :class:`~kda_decode.PreparedKda` methods,
the object first) or simply call the methods: while this module is imported,
``PreparedKda.run / run_views / commit / flush`` go through these ops when torch.compile
traces them (the methods look this module up; it writes nothing into the package), and
call the extension directly otherwise (no dispatcher cost in eager mode).

Under torch.compile the methods' ``stream`` argument is ignored: the ops launch on the
current stream (use ``with torch.cuda.stream(s):`` around the compiled call instead).

Devices: a PreparedKda built from CPU tensors runs the CPU backend on CPU tensors; one
built from CUDA tensors runs the CUDA backend and launches on
``torch.cuda.current_stream()`` of the tensors' device (what CUDA-graph capture and
torch.compile expect). Mixing devices raises ``DeviceError`` (a ValueError) naming the operand.

Errors: as the methods, raised when the op runs (the fake implementations do not
validate); data errors are read with ``kda.status()`` (not an op: it synchronises the stream).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from .arguments import cache_fields, native_caches, step_args
from .prepared import PreparedKda, prepared_of

__all__ = ["OPS", "commit", "compiling", "flush", "from_module", "prepared_of", "run", "run_views", "step"]

# Mutated arguments (declared to torch). Records and pending are declared for every mode:
# record / fused / append steps write them; decode and per-token steps leave them untouched.
_STEP_MUTATES = ("out", "conv_state", "state", "correction", "key_gate", "pending")


def compiling() -> bool:
    """True while torch.compile traces the caller."""
    return bool(torch.compiler.is_compiling())


def _stream(t: torch.Tensor) -> int:
    return int(torch.cuda.current_stream(t.device).cuda_stream) if t.is_cuda else 0


def _caches(conv_state: Any, state: Any, correction: Any, key_gate: Any, pending: Any) -> Any:
    return native_caches(
        dict(conv_state=conv_state, state=state, correction=correction, key_gate=key_gate, pending=pending)
    )


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
    args = step_args(slots, q, step_mode, accepted, out_slots, record_rows, _stream(projected))
    prepared_of(handle)._core.run(projected, out, _caches(conv_state, state, correction, key_gate, pending), args)


@_run_op.register_fake
def _run_fake(
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
    return None


@torch.library.custom_op("kda_decode::run_views", mutates_args=_STEP_MUTATES)
def _run_views_op(
    handle: int,
    qkv: torch.Tensor,
    out_gate: Optional[torch.Tensor],
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
    args = step_args(slots, q, step_mode, accepted, out_slots, record_rows, _stream(qkv))
    prepared_of(handle)._core.run_views(
        qkv, out_gate, gate_in, beta, out, _caches(conv_state, state, correction, key_gate, pending), args
    )


@_run_views_op.register_fake
def _run_views_fake(
    handle: int,
    qkv: torch.Tensor,
    out_gate: Optional[torch.Tensor],
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
    prepared_of(handle)._core.commit(
        _caches(conv_state, state, correction, key_gate, pending), slots, record_rows, counts, _stream(state)
    )


@_commit_op.register_fake
def _commit_fake(
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
    prepared_of(handle)._core.flush(
        _caches(conv_state, state, correction, key_gate, pending), slots, record_rows, _stream(state)
    )


@_flush_op.register_fake
def _flush_fake(
    handle: int,
    conv_state: torch.Tensor,
    state: torch.Tensor,
    correction: torch.Tensor,
    key_gate: torch.Tensor,
    pending: torch.Tensor,
    slots: torch.Tensor,
    record_rows: Optional[torch.Tensor],
) -> None:
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
def step(
    kda: PreparedKda,
    inputs: Tuple[Any, ...],
    out: Any,
    caches: Any,
    slots: Any,
    *,
    q: int = 1,
    accepted: Any = None,
    out_slots: Any = None,
    record_rows: Any = None,
    mode: str = "decode",
) -> None:
    """The op behind :meth:`PreparedKda._step`: ``run`` for ``inputs = (projected,)``,
    ``run_views`` for the four views."""
    cs, st, cr, kg, pd = cache_fields(caches)
    if len(inputs) == 1:
        torch.ops.kda_decode.run(
            kda._handle, inputs[0], out, cs, st, cr, kg, pd, slots, q, mode, accepted, out_slots, record_rows
        )
    else:
        torch.ops.kda_decode.run_views(
            kda._handle, *inputs, out, cs, st, cr, kg, pd, slots, q, mode, accepted, out_slots, record_rows
        )


def run(
    kda: PreparedKda,
    projected: Any,
    out: Any,
    caches: Any,
    slots: Any,
    *,
    q: int = 1,
    accepted: Any = None,
    out_slots: Any = None,
    record_rows: Any = None,
    mode: str = "decode",
) -> None:
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
        As :meth:`PreparedKda.run`; RuntimeError: ``kda`` is not alive any more.
    """
    step(
        kda,
        (projected,),
        out,
        caches,
        slots,
        q=q,
        accepted=accepted,
        out_slots=out_slots,
        record_rows=record_rows,
        mode=mode,
    )


def run_views(
    kda: PreparedKda,
    qkv: Any,
    out_gate: Any,
    gate_in: Any,
    beta: Any,
    out: Any,
    caches: Any,
    slots: Any,
    *,
    q: int = 1,
    accepted: Any = None,
    out_slots: Any = None,
    record_rows: Any = None,
    mode: str = "decode",
) -> None:
    """:meth:`kda_decode.PreparedKda.run_views` through the ``kda_decode::run_views`` op.

    Args:
        qkv: ``[rows, 3D]``, out_gate: ``[rows, D]`` (None for a layer without the output
            norm), gate_in: ``[rows, R]`` (gate modes 0/1) or ``[rows, D]`` (mode 2), beta:
            ``[rows, H]`` — bf16, unit inner stride, any row stride. Other arguments as
            :func:`run`.
    Raises:
        As :func:`run`.
    """
    step(
        kda,
        (qkv, out_gate, gate_in, beta),
        out,
        caches,
        slots,
        q=q,
        accepted=accepted,
        out_slots=out_slots,
        record_rows=record_rows,
        mode=mode,
    )


def commit(kda: PreparedKda, caches: Any, slots: Any, record_rows: Any, counts: Any) -> None:
    """:meth:`kda_decode.PreparedKda.commit` through the ``kda_decode::commit`` op.

    Args:
        caches: needs state, correction and key_gate (state is written).
        slots: ``[B]`` int32 checkpoints; record_rows: ``[≥B]`` int32 or None; counts:
            ``[≥B]`` int32 in [0, Qr].
    Raises:
        As :func:`run`.
    """
    cs, st, cr, kg, pd = cache_fields(caches)
    torch.ops.kda_decode.commit(kda._handle, cs, st, cr, kg, pd, slots, record_rows, counts)


def flush(kda: PreparedKda, caches: Any, slots: Any, record_rows: Any = None) -> None:
    """:meth:`kda_decode.PreparedKda.flush` through the ``kda_decode::flush`` op.

    Args:
        caches: needs state, correction, key_gate and pending (state and pending are
            written). slots / record_rows: as :func:`commit`.
    Raises:
        As :func:`run`.
    """
    cs, st, cr, kg, pd = cache_fields(caches)
    torch.ops.kda_decode.flush(kda._handle, cs, st, cr, kg, pd, slots, record_rows)


def from_module(attention: Any, policies: Any = None, **kw: Any) -> PreparedKda:
    """Same as :meth:`kda_decode.PreparedKda.from_module` (vLLM ``KimiK3DeltaAttention`` names)."""
    return PreparedKda.from_module(attention, policies, **kw)
