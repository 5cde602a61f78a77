"""The prepared KDA decode core of one layer (SPEC §5): :class:`PreparedKda`.

``run`` and ``run_views`` are one step (``_step``): convert the arguments, hand them to the
C++ core, which validates them once, resolves the step's plan once and launches. While
torch.compile traces a caller and :mod:`kda_decode.torch` is imported, the step goes
through its custom ops instead (they call back into ``_step``'s eager path).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from . import _core
from . import weights as _w
from ._core import Policy, Status
from .arguments import cache_fields, native_caches, policy, policy_list, resolve_stream, step_args, tensor
from .handles import prepared_of, register, traced_ops

__all__ = ["PreparedKda", "prepared_of"]


class PreparedKda:
    """The prepared KDA decode core of one layer (SPEC §5).

    Constructor (keyword arguments only; H = number of heads, D = 128·H, W = conv taps):
        conv_weight: ``[3D, 1, W]`` fp32 or bf16 — nn.Conv1d depthwise weight of the packed
            q|k|v conv. Copied (to the decode layout ``[3, W, D]`` fp32).
        A_log: ``[H]`` fp32. Fixes H and the device (CPU tensor → CPU backend, CUDA tensor
            → CUDA backend). Borrowed.
        dt_bias: ``[D]`` fp32. Borrowed.
        norm_weight: ``[K=128]`` any float dtype. Copied as fp32. Optional (None) with
            ``output_norm=False``.
        f_b_weight: ``[D, R=128]`` bf16, nn.Linear(R, D).weight, or None (then only gate
            mode 2 runs). Borrowed.
        conv_bias: ``[3D]`` fp32 or None. Borrowed.
        eps: RMSNorm epsilon (> 0; checked also without the output norm).
        lower_bound: None (softplus gate) or a float in [-5, 0) (lower-bound gate).
        output_norm: True (default): out = the gated RMSNorm of o (SPEC §3). False: out =
            bf16(o), no RMSNorm and no output gate (SPEC §9, vLLM's ``fuse_output_norm=False``):
            ``norm_weight`` may be None and :meth:`run_views` takes ``out_gate=None``; the
            packed row of :meth:`run` keeps its layout (its out_gate columns are ignored).
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
        DTypeError (a TypeError): a weight has the wrong dtype or is not a tensor.
        ShapeError, LayoutError, DeviceError, ArgumentError (ValueErrors): a weight has the
            wrong shape, strides or device; bad eps, lower_bound, null_slot or policies.
        RuntimeError: CUDA weights but the extension was built without CUDA.
    """

    def __init__(
        self,
        *,
        conv_weight: Any,
        A_log: Any,
        dt_bias: Any,
        norm_weight: Any = None,
        f_b_weight: Any = None,
        conv_bias: Any = None,
        eps: float = 1e-5,
        lower_bound: Optional[float] = None,
        output_norm: bool = True,
        policies: Optional[Mapping[Tuple[str, int, int], Any]] = None,
        conv_dim_first: bool = False,
        null_slot: int = 0,
        default_policy: Optional[Policy] = None,
    ):
        weights = _w.convert(
            conv_weight=conv_weight,
            A_log=A_log,
            dt_bias=dt_bias,
            norm_weight=norm_weight,
            f_b_weight=f_b_weight,
            conv_bias=conv_bias,
        )
        pol = policy_list(policies)
        dflt = policy(default_policy, "default_policy")
        lb = None if lower_bound is None else float(lower_bound)
        if not isinstance(output_norm, bool):
            raise TypeError(f"output_norm: expected a bool, got {type(output_norm).__name__}")
        self._core = _core.PreparedKda(
            *_w.ordered(weights), float(eps), lb, output_norm, pol, bool(conv_dim_first), int(null_slot), dflt
        )
        # Keep the borrowed (and copied) weights alive: the C++ object holds their addresses.
        self._weights = weights
        self._eps = float(eps)
        self._lower_bound = lb
        self._output_norm = output_norm
        self._policies = {(m, B, q): p for (m, B, q, p) in pol}
        self._default_policy = dflt
        self._conv_dim_first = bool(conv_dim_first)
        self._null_slot = int(null_slot)
        self._module_opts: Optional[Dict[str, bool]] = None  # set by from_module: how to read the module again
        self._handle = register(self)

    # ---- properties ------------------------------------------------------------------
    @property
    def heads(self) -> int:
        """H, the number of heads."""
        return int(self._core.heads)

    @property
    def taps(self) -> int:
        """W, the number of conv taps."""
        return int(self._core.taps)

    @property
    def device(self) -> str:
        """'cpu' or 'cuda': the backend (from the weights' device)."""
        return str(self._core.device)

    @property
    def device_info(self) -> Dict[str, Any]:
        """The device facts the planner uses: sms, cc, smem_optin, clusters."""
        return dict(self._core.device_info)

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
    def output_norm(self) -> bool:
        """True when a step applies the gated RMSNorm; False: out = bf16(o) (SPEC §9)."""
        return self._output_norm

    @property
    def policies(self) -> Dict[Tuple[str, int, int], Policy]:
        """A copy of ``{(mode, B, q): Policy}`` given at construction."""
        return dict(self._policies)

    def __repr__(self) -> str:
        gate = "softplus" if self._lower_bound is None else f"lower_bound={self._lower_bound}"
        return (
            f"PreparedKda(H={self.heads}, W={self.taps}, device='{self.device}', "
            f"conv_dim_first={self._conv_dim_first}, null_slot={self._null_slot}, gate={gate}, "
            f"output_norm={self._output_norm}, "
            f"policies={len(self._policies)})"
        )

    # ---- planning ----------------------------------------------------------------------
    def prepare(self, caches: Any) -> None:
        """Validates the caches and plans every policy key for them (SPEC §5).

        Args:
            caches: :class:`Caches` or dict (conv_state, state, correction, key_gate,
                pending). Records are required when a policy key is a record/fused step;
                pending when one is fused. On CUDA this also allocates the gate mode 1
                workspace for the policy keys that take mode 1 (B·q·D fp32; kept and only
                grown): steps of one PreparedKda in mode 1 share it, so run them on one
                stream at a time.
        Raises:
            DTypeError / ShapeError / LayoutError / DeviceError / ArgumentError: a cache has
                the wrong dtype, shape, strides or device; the window is too small for a
                policy's q (window ≥ W−2+q); Qr < q.
            PlanError: a forced variant or gate mode cannot run a key on this device.
        """
        self._core.prepare(native_caches(caches))

    def plan(self, mode: str, B: int, q: int, caches: Any) -> Dict[str, Any]:
        """The plan for step key (mode, B, q) (planned from the default policy if new).

        Returns:
            dict with mode, B, q, variant ('cpu', 'split', 'wide', ...), gate_mode (0, 1, 2),
            split, threads, ctas, smem (bytes), pitch, fallback (the variant that runs when
            a step's inputs are not 16-byte aligned, or None), description (str).
        Raises:
            ArgumentError: unknown mode. PlanError: q outside [1, 16], or a policy that
            cannot run. Cache errors as :meth:`prepare`.
        """
        return dict(self._core.plan(mode, int(B), int(q), native_caches(caches)))

    # ---- steps -------------------------------------------------------------------------
    def run(
        self,
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
        stream: Any = None,
    ) -> None:
        """One step from the packed projection (SPEC §2-§4).

        Args:
            projected: ``[rows, pitch]`` bf16, rows = B·q, unit inner stride, row stride ≥
                pitch. Columns: qkv ``[0, 3D)`` · out_gate ``[3D, 4D)`` · gate_in
                ``[4D, 4D+R)`` (gate mode 2: ``[4D, 5D)``) · beta (H columns) · padding.
            out: ``[rows, D]`` bf16, written (any row stride ≥ D).
            caches: :class:`Caches` or dict; windows and state updated in place.
            slots: int32. decode ``[≥B]``; per_token ``[≥B, ≥q]`` (state after token t goes
                to column t); record / fused / append ``[≥B]`` or ``[≥B, 1]`` (the checkpoint). Any
                strides (a block-table column slice is fine).
            q: tokens per request, 1..16 (decode: 1).
            accepted: ``[≥B]`` int32 or None (all 1): tokens of the previous step accepted.
            out_slots: ``[≥B]`` int32 or None (decode only): where the new state and window go.
            record_rows: ``[≥B]`` int32 or None (record / fused / append only; default the
                checkpoint).
            mode: 'decode', 'append', 'per_token', 'record' or 'fused' (``MODES``). 'append':
                q = 1 from the checkpoint ``slots[b]`` and its pending records; the state is
                written once every Qr steps (SPEC §4; needs correction, key_gate, pending).
            stream: None (current torch stream for CUDA tensors, else 0), an int
                cudaStream_t, or a torch.cuda.Stream.
        Raises:
            DTypeError (TypeError) / ShapeError, LayoutError, DeviceError, ArgumentError,
            PlanError (ValueError): host-side operand errors; the message names the
            operand, what was expected and what came. Errors in the data are not raised:
            see :meth:`status`.
        """
        self._step((projected,), out, caches, slots, q, accepted, out_slots, record_rows, mode, stream)

    def run_views(
        self,
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
        stream: Any = None,
    ) -> None:
        """As :meth:`run`, from four separate row-strided input views (vLLM's buffers).

        Args:
            qkv: ``[rows, 3D]`` bf16 (q | k | v before the conv).
            out_gate: ``[rows, D]`` bf16, or None for a layer built with ``output_norm=False``
                (not read there; a given one is checked all the same).
            gate_in: ``[rows, R=128]`` bf16 (f_a; gate modes 0, 1) or ``[rows, D]`` (gate
                mode 2: F_B·f_a precomputed, dt_bias not included).
            beta: ``[rows, H]`` bf16 beta logits.
            Each view: unit inner stride, any row stride. Other arguments as :meth:`run`.
        Raises:
            As :meth:`run`.
        """
        self._step(
            (qkv, out_gate, gate_in, beta), out, caches, slots, q, accepted, out_slots, record_rows, mode, stream
        )

    def _step(
        self,
        inputs: Tuple[Any, ...],
        out: Any,
        caches: Any,
        slots: Any,
        q: Any,
        accepted: Any,
        out_slots: Any,
        record_rows: Any,
        mode: Any,
        stream: Any,
    ) -> None:
        """The one step behind run (``inputs`` = (projected,)) and run_views (the four views)."""
        ops = traced_ops()
        if ops is not None:  # torch.compile: the custom op (current stream; `stream` ignored)
            ops.step(
                self,
                inputs,
                out,
                caches,
                slots,
                q=q,
                accepted=accepted,
                out_slots=out_slots,
                record_rows=record_rows,
                mode=mode,
            )
            return
        ins = tuple(tensor(x) for x in inputs)
        args = step_args(slots, q, mode, accepted, out_slots, record_rows, resolve_stream(stream, ins[0]))
        if len(ins) == 1:
            self._core.run(ins[0], tensor(out), native_caches(caches), args)
        else:
            qkv, out_gate, gate_in, beta = ins
            self._core.run_views(qkv, out_gate, gate_in, beta, tensor(out), native_caches(caches), args)

    def commit(self, caches: Any, slots: Any, record_rows: Any, counts: Any, *, stream: Any = None) -> None:
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
            As :meth:`run`.
        """
        ops = traced_ops()
        if ops is not None:  # torch.compile: the custom op
            ops.commit(self, caches, slots, record_rows, counts)
            return
        c = native_caches(caches)
        self._core.commit(c, slots, record_rows, counts, resolve_stream(stream, cache_fields(caches)[1]))

    def flush(self, caches: Any, slots: Any, record_rows: Any = None, *, stream: Any = None) -> None:
        """:meth:`commit` with counts = ``pending[row]``, then sets ``pending[row] = 0``.

        Args:
            caches: needs state, correction, key_gate and pending.
            slots: ``[B]`` (or ``[B, ≥1]``) int32 checkpoint slots.
            record_rows: ``[≥B]`` int32 or None (the checkpoint slot is the row).
            stream: as :meth:`run`.
        Raises:
            As :meth:`run` (e.g. ArgumentError when ``pending`` is missing).
        """
        ops = traced_ops()
        if ops is not None:  # torch.compile: the custom op
            ops.flush(self, caches, slots, record_rows)
            return
        c = native_caches(caches)
        self._core.flush(c, slots, record_rows, resolve_stream(stream, cache_fields(caches)[1]))

    def status(self, stream: Any = None) -> Status:
        """Caller errors found in the data since the last call; clears them (SPEC §4).

        On CUDA this synchronises ``stream`` (None: the current torch stream of the layer's
        device). Returns a :class:`Status` with ``.flags`` (OR of SLOT_RANGE=1,
        ROW_RANGE=2, ACCEPTED=4, PENDING=8, PAD_START=16), ``.first_request`` (lowest
        offending request index, -1 if none) and ``.ok``.
        """
        st: Status = self._core.status(resolve_stream(stream, self._weights["A_log"]))
        return st

    # ---- weights from a module ---------------------------------------------------------
    @classmethod
    def from_module(
        cls,
        attention: Any,
        policies: Optional[Mapping[Tuple[str, int, int], Any]] = None,
        *,
        conv_dim_first: bool = False,
        null_slot: int = 0,
        default_policy: Optional[Policy] = None,
        precomputed_gate: bool = False,
        output_norm: bool = True,
    ) -> PreparedKda:
        """Builds the prepared core from a KDA attention module (vLLM ``KimiK3DeltaAttention`` names).

        What is read, and how, is :func:`kda_decode.vllm.read_module`'s: ``conv1d.weight``
        (``[3D, 1, W]`` or ``[3D, W]``), ``conv1d.bias``, ``f_b_proj.weight`` (not read with
        ``precomputed_gate``), ``A_log`` (``[H]`` or ``[1, 1, H, 1]``), ``dt_bias``,
        ``o_norm.weight`` and its ``eps`` (else ``variance_epsilon``, else 1e-5; with
        ``output_norm=False`` neither is needed), ``gate_lower_bound`` (None / absent:
        softplus gate). torch parameters are detached (same storage, so in-place reloads are
        seen). The borrowed weights must stay at their addresses: reload them in place, then
        call :meth:`process_weights_after_loading` with the module.

        Args:
            attention: the module (any object with those attributes).
            policies, conv_dim_first, null_slot, default_policy: as the constructor.
                vLLM: ``conv_dim_first=is_conv_state_dim_first()`` (False by default: SD).
            precomputed_gate: True when the engine runs the F_B GEMM itself and passes the raw
                gate ``F_B·f_a`` (D wide, gate mode 2): ``f_b_proj`` is then not read.
            output_norm: False for a layer whose engine applies ``o_norm`` itself (vLLM's
                ``fuse_output_norm=False``): out = bf16(o) and ``o_norm`` is not read (it may
                be absent). True (default) fuses the gated RMSNorm and needs ``o_norm``.
        Raises:
            AttributeError: a required attribute is missing (the message names it).
            As the constructor otherwise.
        """
        from .vllm import read_module

        w, eps, lb = read_module(attention, precomputed_gate, output_norm=output_norm)
        obj = cls(
            **w,
            eps=eps,
            lower_bound=lb,
            output_norm=output_norm,
            policies=policies,
            conv_dim_first=conv_dim_first,
            null_slot=null_slot,
            default_policy=default_policy,
        )
        obj._module_opts = dict(precomputed_gate=bool(precomputed_gate))
        return obj

    def process_weights_after_loading(
        self,
        attention: Any = None,
        *,
        conv_weight: Any = None,
        A_log: Any = None,
        dt_bias: Any = None,
        norm_weight: Any = None,
        f_b_weight: Any = None,
        conv_bias: Any = None,
        eps: Optional[float] = None,
        lower_bound: Any = _w.KEEP,
    ) -> None:
        """Recomputes the derived conv/norm copies in place after a weight (re)load.

        Either pass the attention module (as :meth:`from_module`; its ``o_norm`` eps and
        ``gate_lower_bound`` are read again unless ``eps`` / ``lower_bound`` are given), or
        the weights as keywords (same as the constructor; ``eps=None`` and an omitted
        ``lower_bound`` keep the current values). The derived copies keep their addresses,
        so captured CUDA graphs stay valid — provided the borrowed weights (A_log, dt_bias,
        f_b_weight, conv_bias) were reloaded in place (the same tensors, e.g.
        ``param.data.copy_(new)``).

        Without the output norm (``output_norm=False``) ``norm_weight`` is optional and the
        module's ``o_norm`` is not read.

        Raises:
            TypeError: both a module and weight keywords, or neither (the required weights
                conv_weight, A_log, dt_bias and, with the output norm, norm_weight).
            AttributeError: the module lacks a required attribute.
            As the constructor otherwise; ShapeError / ArgumentError also when H or W
            change, or when f_b_weight / conv_bias are given where they were not (or vice versa).
        """
        given = dict(
            conv_weight=conv_weight,
            A_log=A_log,
            dt_bias=dt_bias,
            norm_weight=norm_weight,
            f_b_weight=f_b_weight,
            conv_bias=conv_bias,
        )
        opts = self._module_opts or dict(precomputed_gate=self._weights.get("f_b_weight") is None)
        weights, new_eps, new_lb = _w.reload_arguments(
            attention,
            given,
            eps,
            lower_bound,
            precomputed_gate=opts["precomputed_gate"],
            output_norm=self._output_norm,
            current_eps=self._eps,
            current_lower_bound=self._lower_bound,
        )
        cw, a_log, dtb, nw, fb, cb = _w.ordered(weights)
        self._core.process_weights_after_loading(cw, a_log, dtb, nw, fb, cb, new_eps, new_lb, self._output_norm)
        self._weights = weights
        self._eps = new_eps
        self._lower_bound = new_lb
