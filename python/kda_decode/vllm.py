"""kda_decode.vllm — a drop-in for vLLM's ``ops.fused_kda_decode`` (Kimi K3 decode).

vLLM's Kimi K3 attention calls, for a pure-decode batch (one token per request, no
speculative tokens)::

    ops.fused_kda_decode(x, weight, bias, conv_state, raw_g, raw_beta, A_log, dt_bias,
                         state_indices, state, out, lower_bound, output_gate, norm_weight,
                         norm_eps)

An engine switches to this package with one line::

    from kda_decode.vllm import fused_kda_decode      # instead of ops.fused_kda_decode

The call maps onto :meth:`kda_decode.PreparedKda.run_views` with gate mode 2 (the raw gate
``F_B·f_a`` is precomputed by the engine) and ``mode="decode"``, on the caller's tensors
with no copy: every argument is re-viewed (``.view``/``.transpose``, host-side only).

Argument mapping (N = rows = requests, H heads, D = 128·H, W = 4 taps); each vLLM argument,
what is accepted, and the PreparedKda operand it becomes:

- ``x``: ``[N, 3D]`` bf16, unit inner stride, any row stride → ``qkv``.
- ``weight``: ``[3, W, D]`` fp32/bf16 (vLLM's ``decode_conv1d_weight``), or the nn.Conv1d
  ``[3D, 1, W]`` / ``[3D, W]`` → ``conv_weight`` (the core keeps a derived ``[3, W, D]``
  fp32 copy; see "weight reloads").
- ``bias``: ``[3D]`` fp32 or None → ``conv_bias`` (borrowed).
- ``conv_state``: the logical ``[slots, 3D, window]`` view vLLM passes (its cache
  transposed when the cache is not dim-first). Channel stride 1 (SD storage, vLLM's
  default) → the un-transposed ``[slots, window, 3D]`` view with ``conv_dim_first=False``;
  column stride 1 (DS storage) → as is with ``conv_dim_first=True``. bf16 or fp32.
- ``raw_g``: ``[1, N, H, 128]``, ``[N, H, 128]`` or ``[N, D]`` bf16, the raw gate
  ``F_B·f_a`` without dt_bias → ``gate_in`` ``[N, D]``, gate mode 2 (the kernel adds
  dt_bias, then applies the softplus or lower-bound gate).
- ``raw_beta``: ``[1, N, H]`` or ``[N, H]`` bf16 logits (sigmoid in the kernel) → ``beta``.
- ``A_log``: ``[H]`` fp32 (``[1, 1, H, 1]`` is viewed as ``[H]``) → ``A_log`` (borrowed;
  fixes H and the device).
- ``dt_bias``: ``[D]`` fp32 → ``dt_bias`` (borrowed).
- ``state_indices``: ``[N]`` int32 → ``slots`` of a decode step.
- ``state``: ``[slots, H, 128, 128]`` fp32 or bf16, inner dense (V, K) → ``state``.
- ``out``: ``[1, N, H, 128]``, ``[N, H, 128]`` or ``[N, D]`` bf16, or None (then a new
  ``[1, N, H, 128]`` tensor) → ``out`` ``[N, D]``.
- ``lower_bound``: a float in [-5, 0), or None (softplus gate) → ``lower_bound``.
- ``output_gate``: ``[N, H, 128]``, ``[1, N, H, 128]`` or ``[N, D]`` bf16 → ``out_gate``.
- ``norm_weight``: ``[128]`` any float dtype → ``norm_weight`` (copied to fp32).
- ``norm_eps``: a float > 0 → ``eps``.
- ``output_gate`` and ``norm_weight`` both given: the gated RMSNorm is fused (Kimi K3's
  ``fuse_output_norm=True``). Both None: vLLM's ``fuse_output_norm=False`` — out = bf16(o),
  no RMSNorm and no output gate (SPEC §9; a layer built with ``output_norm=False``); the
  engine applies ``o_norm`` itself. Only one of them raises ``ValueError``.

Differences from vLLM's kernel (this package follows its SPEC):

* **Padding.** A row whose ``state_indices`` entry is negative or equal to the null slot
  (0, vLLM's ``NULL_BLOCK_ID``; ``FusedKdaDecode(null_slot=...)``) is a pad: zero output,
  no cache read or written — the same rows vLLM's kernel treats as padding (ids ≤ 0).
* **Caller errors in the data** (an id ≥ the pool size) are not undefined behaviour: the
  row is treated as a pad and flagged; read the flags with :meth:`FusedKdaDecode.status`.
* Any H ≥ 1 (vLLM's kernel: 12, 24, 48, 96; the CUDA backend needs W = 4), either conv
  layout, fp32 or bf16 windows, fp32 or bf16 state; ``state`` and ``conv_state`` pools
  may differ in size.
* The returned tensor is ``out`` as given (or the new ``[1, N, H, 128]`` tensor).

**Append decode.** :class:`AppendState` (one per layer) runs the same call as an append step
(SPEC §4: the state written once every Qr steps) on records it owns, and flushes them before
a plain decode, a prefill or a slot's release (docs/ENGINES.md).

**Preparation.** The first call for a layer (identified by the addresses of its weights,
its gate / eps / norm settings and its conv layout) builds a :class:`~kda_decode.PreparedKda` and
``prepare``s it for the caches: this copies derived weights to the device, so it must be
an *eager* call (vLLM's warm-up / profile run is one); a first call during CUDA-graph
capture raises ``RuntimeError``. Later calls with an unseen batch size plan it on the host
only (no allocation, no synchronisation), so they can be captured and replayed; a call
does nothing on the device but launch the step kernel on ``torch.cuda.current_stream()``.

**Weight reloads.** The derived copies (conv weight → ``[3, W, D]`` fp32, norm weight →
fp32) are private. After reloading weights *in place* (same tensors, e.g.
``param.data.copy_(new)``), call :meth:`FusedKdaDecode.process_weights_after_loading`
(module level: :func:`process_weights_after_loading`) once, eagerly: it recomputes every
prepared layer's copies at the same addresses, so captured CUDA graphs replay with the new
weights. Weights that move to new tensors make a new layer on the next call (re-capture).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from ._core import HEAD_DIM, Policy, Status
from ._support import AdapterLayers
from .arguments import Caches
from .helpers import cuda_built
from .prepared import PreparedKda

if TYPE_CHECKING:  # torch is imported where a call hands over torch tensors, not at import time
    import torch

__all__ = [
    "AppendState",
    "FusedKdaDecode",
    "fused_kda_decode",
    "process_weights_after_loading",
    "read_module",
    "status",
]


# ---------------------------------------------------------------------------------------
# reading a vLLM KDA attention module (PreparedKda.from_module)
# ---------------------------------------------------------------------------------------
def _detached(x: Any) -> Any:
    """torch parameters / tensors: the same storage without autograd (DLPack refuses
    tensors that require grad); anything else unchanged."""
    d = getattr(x, "detach", None)
    return d() if callable(d) else x


def read_module(
    attention: Any, precomputed_gate: bool, *, output_norm: bool = True
) -> Tuple[Dict[str, Any], float, Optional[float]]:
    """(weights, eps, lower_bound) of a vLLM ``KimiK3DeltaAttention``-style module.

    Reads (H = heads of this tensor-parallel shard, D = 128·H, W = conv taps):

    - ``attention.conv1d.weight``: ``[3D, 1, W]`` (or ``[3D, W]``) fp32/bf16, packed q|k|v;
    - ``attention.conv1d.bias``: ``[3D]`` fp32, or None / absent;
    - ``attention.f_b_proj.weight``: ``[D, R=128]`` bf16 (not read with ``precomputed_gate``);
    - ``attention.A_log``: ``[H]`` fp32 (an older ``[1, 1, H, 1]`` is viewed as ``[H]``);
    - ``attention.dt_bias``: ``[D]`` fp32;
    - ``attention.o_norm.weight``: ``[128]``, any float dtype; ``o_norm.eps`` (else
      ``o_norm.variance_epsilon``, else 1e-5) is the RMSNorm eps. Not read with
      ``output_norm=False`` (the engine applies ``o_norm`` itself; it may be absent): the
      norm weight is then None and eps 1e-5 (unused);
    - ``attention.gate_lower_bound``: a float in [-5, 0), or None / absent (softplus gate).

    Returns the keyword arguments of :class:`~kda_decode.PreparedKda` for the weights.

    Raises:
        AttributeError: a required attribute is missing or None (the message names it).
    """

    def need(obj: Any, path: str) -> Any:
        cur = obj
        for part in path.split("."):
            if not hasattr(cur, part):
                hint = (
                    "; output_norm=False builds the layer without the output norm, for an engine that applies "
                    "o_norm itself"
                    if path.startswith("o_norm")
                    else ""
                )
                raise AttributeError(
                    f"from_module: the attention module has no '{path}' (expected vLLM KimiK3DeltaAttention names: "
                    f"conv1d.weight, f_b_proj.weight, A_log, dt_bias, o_norm.weight){hint}"
                )
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
    norm_w: Any = None
    eps: Any = 1e-5
    if output_norm:
        norm = need(attention, "o_norm")
        norm_w = _detached(need(attention, "o_norm.weight"))
        eps = getattr(norm, "eps", None)
        if eps is None:
            eps = getattr(norm, "variance_epsilon", 1e-5)
    f_b = None if precomputed_gate else _detached(need(attention, "f_b_proj.weight"))
    lb = getattr(attention, "gate_lower_bound", None)
    weights = dict(
        conv_weight=conv_w, A_log=a_log, dt_bias=dt_bias, norm_weight=norm_w, f_b_weight=f_b, conv_bias=conv_b
    )
    return weights, float(eps), (None if lb is None else float(lb))


# ---------------------------------------------------------------------------------------
# the drop-in for ops.fused_kda_decode
# ---------------------------------------------------------------------------------------


def _conv_weight_of(weight: torch.Tensor, D: int) -> torch.Tensor:
    """vLLM's decode weight [3, W, D] → nn.Conv1d [3D, 1, W]; [3D, 1, W] / [3D, W] as is."""
    w = weight.detach()
    if w.dim() == 3 and w.shape[0] == 3 and w.shape[2] == D and w.shape[1] != 1:
        return w.permute(0, 2, 1).reshape(3 * D, 1, w.shape[1])  # a new tensor: the core copies it anyway
    if w.dim() == 2 and w.shape[0] == 3 * D:
        return w.unsqueeze(1)
    if w.dim() == 3 and w.shape[0] == 3 * D and w.shape[1] == 1:
        return w
    raise ValueError(
        f"weight: expected [3, W, {D}] (vLLM's decode_conv1d_weight) or [{3 * D}, 1, W], got shape {tuple(w.shape)}"
    )


