"""kda_decode — the prepared Kimi Delta Attention (KDA) decode core for LLM serving.

One fused step takes, per token, the outputs of the layer's input projection and produces
the attention output, updating the request's short-conv window and recurrent state in
place (decode, and the speculative-decoding verify modes ``per_token``, ``record`` and
``fused``; see the project's SPEC).

Quick start (numpy, CPU backend)::

    import numpy as np, kda_decode as kd
    kda = kd.PreparedKda(conv_weight=cw, A_log=a_log, dt_bias=dtb, norm_weight=nw,
                         f_b_weight=fb, conv_dim_first=False)
    caches = kd.Caches(conv_state=conv, state=state)
    kda.prepare(caches)
    kda.run(projected, out, caches, slots)           # decode, q = 1
    st = kda.status()                                # caller errors found in the data
    assert st.ok, st.describe()

Tensors
-------
Every tensor argument is taken without a copy through DLPack: numpy arrays (CPU backend),
torch tensors on the CPU or on CUDA (CUDA backend, when built), or any object exporting
``__dlpack__``. bf16 operands: torch ``bfloat16`` tensors, or — since numpy has no bf16 —
``uint16`` arrays holding bf16 bit patterns (an ``ml_dtypes.bfloat16`` numpy array is
viewed as such). :func:`float32_to_bf16` / :func:`bf16_to_float32` convert numpy data.

Errors
------
Host-side operand errors (dtype, rank, shape, strides, device, q outside [1, 16], a
window too small for q) raise ``TypeError`` (wrong dtype or not a tensor) or
``ValueError`` (everything else); the message names the operand, what was expected and
what came. Errors in the *data* (slot ids, accepted counts, pending counts) never raise:
the offending request is treated as a pad and :meth:`PreparedKda.status` reports them.

torch is never imported by this package unless a torch tensor is passed in.

Serving engines
---------------
``import kda_decode.torch`` registers torch custom ops (``torch.ops.kda_decode.run`` ...;
``torch.compile``, ``torch.library.opcheck``; the methods below then trace under
torch.compile). :meth:`PreparedKda.from_module` reads a vLLM ``KimiK3DeltaAttention``-style
module; ``kda_decode.vllm.fused_kda_decode`` is a drop-in for vLLM's
``ops.fused_kda_decode``.
"""
from __future__ import annotations

import dataclasses
import itertools
import sys
import weakref
from typing import Any, Mapping, Optional, Tuple, Union

import numpy as np

from . import _core
from ._core import Policy, Status

from ._version import __version__  # written once, in _version.py (pyproject and CMake read it too)

__all__ = [
    "PreparedKda",
    "Caches",
    "Policy",
    "Status",
    "cuda_built",
    "decode_conv_weight",
    "stream_layout",
    "stream_ctas",
    "deferred_supported",
    "replays",
    "float32_to_bf16",
    "bf16_to_float32",
    "HEAD_DIM",
    "RANK",
    "MAX_Q",
    "SLOT_RANGE",
    "ROW_RANGE",
    "ACCEPTED",
    "PENDING",
    "PAD_START",
    "MODES",
]

#: K = V = 128 (head dimension).
HEAD_DIM: int = _core.HEAD_DIM
#: R = 128, rank of the low-rank gate projection.
RANK: int = _core.RANK
#: Largest number of tokens per request in one step.
MAX_Q: int = _core.MAX_Q
#: Error flags reported by :meth:`PreparedKda.status` (also ``Status.SLOT_RANGE`` etc.).
SLOT_RANGE: int = _core.SLOT_RANGE
ROW_RANGE: int = _core.ROW_RANGE
ACCEPTED: int = _core.ACCEPTED
PENDING: int = _core.PENDING
PAD_START: int = _core.PAD_START
#: The step modes.
MODES = ("decode", "append", "per_token", "record", "fused")

_KEEP = object()  # "keep the current value" default of process_weights_after_loading

# Live PreparedKda objects by integer handle: the torch custom ops (kda_decode.torch) take
# the handle, not the object (an op's arguments must be tensors and scalars).
_LIVE: "weakref.WeakValueDictionary[int, PreparedKda]" = weakref.WeakValueDictionary()
_NEXT_HANDLE = itertools.count(1)
# Set to the kda_decode.torch module when it is imported: while torch.compile traces,
# PreparedKda.run / run_views / commit / flush go through its custom ops.
_TORCH_OPS = None