class FusedKdaDecode(AdapterLayers):
    """Callable with the argument order and semantics of vLLM's ``ops.fused_kda_decode``.

    Keeps one :class:`~kda_decode.PreparedKda` per layer (see the module docstring for the
    argument mapping, preparation and weight reloads).

    Args:
        null_slot: pad slot id besides negatives (vLLM's NULL_BLOCK_ID = 0; -1 = none).
        variant: forced variant for every step ('auto' lets the planner choose).
    """

    # ---- the call ----------------------------------------------------------------------
    def __call__(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        conv_state: torch.Tensor,
        raw_g: torch.Tensor,
        raw_beta: torch.Tensor,
        A_log: torch.Tensor,
        dt_bias: torch.Tensor,
        state_indices: torch.Tensor,
        state: torch.Tensor,
        out: Optional[torch.Tensor] = None,
        lower_bound: Optional[float] = None,
        output_gate: Optional[torch.Tensor] = None,
        norm_weight: Optional[torch.Tensor] = None,
        norm_eps: float = 1e-5,
    ) -> torch.Tensor:
        """One decode step (q = 1) of N requests; updates ``conv_state`` and ``state`` in place.

        Args: see the table in the module docstring (vLLM's names and order).
        Returns:
            ``out`` (the given tensor, or a new ``[1, N, H, 128]`` bf16 tensor).
        Raises:
            ValueError: a shape / stride that cannot be viewed without a copy, a conv
                layout that is neither SD nor DS, only one of ``output_gate`` /
                ``norm_weight``, or any operand error of :meth:`PreparedKda.run_views`.
            TypeError: a wrong dtype (e.g. int64 ``state_indices``).
            RuntimeError: the layer's first call happens during CUDA-graph capture.
        """
        return self._step(
            x,
            weight,
            bias,
            conv_state,
            raw_g,
            raw_beta,
            A_log,
            dt_bias,
            state_indices,
            state,
            out,
            lower_bound,
            output_gate,
            norm_weight,
            norm_eps,
            None,
        )

    def _step(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        conv_state: torch.Tensor,
        raw_g: torch.Tensor,
        raw_beta: torch.Tensor,
        A_log: torch.Tensor,
        dt_bias: torch.Tensor,
        state_indices: torch.Tensor,
        state: torch.Tensor,
        out: Optional[torch.Tensor],
        lower_bound: Optional[float],
        output_gate: Optional[torch.Tensor],
        norm_weight: Optional[torch.Tensor],
        norm_eps: float,
        append: Optional[AppendState],
    ) -> torch.Tensor:
        """A decode step (``append`` None) or an append step on ``append``'s records."""
        import torch

        if (output_gate is None) != (norm_weight is None):
            raise ValueError(
                "fused_kda_decode: output_gate and norm_weight: give both (the gated RMSNorm is fused) or neither "
                "(fuse_output_norm=False: out = o)"
            )
        H = int(A_log.numel())
        D = H * HEAD_DIM
        N = int(x.shape[0])
        if x.dim() != 2:
            raise ValueError(f"x: expected [N, 3D] = [N, {3 * D}], got shape {tuple(x.shape)}")
        if out is None:
            out = torch.empty(1, N, H, HEAD_DIM, dtype=torch.bfloat16, device=x.device)
        # conv layout: the logical [slots, 3D, window] view vLLM passes
        if conv_state.dim() != 3:
            raise ValueError(
                f"conv_state: expected the logical [slots, 3D, window] view, got shape {tuple(conv_state.shape)}"
            )
        if conv_state.stride(1) == 1 and conv_state.shape[1] > 1:
            dim_first, cs = False, conv_state.transpose(1, 2)  # SD storage [slots, window, 3D]
        elif conv_state.stride(2) == 1 or conv_state.shape[2] == 1:
            dim_first, cs = True, conv_state  # DS storage
        else:
            raise ValueError(
                f"conv_state: expected channel stride 1 (SD storage) or column stride 1 (DS storage), "
                f"got strides {conv_state.stride()}"
            )
        og = None if output_gate is None else _rows_view(output_gate, N, D, "output_gate")
        gate = _rows_view(raw_g, N, D, "raw_g")
        beta = _rows_view(raw_beta, N, H, "raw_beta")
        o = _rows_view(out, N, D, "out")
        layer = self._layer(weight, bias, A_log, dt_bias, norm_weight, lower_bound, norm_eps, dim_first, cs, state, N)
        if append is None:
            layer.kda.run_views(x, og, gate, beta, o, Caches(conv_state=cs, state=state), state_indices)
        else:
            caches = append._attach(layer.kda, cs, state)
            layer.kda.run_views(x, og, gate, beta, o, caches, state_indices, mode="append")
        return out

    # ---- layers ------------------------------------------------------------------------
    def _key(
        self,
        weight: Any,
        bias: Any,
        A_log: Any,
        dt_bias: Any,
        norm_weight: Any,
        lower_bound: Optional[float],
        norm_eps: float,
        dim_first: bool,
    ) -> Tuple[Any, ...]:
        return (
            str(A_log.device),
            weight.data_ptr(),
            tuple(weight.shape),
            weight.dtype,
            0 if bias is None else bias.data_ptr(),
            A_log.data_ptr(),
            dt_bias.data_ptr(),
            None if norm_weight is None else norm_weight.data_ptr(),  # None: no output norm
            None if lower_bound is None else float(lower_bound),
            None if norm_weight is None else float(norm_eps),
            bool(dim_first),
        )

    def _layer(
        self,
        weight: Any,
        bias: Any,
        A_log: Any,
        dt_bias: Any,
        norm_weight: Any,
        lower_bound: Optional[float],
        norm_eps: float,
        dim_first: bool,
        cs: Any,
        state: Any,
        N: int,
    ) -> AdapterLayer:
        key = self._key(weight, bias, A_log, dt_bias, norm_weight, lower_bound, norm_eps, dim_first)
        layer = self._layers.get(key)
        if layer is not None:
            return layer
        import torch

        if A_log.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "kda_decode.vllm.fused_kda_decode: the first call for a layer must be eager (it "
                "copies derived weights to the device); run one eager step before CUDA-graph capture"
            )
        _ensure_cuda_runs(A_log)  # e.g. a driver older than the toolkit: say so, with both versions
        H = int(A_log.numel())
        D = H * HEAD_DIM
        pol = Policy(gate_mode=2, variant=self.variant)
        kda = PreparedKda(
            **core_weights(_conv_weight_of, weight, bias, A_log, dt_bias, norm_weight, D),
            eps=float(norm_eps) if norm_weight is not None else 1e-5,
            lower_bound=None if lower_bound is None else float(lower_bound),
            output_norm=norm_weight is not None,
            policies={("decode", N, 1): pol} if N > 0 else None,
            conv_dim_first=dim_first,
            null_slot=self.null_slot,
            default_policy=pol,
        )
        kda.prepare(Caches(conv_state=cs, state=state))
        layer = AdapterLayer(kda, _conv_weight_of, weight, bias, A_log, dt_bias, norm_weight)
        self._layers[key] = layer
        return layer