def _traced_ops():
    """kda_decode.torch when torch.compile is tracing the caller, else None."""
    ops = _TORCH_OPS
    if ops is not None and ops._compiling():
        return ops
    return None


def cuda_built() -> bool:
    """Whether the extension was built with the CUDA backend.

    ``False`` for a ``KDA_CPU_ONLY=1`` build or a build where nvcc was not found; then
    only CPU tensors are accepted (CUDA tensors raise ``RuntimeError`` at construction).
    """
    return bool(_core.cuda_built())


# ---------------------------------------------------------------------------------------
# numpy bf16 helpers
# ---------------------------------------------------------------------------------------
def float32_to_bf16(x) -> np.ndarray:
    """Rounds a float array to bf16 (nearest even; NaN stays NaN), as uint16 bit patterns.

    Args:
        x: array-like of any float dtype (converted to float32 first).
    Returns:
        ``np.ndarray`` of dtype uint16, same shape: the bf16 bit patterns this package
        accepts for bf16 operands.
    """
    f = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x0040).astype(np.uint16), rounded)
    return rounded


def bf16_to_float32(b) -> np.ndarray:
    """Decodes bf16 bit patterns (uint16 / int16 array) to float32 exactly.

    Args:
        b: array of dtype uint16 or int16 (or an ``ml_dtypes.bfloat16`` array).
    Returns:
        ``np.ndarray`` float32 of the same shape.
    Raises:
        TypeError: ``b`` is not a 16-bit array.
    """
    a = np.asarray(b)
    if a.dtype.itemsize != 2:
        raise TypeError(f"bf16_to_float32: expected a 16-bit array of bf16 bit patterns, got dtype {a.dtype}")
    return (np.ascontiguousarray(a).view(np.uint16).astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------------------------------
# tensors, caches, streams
# ---------------------------------------------------------------------------------------
def _t(x):
    """Adapts a tensor for the extension: numpy ml_dtypes bfloat16 arrays become uint16 views."""
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.view(np.uint16)
    return x


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch")


@dataclasses.dataclass
class Caches:
    """The caches a step reads and writes (SPEC §2). ``dict`` with these keys also works.

    Attributes:
        conv_state: conv windows, bf16 or fp32. ``conv_dim_first=True`` (DS):
            ``[slots, 3D, window]``; ``False`` (SD, vLLM's default): ``[slots, window, 3D]``.
            Any slot stride.
        state: recurrent state ``[slots, H, V=128, K=128]`` fp32 (or bf16), inner
            ``[H, V, K]`` dense, any slot stride ≥ H·V·K.
        correction: records ``u`` ``[rows_r, H, Qr, V]`` fp32 (record / fused / commit /
            flush only). Inner dense, any row stride.
        key_gate: records ``(k, g)`` ``[rows_r, H, Qr, 2K]`` fp32 (with ``correction``).
        pending: ``[rows_r]`` int32, records waiting to be folded (fused steps and flush).
    """

    conv_state: Any
    state: Any
    correction: Any = None
    key_gate: Any = None
    pending: Any = None


_CACHE_KEYS = ("conv_state", "state", "correction", "key_gate", "pending")


def _caches_tuple(caches) -> Tuple[Any, Any, Any, Any, Any]:
    if isinstance(caches, Caches):
        vals = (caches.conv_state, caches.state, caches.correction, caches.key_gate, caches.pending)
    elif isinstance(caches, Mapping):
        unknown = set(caches) - set(_CACHE_KEYS)
        if unknown:
            raise ValueError(f"caches: unknown keys {sorted(unknown)} (expected {', '.join(_CACHE_KEYS)})")
        for k in ("conv_state", "state"):
            if caches.get(k) is None:
                raise ValueError(f"caches: '{k}' is required")
        vals = tuple(caches.get(k) for k in _CACHE_KEYS)
    else:
        raise TypeError(f"caches: expected a kda_decode.Caches or a dict, got {type(caches).__name__}")
    return tuple(_t(v) for v in vals)  # type: ignore[return-value]


def _resolve_stream(stream, probe) -> int:
    """The cudaStream_t handle (int) a call launches on.

    None: the current torch stream of ``probe``'s device when ``probe`` is a CUDA torch
    tensor, else 0 (the default stream; ignored by the CPU backend). An int is taken as a
    raw handle; an object with ``cuda_stream`` (torch.cuda.Stream) or ``ptr`` (cupy) gives
    its handle.
    """
    if stream is None:
        if probe is not None and _is_torch(probe) and getattr(probe, "is_cuda", False):
            torch = sys.modules.get("torch")
            if torch is None:  # pragma: no cover - a torch tensor implies torch is imported
                import torch  # noqa: F811
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


def _policy_of(p, where: str) -> Policy:
    if p is None:
        return Policy()
    if isinstance(p, Policy):
        return p
    if isinstance(p, Mapping):
        return Policy(**p)
    raise TypeError(f"{where}: expected a kda_decode.Policy (or a dict of its fields), got {type(p).__name__}")


def _policy_list(policies):
    if policies is None:
        return []
    if not isinstance(policies, Mapping):
        raise TypeError(f"policies: expected a dict {{(mode, B, q): Policy}}, got {type(policies).__name__}")
    out = []
    for key, pol in policies.items():
        if not (isinstance(key, tuple) and len(key) == 3):
            raise TypeError(f"policies: keys are (mode, B, q) tuples, got {key!r}")
        mode, B, q = key
        if mode not in MODES:
            raise ValueError(f"policies: mode of key {key!r} must be one of {', '.join(MODES)}")
        if not isinstance(B, (int, np.integer)) or not isinstance(q, (int, np.integer)):
            raise TypeError(f"policies: B and q of key {key!r} must be ints")
        out.append((mode, int(B), int(q), _policy_of(pol, f"policies[{key!r}]")))
    return out


def _check_q(q) -> int:
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)):
        raise TypeError(f"q: expected an int in [1, {MAX_Q}], got {type(q).__name__}")
    q = int(q)
    if q < 1 or q > MAX_Q:
        raise ValueError(f"q: expected tokens per request in [1, {MAX_Q}], got {q}")
    return q


def _check_mode(mode, q: Optional[int] = None) -> str:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    if mode in ("decode", "append") and q is not None and q != 1:
        raise ValueError(f"q: {mode} steps have q = 1, got {q} (use mode='per_token' for verify steps)")
    return mode


# ---------------------------------------------------------------------------------------
# PreparedKda
# ---------------------------------------------------------------------------------------
class PreparedKda:
    """The prepared KDA decode core of one layer (SPEC §5).

    Constructor (keyword arguments only; H = number of heads, D = 128·H, W = conv taps):
        conv_weight: ``[3D, 1, W]`` fp32 or bf16 — nn.Conv1d depthwise weight of the packed
            q|k|v conv. Copied (to the decode layout ``[3, W, D]`` fp32).
        A_log: ``[H]`` fp32. Fixes H and the device (CPU tensor → CPU backend, CUDA tensor
            → CUDA backend). Borrowed.
        dt_bias: ``[D]`` fp32. Borrowed.
        norm_weight: ``[K=128]`` any float dtype. Copied as fp32.
        f_b_weight: ``[D, R=128]`` bf16, nn.Linear(R, D).weight, or None (then only gate
            mode 2 runs). Borrowed.
        conv_bias: ``[3D]`` fp32 or None. Borrowed.
        eps: RMSNorm epsilon (> 0).
        lower_bound: None (softplus gate) or a float in [-5, 0) (lower-bound gate).
        policies: ``{(mode, B, q): Policy}``; mode in ``MODES``. Keys not listed are planned
            on first use from ``default_policy``.
        conv_dim_first: True = DS conv windows ``[slots, 3D, window]``; False = SD
            ``[slots, window, 3D]`` (vLLM's default).
        null_slot: pad slot id besides negatives (vLLM's NULL_BLOCK_ID = 0); -1 = none.
        default_policy: Policy for unlisted keys (default ``Policy()``: auto).

    The C++ object borrows A_log, dt_bias, f_b_weight and conv_bias: this wrapper keeps
    Python references to them, so they stay alive and at the same address as long as the
    object lives. Reload weights in place and call :meth:`process_weights_after_loading`.

    Raises:
        TypeError: a weight has the wrong dtype or is not a tensor.
        ValueError: a weight has the wrong shape, rank, strides or device; bad eps,
            lower_bound, null_slot or policies.
        RuntimeError: CUDA weights but the extension was built without CUDA.
    """

    def __init__(
        self,
        *,
        conv_weight,
        A_log,
        dt_bias,
        norm_weight,
        f_b_weight=None,
        conv_bias=None,
        eps: float = 1e-5,
        lower_bound: Optional[float] = None,
        policies: Optional[Mapping[Tuple[str, int, int], Any]] = None,
        conv_dim_first: bool = False,
        null_slot: int = 0,
        default_policy: Optional[Policy] = None,
    ):
        weights = dict(
            conv_weight=_t(conv_weight),
            A_log=_t(A_log),
            dt_bias=_t(dt_bias),
            norm_weight=_t(norm_weight),
            f_b_weight=_t(f_b_weight),
            conv_bias=_t(conv_bias),
        )
        pol = _policy_list(policies)
        dflt = _policy_of(default_policy, "default_policy")
        self._core = _core.PreparedKda(
            weights["conv_weight"],
            weights["A_log"],
            weights["dt_bias"],
            weights["norm_weight"],
            weights["f_b_weight"],
            weights["conv_bias"],
            float(eps),
            None if lower_bound is None else float(lower_bound),
            pol,
            bool(conv_dim_first),
            int(null_slot),
            dflt,
        )
        # Keep the borrowed (and copied) weights alive: the C++ object holds their addresses.
        self._weights = weights
        self._eps = float(eps)
        self._lower_bound = None if lower_bound is None else float(lower_bound)
        self._policies = {(m, B, q): p for (m, B, q, p) in pol}
        self._default_policy = dflt
        self._conv_dim_first = bool(conv_dim_first)
        self._null_slot = int(null_slot)
        self._module_opts = None  # set by from_module: how to read the module again
        self._handle = next(_NEXT_HANDLE)
        _LIVE[self._handle] = self

    # ---- properties ------------------------------------------------------------------
    @property
    def heads(self) -> int:
        """H, the number of heads."""
        return self._core.heads

    @property
    def taps(self) -> int:
        """W, the number of conv taps."""
        return self._core.taps

    @property
    def device(self) -> str:
        """'cpu' or 'cuda': the backend (from the weights' device)."""
        return self._core.device

    @property
    def device_info(self) -> dict:
        """The device facts the planner uses: sms, cc, smem_optin, clusters."""
        return self._core.device_info

    @property
    def conv_dim_first(self) -> bool:
        """True for DS conv windows ``[slots, 3D, window]``, False for SD."""
        return self._conv_dim_first

    @property
    def null_slot(self) -> int:
        """The pad slot id besides negatives (-1: none)."""
        return self._null_slot

    @property
    def eps(self) -> float:
        """RMSNorm epsilon."""
        return self._eps

    @property
    def lower_bound(self) -> Optional[float]:
        """None (softplus gate) or the lower bound of the lower-bound gate."""
        return self._lower_bound

    @property
    def policies(self) -> dict:
        """A copy of ``{(mode, B, q): Policy}`` given at construction."""
        return dict(self._policies)

    def __repr__(self) -> str:
        return (
            f"PreparedKda(H={self.heads}, W={self.taps}, device='{self.device}', "
            f"conv_dim_first={self._conv_dim_first}, null_slot={self._null_slot}, "
            f"gate={'softplus' if self._lower_bound is None else f'lower_bound={self._lower_bound}'}, "
            f"policies={len(self._policies)})"
        )

    # ---- planning ----------------------------------------------------------------------
    def prepare(self, caches) -> None:
        """Plans every policy key for these caches and validates them (SPEC §5).

        Args:
            caches: :class:`Caches` or dict (conv_state, state, correction, key_gate,
                pending). Records are required when a policy key is a record/fused step;
                pending when one is fused.
        Raises:
            TypeError / ValueError: a cache has the wrong dtype, shape, strides or device;
                the window is too small for a policy's q (window ≥ W−2+q); Qr < q; a forced
                variant cannot run a key on this device.
        """
        self._core.prepare(*_caches_tuple(caches))

    def plan(self, mode: str, B: int, q: int, caches) -> dict:
        """The plan for step key (mode, B, q) (planned from the default policy if new).

        Returns:
            dict with mode, B, q, variant ('cpu', 'split', 'wide', ...), gate_mode (0, 1, 2),
            split, threads, ctas, smem (bytes), pitch, fused_one_launch, description (str).
        Raises:
            ValueError: unknown mode, q outside [1, 16], or a policy that cannot run.
        """
        _check_mode(mode)
        return self._core.plan(mode, int(B), _check_q(q), *_caches_tuple(caches))

    # ---- steps -------------------------------------------------------------------------
    def run(
        self,
        projected,
        out,
        caches,
        slots,
        *,
        q: int = 1,
        accepted=None,
        out_slots=None,
        record_rows=None,
        mode: str = "decode",
        stream=None,
    ) -> None:
        """One step from the packed projection (SPEC §2-§4).

        Args:
            projected: ``[rows, pitch]`` bf16, rows = B·q, unit inner stride, row stride ≥
                pitch. Columns: qkv ``[0, 3D)`` · out_gate ``[3D, 4D)`` · gate_in
                ``[4D, 4D+R)`` (gate mode 2: ``[4D, 5D)``) · beta (H columns) · padding.
            out: ``[rows, D]`` bf16, written (any row stride ≥ D).
            caches: :class:`Caches` or dict; windows and state updated in place.
            slots: int32. decode ``[≥B]``; per_token ``[≥B, ≥q]`` (state after token t goes
                to column t); record / fused ``[≥B]`` or ``[≥B, 1]`` (the checkpoint). Any
                strides (a block-table column slice is fine).
            q: tokens per request, 1..16 (decode: 1).
            accepted: ``[≥B]`` int32 or None (all 1): tokens of the previous step accepted.
            out_slots: ``[≥B]`` int32 or None (decode only): where the new state and window go.
            record_rows: ``[≥B]`` int32 or None (record / fused only; default the checkpoint).
            mode: 'decode', 'append' (decode with a deferred state write: the state is
                written once every Qr steps, SPEC §4), 'per_token', 'record' or 'fused'.
            stream: None (current torch stream for CUDA tensors, else 0), an int
                cudaStream_t, or a torch.cuda.Stream.
        Raises:
            TypeError / ValueError: host-side operand errors (message names the operand).
            Errors in the data are not raised: see :meth:`status`.
        """
        ops = _traced_ops()
        if ops is not None:  # torch.compile: the custom op (current stream; `stream` ignored)
            return ops.run(self, projected, out, caches, slots, q=q, accepted=accepted, out_slots=out_slots,
                           record_rows=record_rows, mode=mode)
        q = _check_q(q)
        _check_mode(mode, q)
        projected = _t(projected)
        self._core.run(
            projected,
            _t(out),
            *_caches_tuple(caches),
            slots,
            q,
            mode,
            accepted,
            out_slots,
            record_rows,
            _resolve_stream(stream, projected),
        )

    def run_views(
        self,
        qkv,
        out_gate,
        gate_in,
        beta,
        out,
        caches,
        slots,
        *,
        q: int = 1,
        accepted=None,
        out_slots=None,
        record_rows=None,
        mode: str = "decode",
        stream=None,
    ) -> None:
        """As :meth:`run`, from four separate row-strided input views (vLLM's buffers).

        Args:
            qkv: ``[rows, 3D]`` bf16 (q | k | v before the conv).
            out_gate: ``[rows, D]`` bf16.
            gate_in: ``[rows, R=128]`` bf16 (f_a; gate modes 0, 1) or ``[rows, D]`` (gate
                mode 2: F_B·f_a precomputed, dt_bias not included).
            beta: ``[rows, H]`` bf16 beta logits.
            Each view: unit inner stride, any row stride. Other arguments as :meth:`run`.
        Raises:
            TypeError / ValueError: as :meth:`run`.
        """
        ops = _traced_ops()
        if ops is not None:  # torch.compile: the custom op (current stream; `stream` ignored)
            return ops.run_views(self, qkv, out_gate, gate_in, beta, out, caches, slots, q=q, accepted=accepted,
                                 out_slots=out_slots, record_rows=record_rows, mode=mode)
        q = _check_q(q)
        _check_mode(mode, q)
        qkv = _t(qkv)
        self._core.run_views(
            qkv,
            _t(out_gate),
            _t(gate_in),
            _t(beta),
            _t(out),
            *_caches_tuple(caches),
            slots,
            q,
            mode,
            accepted,
            out_slots,
            record_rows,
            _resolve_stream(stream, qkv),
        )

    def commit(self, caches, slots, record_rows, counts, *, stream=None) -> None:
        """Folds the first ``counts[b]`` records of each request's row into its checkpoint.

        ``S = S·exp(g_t); S = fma(u_t, k_t, S)`` for t < counts[b] (SPEC §4). Never touches
        the conv window or ``pending``.

        Args:
            caches: needs state, correction, key_gate (conv_state is validated too).
            slots: ``[B]`` (or ``[B, ≥1]``) int32 checkpoint slots; pad ids are skipped.
            record_rows: ``[≥B]`` int32 or None (the checkpoint slot is the row).
            counts: ``[≥B]`` int32, each in [0, Qr] (else PENDING is flagged).
            stream: as :meth:`run`.
        Raises:
            TypeError / ValueError: host-side operand errors.
        """
        ops = _traced_ops()
        if ops is not None:  # torch.compile: the custom op
            return ops.commit(self, caches, slots, record_rows, counts)
        c = _caches_tuple(caches)
        self._core.commit(*c, slots, record_rows, counts, _resolve_stream(stream, c[1]))

    def flush(self, caches, slots, record_rows=None, *, stream=None) -> None:
        """:meth:`commit` with counts = ``pending[row]``, then sets ``pending[row] = 0``.

        Args:
            caches: needs state, correction, key_gate and pending.
            slots: ``[B]`` (or ``[B, ≥1]``) int32 checkpoint slots.
            record_rows: ``[≥B]`` int32 or None (the checkpoint slot is the row).
            stream: as :meth:`run`.
        Raises:
            TypeError / ValueError: host-side operand errors (e.g. no ``pending``).
        """
        ops = _traced_ops()
        if ops is not None:  # torch.compile: the custom op
            return ops.flush(self, caches, slots, record_rows)
        c = _caches_tuple(caches)
        self._core.flush(*c, slots, record_rows, _resolve_stream(stream, c[1]))

    def status(self, stream=None) -> Status:
        """Caller errors found in the data since the last call; clears them (SPEC §4).

        On CUDA this synchronises ``stream`` (None: the current torch stream of the layer's
        device). Returns a :class:`Status` with ``.flags`` (OR of SLOT_RANGE=1,
        ROW_RANGE=2, ACCEPTED=4, PENDING=8, PAD_START=16), ``.first_request`` (lowest
        offending request index, -1 if none) and ``.ok``.
        """
        return self._core.status(_resolve_stream(stream, self._weights["A_log"]))

    @classmethod
    def from_module(
        cls,
        attention,
        policies: Optional[Mapping[Tuple[str, int, int], Any]] = None,
        *,
        conv_dim_first: bool = False,
        null_slot: int = 0,
        default_policy: Optional[Policy] = None,
        precomputed_gate: bool = False,
    ) -> "PreparedKda":
        """Builds the prepared core from a KDA attention module (vLLM ``KimiK3DeltaAttention`` names).

        Reads (H = heads of this tensor-parallel shard, D = 128·H, W = conv taps):

        - ``attention.conv1d.weight``: ``[3D, 1, W]`` (or ``[3D, W]``) fp32/bf16, packed q|k|v;
        - ``attention.conv1d.bias``: ``[3D]`` fp32, or None / absent;
        - ``attention.f_b_proj.weight``: ``[D, R=128]`` bf16 (not read with ``precomputed_gate``);
        - ``attention.A_log``: ``[H]`` fp32 (an older ``[1, 1, H, 1]`` is viewed as ``[H]``);
        - ``attention.dt_bias``: ``[D]`` fp32;
        - ``attention.o_norm.weight``: ``[128]``, any float dtype; ``o_norm.eps`` (else
          ``o_norm.variance_epsilon``, else 1e-5) is the RMSNorm eps;
        - ``attention.gate_lower_bound``: a float in [-5, 0), or None / absent (softplus gate).

        torch parameters are detached (same storage, so in-place reloads are seen). The
        borrowed weights (A_log, dt_bias, f_b_proj.weight, conv1d.bias) must stay at their
        addresses: reload them in place, then call :meth:`process_weights_after_loading`
        with the module to refresh the derived conv/norm copies.

        Args:
            attention: the module (any object with those attributes).
            policies, conv_dim_first, null_slot, default_policy: as the constructor.
                vLLM: ``conv_dim_first=is_conv_state_dim_first()`` (False by default: SD).
            precomputed_gate: True when the engine runs the F_B GEMM itself and passes the raw
                gate ``F_B·f_a`` (D wide, gate mode 2): ``f_b_proj`` is then not read (use it
                e.g. with a quantized ``f_b_proj``).
        Returns:
            A new :class:`PreparedKda` on the module's device.
        Raises:
            AttributeError: a required attribute is missing (the message names it).
            TypeError / ValueError: as the constructor (wrong dtype / shape of a weight).
        """
        w, eps, lb = _module_weights(attention, precomputed_gate)
        obj = cls(**w, eps=eps, lower_bound=lb, policies=policies, conv_dim_first=conv_dim_first,
                  null_slot=null_slot, default_policy=default_policy)
        obj._module_opts = dict(precomputed_gate=bool(precomputed_gate))
        return obj

    def process_weights_after_loading(
        self,
        attention=None,
        *,
        conv_weight=None,
        A_log=None,
        dt_bias=None,
        norm_weight=None,
        f_b_weight=None,
        conv_bias=None,
        eps: Optional[float] = None,
        lower_bound=_KEEP,
    ) -> None:
        """Recomputes the derived conv/norm copies in place after a weight (re)load.

        Either pass the attention module (as :meth:`from_module`; its ``o_norm`` eps and
        ``gate_lower_bound`` are read again unless ``eps`` / ``lower_bound`` are given), or
        the weights as keywords (same as the constructor; ``eps=None`` and an omitted
        ``lower_bound`` keep the current values). The derived copies keep their addresses,
        so captured CUDA graphs stay valid — provided the borrowed weights (A_log, dt_bias,
        f_b_weight, conv_bias) were reloaded in place (the same tensors, e.g.
        ``param.data.copy_(new)``).

        Raises:
            TypeError: both a module and weight keywords, or neither (the four required
                weights conv_weight, A_log, dt_bias, norm_weight); a weight of the wrong dtype.
            AttributeError: the module lacks a required attribute.
            ValueError: as the constructor; also when H or W change, or when f_b_weight /
                conv_bias are given where they were not (or vice versa).
        """
        if attention is not None:
            given = [k for k, v in dict(conv_weight=conv_weight, A_log=A_log, dt_bias=dt_bias, norm_weight=norm_weight,
                                        f_b_weight=f_b_weight, conv_bias=conv_bias).items() if v is not None]
            if given:
                raise TypeError(f"process_weights_after_loading: pass the module or the weights, not both (got {given})")
            opts = self._module_opts or dict(precomputed_gate=self._weights.get("f_b_weight") is None)
            w, m_eps, m_lb = _module_weights(attention, opts["precomputed_gate"])
            conv_weight, A_log, dt_bias, norm_weight = w["conv_weight"], w["A_log"], w["dt_bias"], w["norm_weight"]
            f_b_weight, conv_bias = w["f_b_weight"], w["conv_bias"]
            eps = m_eps if eps is None else eps
            lower_bound = m_lb if lower_bound is _KEEP else lower_bound
        else:
            missing = [k for k, v in dict(conv_weight=conv_weight, A_log=A_log, dt_bias=dt_bias,
                                          norm_weight=norm_weight).items() if v is None]
            if missing:
                raise TypeError(f"process_weights_after_loading: missing weights {missing} (or pass the attention module)")
        weights = dict(
            conv_weight=_t(conv_weight),
            A_log=_t(A_log),
            dt_bias=_t(dt_bias),
            norm_weight=_t(norm_weight),
            f_b_weight=_t(f_b_weight),
            conv_bias=_t(conv_bias),
        )
        new_eps = self._eps if eps is None else float(eps)
        new_lb = self._lower_bound if lower_bound is _KEEP else (None if lower_bound is None else float(lower_bound))
        self._core.process_weights_after_loading(
            weights["conv_weight"],
            weights["A_log"],
            weights["dt_bias"],
            weights["norm_weight"],
            weights["f_b_weight"],
            weights["conv_bias"],
            new_eps,
            new_lb,
        )
        self._weights = weights
        self._eps = new_eps
        self._lower_bound = new_lb