#: The default adapter instance: ``fused_kda_decode(x, weight, bias, conv_state, ...)``.
fused_kda_decode = FusedKdaDecode()


# ---------------------------------------------------------------------------------------
# append decode: the per-layer records and pending counts
# ---------------------------------------------------------------------------------------
class AppendState:
    """Append decode (SPEC §4 ``append``) for one KDA layer, shaped as vLLM's per-layer
    metadata: it owns the layer's records rows and pending counts, runs the layer's decode
    batches as append steps, and folds the records into the state (flush) where the SPEC
    needs it — before a plain decode step, a prefill or a slot's release.

    An append step reads the request's state (the *checkpoint*, ``state[state_indices[n]]``)
    and its pending records, runs the token from the folded copy and appends the token's
    record instead of writing the 64 KiB state; the state is written once every Qr steps
    (when a row is full) and at a flush. Per slot and layer the records take Qr · H · 1.5 KiB
    (u: 512 B, k and g: 1 KiB per head and position). The records row of a request is its
    state slot (vLLM's ``state_indices`` entry), so ``num_slots`` is the state pool's size;
    pad ids (negative or the null slot 0) read and write nothing.

    Bitwise: n append steps then a flush give the state, outputs and windows of n plain
    decode steps (fp32 state) when both run the same variant — always on the CPU; on CUDA
    with a forced variant (``FusedKdaDecode(variant='split' | 'wide')``), or where ``auto``
    picks the same one for both (it never picks WS for append: WS has no append path).

    Args:
        num_slots: rows of the records (the state pool's slot count).
        num_heads: H of the layer's shard.
        records_per_row: Qr, records per row (Qr steps between two state writes).
        device: where the layer runs (the records live there).
        adapter: the :class:`FusedKdaDecode` whose prepared layers run the steps (default
            :data:`fused_kda_decode`).

    CUDA graphs: the buffers are allocated here, once; :meth:`step`, :meth:`flush`,
    :meth:`decode`, :meth:`prefill`, :meth:`release` and :meth:`flush_all` allocate nothing
    and never synchronise. The first step of a layer with this state must be eager (it
    prepares the layer for the records: the per-row arrival counters of the CUDA backend).
    """

    def __init__(
        self,
        num_slots: int,
        num_heads: int,
        *,
        records_per_row: int = 8,
        device: Any = "cpu",
        adapter: Optional[FusedKdaDecode] = None,
    ):
        import torch

        if num_slots < 1 or num_heads < 1 or records_per_row < 1:
            raise ValueError(
                f"AppendState: expected num_slots, num_heads and records_per_row >= 1, got {num_slots}, "
                f"{num_heads}, {records_per_row}"
            )
        Qr, H = int(records_per_row), int(num_heads)
        self.records_per_row = Qr
        self.num_heads = H
        self.correction = torch.zeros(num_slots, H, Qr, HEAD_DIM, dtype=torch.float32, device=device)
        self.key_gate = torch.zeros(num_slots, H, Qr, 2 * HEAD_DIM, dtype=torch.float32, device=device)
        self.pending = torch.zeros(num_slots, dtype=torch.int32, device=device)
        self.adapter = fused_kda_decode if adapter is None else adapter
        self._all_rows = torch.arange(num_slots, dtype=torch.int32, device=device)
        self._kda: Optional[PreparedKda] = None  # the layer of the last step
        self._caches: Optional[Caches] = None  # its caches with these records
        self._prepared: List[PreparedKda] = []  # layers prepared for these records

    @property
    def bytes(self) -> int:
        """Device memory of the records and pending counts."""
        return sum(t.numel() * t.element_size() for t in (self.correction, self.key_gate, self.pending))

    def _attach(self, kda: PreparedKda, conv: Any, state: Any) -> Caches:
        caches = Caches(
            conv_state=conv, state=state, correction=self.correction, key_gate=self.key_gate, pending=self.pending
        )
        if not any(k is kda for k in self._prepared):
            import torch

            if state.is_cuda and torch.cuda.is_current_stream_capturing():
                raise RuntimeError(
                    "kda_decode.vllm.AppendState: the first append step of a layer must be eager (it prepares the "
                    "layer for the records); run one eager step before CUDA-graph capture"
                )
            kda.prepare(caches)
            self._prepared.append(kda)
        self._kda, self._caches = kda, caches
        return caches

    # ---- steps -------------------------------------------------------------------------
    def step(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        conv_state: torch.Tensor,
        raw_g: torch.Tensor,
        raw_beta: torch.Tensor,
        A_log: torch.Tensor,
        dt_bias: torch.Tensor,
        state_indices: torch.Tensor,
        state: torch.Tensor,
        out: Optional[torch.Tensor] = None,
        lower_bound: Optional[float] = None,
        output_gate: Optional[torch.Tensor] = None,
        norm_weight: Optional[torch.Tensor] = None,
        norm_eps: float = 1e-5,
    ) -> torch.Tensor:
        """One append step of N requests: :func:`fused_kda_decode`'s arguments and mapping,
        ``mode="append"`` on these records. Updates ``conv_state``, the records and pending;
        writes ``state`` only for rows that were full.

        Returns:
            ``out`` (or a new ``[1, N, H, 128]`` bf16 tensor).
        Raises:
            As :func:`fused_kda_decode`; RuntimeError: the first step of a layer with this
            state happens during CUDA-graph capture.
        """
        if int(A_log.numel()) != self.num_heads:
            raise ValueError(f"A_log: {A_log.numel()} heads, this AppendState holds records of {self.num_heads}")
        return self.adapter._step(
            x,
            weight,
            bias,
            conv_state,
            raw_g,
            raw_beta,
            A_log,
            dt_bias,
            state_indices,
            state,
            out,
            lower_bound,
            output_gate,
            norm_weight,
            norm_eps,
            self,
        )

    def decode(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: Optional[torch.Tensor],
        conv_state: torch.Tensor,
        raw_g: torch.Tensor,
        raw_beta: torch.Tensor,
        A_log: torch.Tensor,
        dt_bias: torch.Tensor,
        state_indices: torch.Tensor,
        state: torch.Tensor,
        out: Optional[torch.Tensor] = None,
        lower_bound: Optional[float] = None,
        output_gate: Optional[torch.Tensor] = None,
        norm_weight: Optional[torch.Tensor] = None,
        norm_eps: float = 1e-5,
    ) -> torch.Tensor:
        """A plain decode step (:func:`fused_kda_decode`) of requests that may have records
        pending: flushes their rows first (a plain decode reads the state, not the records)."""
        self.flush(state_indices)
        return self.adapter._step(
            x,
            weight,
            bias,
            conv_state,
            raw_g,
            raw_beta,
            A_log,
            dt_bias,
            state_indices,
            state,
            out,
            lower_bound,
            output_gate,
            norm_weight,
            norm_eps,
            None,
        )

    # ---- folding the records into the state ----------------------------------------------
    def flush(self, slots: torch.Tensor) -> None:
        """Folds the pending records of these slots' rows into their states and sets their
        pending counts to 0 (SPEC §4 flush), on the caches of the last step. Pad ids are
        skipped; nothing happens before the first step (nothing is pending)."""
        if self._kda is None:
            return
        self._kda.flush(self._caches, slots)

    def prefill(self, slots: torch.Tensor) -> None:
        """Before a prefill of these slots (a chunked prefill continues from the state): flush."""
        self.flush(slots)

    def release(self, slots: torch.Tensor) -> None:
        """When these slots are freed: flush, so the final state is in the pool (prefix caching
        may keep it) and the rows start empty for their next owner."""
        self.flush(slots)

    def flush_all(self) -> None:
        """:meth:`flush` of every row (e.g. before a weight reload or a pool snapshot)."""
        self.flush(self._all_rows)

    def assign(self, slots: torch.Tensor) -> None:
        """Empties the rows of newly assigned slots without folding (the records of a request that
        was dropped without :meth:`release` are discarded). Pad ids are ignored."""
        import torch

        s = slots.to(torch.long)
        keep = (s > 0) & (s < self.pending.shape[0])
        self.pending.index_fill_(0, torch.where(keep, s, torch.zeros_like(s)), 0)