def _detached(x):
    """torch parameters / tensors: the same storage without autograd (DLPack refuses
    tensors that require grad); anything else unchanged."""
    d = getattr(x, "detach", None)
    return d() if callable(d) else x


def _module_weights(attention, precomputed_gate: bool):
    """(weights dict, eps, lower_bound) read from a vLLM-style KDA attention module."""

    def need(obj, path):
        cur = obj
        for part in path.split("."):
            if not hasattr(cur, part):
                raise AttributeError(
                    f"from_module: the attention module has no '{path}' (expected vLLM KimiK3DeltaAttention names: "
                    "conv1d.weight, f_b_proj.weight, A_log, dt_bias, o_norm.weight)")
            cur = getattr(cur, part)
        if cur is None:
            raise AttributeError(f"from_module: attention.{path} is None")
        return cur

    conv_w = _detached(need(attention, "conv1d.weight"))
    if getattr(conv_w, "ndim", 3) == 2:  # [3D, W] (a Linear-shaped conv parameter)
        conv_w = conv_w[:, None, :]
    conv_b = getattr(need(attention, "conv1d"), "bias", None)
    conv_b = None if conv_b is None else _detached(conv_b)
    a_log = _detached(need(attention, "A_log"))
    if getattr(a_log, "ndim", 1) != 1:  # older checkpoints: [1, 1, H, 1]
        a_log = a_log.reshape(-1)
    dt_bias = _detached(need(attention, "dt_bias"))
    if getattr(dt_bias, "ndim", 1) != 1:
        dt_bias = dt_bias.reshape(-1)
    norm = need(attention, "o_norm")
    norm_w = _detached(need(attention, "o_norm.weight"))
    eps = getattr(norm, "eps", None)
    if eps is None:
        eps = getattr(norm, "variance_epsilon", 1e-5)
    f_b = None if precomputed_gate else _detached(need(attention, "f_b_proj.weight"))
    lb = getattr(attention, "gate_lower_bound", None)
    weights = dict(conv_weight=conv_w, A_log=a_log, dt_bias=dt_bias, norm_weight=norm_w, f_b_weight=f_b,
                   conv_bias=conv_b)
    return weights, float(eps), (None if lb is None else float(lb))