def process_weights_after_loading() -> None:
    """:meth:`FusedKdaDecode.process_weights_after_loading` of :data:`fused_kda_decode`."""
    fused_kda_decode.process_weights_after_loading()


def status() -> List[Status]:
    """:meth:`FusedKdaDecode.status` of :data:`fused_kda_decode`."""
    return fused_kda_decode.status()


# =======================================================================================
# Support query: vLLM's is_fused_kda_decode_supported, answered for kda-decode
# =======================================================================================
# vLLM asks, once per layer at construction, whether its fused decode op can serve the
# layer (vllm/models/kimi_k3/nvidia/kda.py): heads in (12, 24, 48, 96), head_dim 128, conv
# width 4, no speculative tokens, bf16 inputs and bf16 conv cache, and a GPU of sm_90 /
# sm_10x / sm_12x. This query takes the same positional arguments and answers for this
# package, with the reason; the answer is truthy exactly when supported.

from ._support import NO_NORM_MISSING as _NO_NORM_MISSING  # noqa: E402
from ._support import (  # noqa: E402
    AdapterLayer,
    Support,
    core_weights,
)
from ._support import cuda_device_support as _cuda_device_support  # noqa: E402
from ._support import dtype_name as _dtname  # noqa: E402
from ._support import no as _no  # noqa: E402
from ._support import output_norm_in_core as _output_norm_in_core  # noqa: E402
from ._support import rows_view as _rows_view  # noqa: E402
from ._support import yes as _yes  # noqa: E402


def is_fused_kda_decode_supported(
    num_heads: int,
    head_dim: int = HEAD_DIM,
    conv_width: int = 4,
    num_spec: int = 0,
    input_dtype: Optional[torch.dtype] = None,
    conv_state_dtype: Optional[torch.dtype] = None,
    *,
    state_dtype: Optional[torch.dtype] = None,
    fuse_output_norm: bool = True,
    device: Any = None,
    conv_state: Optional[torch.Tensor] = None,
    state: Optional[torch.Tensor] = None,
) -> Support:
    """Can :data:`fused_kda_decode` serve a layer of this shape, and why not (vLLM's
    ``is_fused_kda_decode_supported``, same positional arguments).

    Args:
        num_heads: H, heads of this tensor-parallel shard (any H ≥ 1 here; vLLM: 12/24/48/96).
        head_dim: K = V; must be 128.
        conv_width: W, conv taps; 4 on CUDA, any W ≥ 2 on the CPU backend.
        num_spec: speculative tokens per step. Must be 0: as in vLLM, the fused decode op
            serves layers without speculative decoding (verify steps are
            :meth:`~kda_decode.PreparedKda.run` with mode 'per_token' / 'record' / 'fused').
        input_dtype: dtype of x, raw_g, raw_beta, output_gate; must be bfloat16 (None: bfloat16).
        conv_state_dtype: conv cache dtype: bfloat16 or float32 (None: bfloat16).
        state_dtype: recurrent state dtype: float32 or bfloat16 (vLLM's op: float32; None: float32).
        fuse_output_norm: False asks for vLLM's no-norm mode (``output_gate`` and
            ``norm_weight`` None: out = bf16(o), SPEC §9's optional output norm; supported
            wherever the fused mode is).
        device: where the layer runs (torch device or str); None: 'cuda' when torch sees a
            GPU, else 'cpu'.
        conv_state: optionally the conv cache as vLLM passes it (the logical
            ``[slots, 3D, window]`` view); its layout is checked: SD or DS storage, any slot
            stride (e.g. sharing a page with the state), window ≥ W − 1.
        state: optionally the recurrent state ``[slots, H, 128, 128]``: inner dims dense,
            any slot stride.
    Returns:
        :class:`Support` ``(supported, reason)``, truthy when supported; ``reason`` names
        the backend that runs the layer, or the first thing that is not supported.
    """
    import torch  # the query answers about torch tensors; the package imports without torch

    input_dtype = torch.bfloat16 if input_dtype is None else input_dtype
    conv_state_dtype = torch.bfloat16 if conv_state_dtype is None else conv_state_dtype
    state_dtype = torch.float32 if state_dtype is None else state_dtype
    H, W = num_heads, conv_width
    if isinstance(H, bool) or not isinstance(H, int) or H < 1:
        return _no(f"num_heads: expected a head count >= 1, got {H!r}")
    if head_dim != HEAD_DIM:
        return _no(f"head_dim: expected {HEAD_DIM} (K = V = 128 is fixed), got {head_dim}")
    if isinstance(W, bool) or not isinstance(W, int) or W < 2:
        return _no(f"conv_width: expected conv taps >= 2, got {W!r}")
    if num_spec != 0:
        return _no(
            f"num_spec: {num_spec} speculative tokens; the fused decode op serves layers without speculative "
            "decoding (as vLLM's); verify steps run through PreparedKda.run(mode='per_token'|'record'|'fused')"
        )
    if input_dtype != torch.bfloat16:
        return _no(f"input_dtype: expected bfloat16 (x, raw_g, raw_beta, output_gate), got {_dtname(input_dtype)}")
    if conv_state_dtype not in (torch.bfloat16, torch.float32):
        return _no(f"conv_state_dtype: expected bfloat16 or float32, got {_dtname(conv_state_dtype)}")
    if state_dtype not in (torch.float32, torch.bfloat16):
        return _no(f"state_dtype: expected float32 or bfloat16, got {_dtname(state_dtype)}")
    if not fuse_output_norm and not _output_norm_in_core():
        return _no("fuse_output_norm=False: " + _NO_NORM_MISSING)
    if device is None:
        device = "cuda" if torch.cuda.is_available() and cuda_built() else "cpu"
    dev = torch.device(device)
    D = H * HEAD_DIM
    if conv_state is not None:
        why = _conv_layout_problem(conv_state, D, W, conv_state_dtype, dev)
        if why:
            return _no(why)
    if state is not None:
        why = _state_layout_problem(state, H, state_dtype, dev)
        if why:
            return _no(why)
    if dev.type == "cuda":
        if W != 4:
            return _no(f"conv_width: the CUDA kernels take W = 4, got {W} (the CPU backend takes any W >= 2)")
        dev_ok = _cuda_device_support(dev)
        if not dev_ok:
            return dev_ok
        backend = dev_ok.reason
    elif dev.type == "cpu":
        backend = "CPU backend"
    else:
        return _no(f"device: expected a CUDA or CPU device, got {dev}")
    gate_note = "output norm fused" if fuse_output_norm else "no output norm"
    return _yes(
        f"fused decode on the {backend}: H={H} (any H; vLLM's kernel takes 12/24/48/96), W={W}, "
        f"{_dtname(conv_state_dtype)} conv cache (SD or DS), {_dtname(state_dtype)} state, "
        f"softplus or lower-bound gate, {gate_note}"
    )