# ---------------------------------------------------------------------------------------
# helpers (SPEC §5)
# ---------------------------------------------------------------------------------------
def decode_conv_weight(conv_weight) -> np.ndarray:
    """nn.Conv1d depthwise weight ``[3D, 1, W]`` (fp32 or bf16, host memory) → ``[3, W, D]``.

    ``out[s, j, c] = w[s·D + c, 0, j]``, fp32, a new numpy array.

    Raises:
        TypeError: wrong dtype. ValueError: wrong shape or device memory.
    """
    w = _t(conv_weight)
    if _is_torch(w) and getattr(w, "is_cuda", False):
        raise ValueError("conv_weight (decode_conv_weight): expected host memory, got a CUDA tensor")
    return _core.decode_conv_weight(w)


def stream_layout(
    conv_state,
    state=None,
    *,
    q: int,
    conv_dim_first: bool,
    input_row_stride_bytes: int,
    out_row_stride_bytes: int,
    W: int = 4,
) -> Optional[Tuple[bool, int]]:
    """Can the streaming variant use 16-byte async copies for these operands?

    Args:
        conv_state: the conv window pool (DS ``[slots, 3D, window]`` or SD
            ``[slots, window, 3D]``).
        state: the state pool or None.
        q: tokens per step.
        conv_dim_first: the layout of ``conv_state``.
        input_row_stride_bytes: packed pitch (or the views' row stride) in bytes.
        out_row_stride_bytes: out's row stride in bytes.
        W: conv taps.
    Returns:
        ``(dim_first, window)`` when 16-byte aligned row strides, conv slot stride and SD
        channel stride, and window ≥ W−2+q hold; else None.
    """
    return _core.stream_layout(
        _t(conv_state),
        _t(state),
        _check_q(q),
        bool(conv_dim_first),
        int(input_row_stride_bytes),
        int(out_row_stride_bytes),
        int(W),
    )


def stream_ctas(items: int, sms: int) -> int:
    """Persistent CTAs for the streaming variant: two per SM, equal share.

    ``per = ceil(items / (2·sms))``, ``ctas = ceil(items / per)``; 0 when items or sms ≤ 0.
    """
    return _core.stream_ctas(int(items), int(sms))


def deferred_supported(state, lower_bound: Optional[float] = None) -> bool:
    """Can the fused verify fold this layer's records? (VK-dense fp32 or bf16 state; any gate.)"""
    return _core.deferred_supported(_t(state), None if lower_bound is None else float(lower_bound))


def replays(H: int, B: int, q: int) -> bool:
    """Does a fused step of shape (H, B, q) run a fused variant (else flush + record verify)?"""
    return _core.replays(int(H), int(B), int(q))