def _conv_layout_problem(conv_state: Any, D: int, W: int, dtype: Any, dev: Any) -> Optional[str]:
    if conv_state.dtype != dtype:
        return f"conv_state: dtype {_dtname(conv_state.dtype)} differs from conv_state_dtype {_dtname(dtype)}"
    if conv_state.device.type != dev.type:
        return f"conv_state: on {conv_state.device}, the layer runs on {dev}"
    if conv_state.dim() != 3 or conv_state.shape[1] != 3 * D:
        return (
            f"conv_state: expected the logical [slots, 3D={3 * D}, window] view vLLM passes, got shape "
            f"{tuple(conv_state.shape)}"
        )
    if conv_state.shape[2] < W - 1:
        return f"conv_state: window {conv_state.shape[2]} < W - 1 = {W - 1} columns"
    if not (conv_state.stride(1) == 1 or conv_state.stride(2) == 1 or conv_state.shape[2] == 1):
        return (
            f"conv_state: expected channel stride 1 (SD storage) or column stride 1 (DS storage), got strides "
            f"{conv_state.stride()}"
        )
    return None


def _state_layout_problem(state: Any, H: int, dtype: Any, dev: Any) -> Optional[str]:
    if state.dtype != dtype:
        return f"state: dtype {_dtname(state.dtype)} differs from state_dtype {_dtname(dtype)}"
    if state.device.type != dev.type:
        return f"state: on {state.device}, the layer runs on {dev}"
    if state.dim() != 4 or tuple(state.shape[1:]) != (H, HEAD_DIM, HEAD_DIM):
        return f"state: expected [slots, H={H}, 128, 128], got shape {tuple(state.shape)}"
    inner = (HEAD_DIM * HEAD_DIM, HEAD_DIM, 1)
    if tuple(state.stride()[1:]) != inner or (state.shape[0] > 1 and state.stride(0) < H * HEAD_DIM * HEAD_DIM):
        return (
            f"state: expected dense [H, V, K] slots (strides (>= {H * HEAD_DIM * HEAD_DIM}, {inner[0]}, "
            f"{inner[1]}, 1)), got strides {state.stride()}"
        )
    return None


def _ensure_cuda_runs(t: torch.Tensor) -> None:
    """Raises RuntimeError naming what was found (e.g. the toolkit and driver versions) when
    the CUDA backend cannot run on ``t``'s device; no-op on the CPU."""
    if t.is_cuda:
        ok = _cuda_device_support(t.device)
        if not ok:
            raise RuntimeError("kda_decode.vllm.fused_kda_decode: " + ok.reason)


__all__ += ["Support", "is_fused_kda_decode_supported"]
