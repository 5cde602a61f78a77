"""kda_decode.sglang — SGLang's KDA decode backend call, run on kda-decode.

SGLang's hybrid linear-attention backend (``KDAAttnBackend.forward_decode`` in
``python/sglang/srt/layers/attention/linear/kda_backend.py``) decodes one token per request
of a Kimi Linear / Kimi K3 layer from what the model hands it and what its pools hold::

    layer_cache  = req_to_token_pool.mamba2_layer_cache(layer.layer_id)
    conv_states  = layer_cache.conv[0]              # [slots, W-1, 3D]  (the KDA pool stores it SD)
    ssm_states   = layer_cache.temporal             # [slots, H, V=128, K=128]
    cache_indices = forward_metadata.mamba_cache_indices   # [B] int32, -1 on CUDA-graph pad rows
    out = backend.forward_decode(layer, forward_batch, mixed_qkv, a, b)   # [1, B, H, 128]

and runs the conv update, the gate, the delta rule and (K3's fused path) the gated RMSNorm.
This module takes the same tensors, as they are, and runs the whole step in one call of
:meth:`kda_decode.PreparedKda.run_views` (gate mode 2: SGLang computes the raw gate
``F_B·f_a`` itself), without copying any of them::

    from kda_decode.sglang import kda_decode_backend
    out = kda_decode_backend.forward_decode(layer.attn, mixed_qkv, a, b, conv_states, ssm_states,
                                            cache_indices, output_gate=g_proj_states,
                                            norm_weight=layer.o_norm.weight, norm_eps=layer.o_norm.eps)
    # out: [1, B, H, 128] bf16, gated-RMSNormed: the model skips its own o_norm

Arguments (N = rows = requests of the step, one token each; H heads of this attention-TP
shard, D = 128·H, W = conv taps), SGLang's names:

- ``layer``: SGLang's ``RadixLinearAttention`` (or any object with these attributes):
  ``conv_weights`` ``[3D, W]`` fp32 (``qkv_conv1d.weight.squeeze(1)``; ``[3D, 1, W]`` and
  vLLM's ``[3, W, D]`` are accepted too), ``bias`` ``[3D]`` fp32 or None, ``A_log``
  ``[1, 1, H, 1]`` or ``[H]`` fp32, ``dt_bias`` ``[D]`` fp32, ``lower_bound`` a float in
  [-5, 0) or None / absent (softplus gate), ``head_k_dim`` / ``head_v_dim`` 128 when present.
  The weights must stay at their addresses (reload in place, then
  :meth:`KdaDecodeBackend.process_weights_after_loading`).
- ``mixed_qkv``: ``[N, 3D]`` bf16, the projection's q | k | v columns *before* the conv (the
  slice of the fused ``qkvbfg`` projection: any row stride, unit inner stride).
- ``a``: the raw forget gate ``F_B·f_a`` (no dt_bias), bf16: ``[N, D]`` (SGLang's decode
  layout), ``[N, H, 128]``, ``[1, N, H, 128]`` or ``[N, 1, D]``; unit inner stride.
- ``b``: beta logits, bf16: ``[1, N, H]`` (SGLang's ``beta.unsqueeze(0)``), ``[N, H]`` or
  ``[N, 1, H]``; any row stride (a column slice of the projection), unit inner stride.
- ``conv_states``: the layer's conv pool as stored, ``[slots, W-1, 3D]`` (SD; any slot stride,
  e.g. a page-major pool), or its transposed ``[slots, 3D, W-1]`` view (what SGLang hands
  ``causal_conv1d_update``) of SD or DS storage. bf16 or fp32 (``SGLANG_MAMBA_CONV_DTYPE``).
- ``ssm_states``: ``[slots, H, 128, 128]`` fp32 or bf16 (``SGLANG_MAMBA_SSM_DTYPE``), inner
  ``[H, V, K]`` dense (SGLang's ``[HV, V, K]``), any slot stride.
- ``cache_indices``: ``[≥N]`` int32, any stride: the slot of request n.
- ``output_gate`` (``g_proj_states``): ``[N, D]``, ``[N, H, 128]`` or ``[1, N, H, 128]`` bf16,
  with ``norm_weight`` (``o_norm.weight``, ``[128]``, any float dtype) and ``norm_eps``
  (``o_norm.eps``): the output is ``o_norm(o, output_gate)`` (sigmoid-gated RMSNorm), fused.
  Without them the output is ``o`` itself, bf16 (SGLang's unfused backend, whose model then
  applies ``o_norm``): a layer built with ``PreparedKda(output_norm=False)`` (SPEC §9).
- ``out``: optional output, ``[1, N, H, 128]``, ``[N, H, 128]`` or ``[N, D]`` bf16, unit inner
  stride; written in place. None: a new ``[1, N, H, 128]`` tensor.

Returns ``[1, N, H, 128]`` bf16 (``out`` itself when given in that shape, else a view of it).

**Padding.** SGLang pads a CUDA-graph batch to the captured size and poisons the padded rows'
``cache_indices`` to -1; its ``MambaSlotAllocator`` hands out slots 1..size and keeps slot 0
as the pad / scratch slot. A row whose index is negative or equal to ``null_slot`` (default 0,
``KdaDecodeBackend(null_slot=-1)`` for none) is a pad: its output rows are zero and no cache is
read or written. An index ≥ the pool size is a caller error: the row is treated as a pad and
flagged; read the flags with :meth:`KdaDecodeBackend.status` (it synchronises; not per step).

**CUDA graphs.** The first call for a layer (identified by its weights' addresses, gate, eps,
conv layout and norm mode) builds and prepares a :class:`~kda_decode.PreparedKda`: that copies
derived weights to the device and waits for it, so it must be eager — SGLang's graph runner
runs every batch size eagerly twice before capturing it, so it is. A first call during capture
raises ``RuntimeError``. After that a call allocates nothing on the device when ``out`` is
given, never synchronises, and plans an unseen batch size on the host only: it can be
captured and replayed with new data in the same buffers. Without ``out`` the call takes its
output from torch's caching allocator (``torch.empty``, as SGLang's own decode kernels do);
inside a capture that memory belongs to the graph's pool, so the graph stays valid.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch

import kda_decode as _kd

from ._support import (
    NO_NORM_MISSING,
    AdapterLayer,
    AdapterLayers,
    Support,
    core_weights,
    cuda_device_support,
    dtype_name,
    no,
    output_norm_in_core,
    yes,
)
from ._support import rows_view as _rows_view

__all__ = ["KdaDecodeBackend", "Support", "covered", "forward_decode", "kda_decode_backend"]

HEAD_DIM = 128


def _need_dtype(t: torch.Tensor, name: str, allowed: Tuple[torch.dtype, ...], hint: str = "") -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        want = " or ".join(dtype_name(d) for d in allowed)
        raise TypeError(f"{name}: expected {want}{hint}, got {dtype_name(t.dtype)}")


def _conv_weight_of(w: torch.Tensor, D: int) -> torch.Tensor:
    """SGLang's ``[3D, W]`` (or ``[3D, 1, W]``, or vLLM's decode ``[3, W, D]``) → ``[3D, 1, W]``."""
    w = w.detach()
    if w.dim() == 2 and w.shape[0] == 3 * D:
        return w.unsqueeze(1)
    if w.dim() == 3 and w.shape[0] == 3 * D and w.shape[1] == 1:
        return w
    if w.dim() == 3 and w.shape[0] == 3 and w.shape[2] == D and w.shape[1] != 1:
        return w.permute(0, 2, 1).reshape(3 * D, 1, w.shape[1])  # a new tensor: the core copies it anyway
    raise ValueError(
        f"layer.conv_weights: expected [{3 * D}, W] (qkv_conv1d.weight.squeeze(1)) or [{3 * D}, 1, W], "
        f"got shape {tuple(w.shape)}"
    )


def _conv_pool(conv_states: torch.Tensor, D: int, W: int) -> Tuple[bool, torch.Tensor]:
    """(conv_dim_first, the pool in the layout the core takes) from what SGLang passes."""
    if not isinstance(conv_states, torch.Tensor) or conv_states.dim() != 3:
        shape = tuple(conv_states.shape) if isinstance(conv_states, torch.Tensor) else type(conv_states).__name__
        raise ValueError(
            f"conv_states: expected [slots, W-1, {3 * D}] (layer_cache.conv[0]) or its transposed "
            f"[slots, {3 * D}, W-1] view, got {shape}"
        )
    n1, n2 = int(conv_states.shape[1]), int(conv_states.shape[2])
    if n2 == 3 * D and n1 != 3 * D:  # as stored: [slots, window, 3D]
        if conv_states.stride(2) != 1:
            raise ValueError(
                f"conv_states: [slots, window, 3D] pool needs channel stride 1, got strides {conv_states.stride()}"
            )
        window, dim_first, pool = n1, False, conv_states
    elif n1 == 3 * D:  # the logical [slots, 3D, window] view
        window = n2
        if conv_states.stride(1) == 1 and n2 > 1:
            dim_first, pool = False, conv_states.transpose(1, 2)  # SD storage
        elif conv_states.stride(2) == 1 or n2 == 1:
            dim_first, pool = True, conv_states  # DS storage
        else:
            raise ValueError(
                f"conv_states: expected channel stride 1 (SD storage) or column stride 1 (DS storage), "
                f"got strides {conv_states.stride()}"
            )
    else:
        raise ValueError(
            f"conv_states: expected [slots, W-1, {3 * D}] (layer_cache.conv[0]) or its transposed "
            f"[slots, {3 * D}, W-1] view, got shape {tuple(conv_states.shape)}"
        )
    if window < W - 1:
        raise ValueError(f"conv_states: window {window} < W - 1 = {W - 1} columns")
    return dim_first, pool


class KdaDecodeBackend(AdapterLayers):
    """SGLang's KDA decode backend call (``forward_decode``) on kda-decode.

    Keeps one :class:`~kda_decode.PreparedKda` per layer. See the module docstring for the
    arguments, padding and CUDA-graph rules.

    Args:
        null_slot: pad slot id besides negatives (SGLang's reserved slot 0; -1 = none).
        variant: forced variant for every step ('auto' lets the planner choose).
    """

    # ---- the call ----------------------------------------------------------------------
    def forward_decode(
        self,
        layer: Any,
        mixed_qkv: torch.Tensor,
        a: torch.Tensor,
        b: torch.Tensor,
        conv_states: torch.Tensor,
        ssm_states: torch.Tensor,
        cache_indices: torch.Tensor,
        *,
        output_gate: Optional[torch.Tensor] = None,
        norm_weight: Optional[torch.Tensor] = None,
        norm_eps: float = 1e-5,
        out: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """One decode step (one token per request); updates ``conv_states`` and
        ``ssm_states`` in place.

        Args: see the module docstring (SGLang's names).
        Returns:
            ``[1, N, H, 128]`` bf16: the gated-RMSNormed output (with ``output_gate`` and
            ``norm_weight``), else ``o``.
        Raises:
            TypeError: a wrong dtype (the message names the argument), e.g. float16 caches.
            ValueError: a shape or stride that cannot be viewed without a copy, fewer
                ``cache_indices`` than rows, only one of ``output_gate`` / ``norm_weight``,
                or an operand error of :meth:`PreparedKda.run_views`.
            NotImplementedError: no ``output_gate`` / ``norm_weight`` while the core lacks
                the optional output norm.
            RuntimeError: the layer's first call happens during CUDA-graph capture, or the
                CUDA backend cannot run on the device (the message says why, e.g. the CUDA
                toolkit and driver versions).
        """
        p = self._views(layer, mixed_qkv, a, b, conv_states, ssm_states, cache_indices, output_gate, norm_weight, out)
        N, H = p["N"], p["H"]
        if out is None:
            out = torch.empty(1, N, H, HEAD_DIM, dtype=torch.bfloat16, device=mixed_qkv.device)
            p["o"] = out.view(N, H * HEAD_DIM)
        lay = self._layer(layer, p, norm_weight, norm_eps)
        caches = _kd.Caches(conv_state=p["conv"], state=ssm_states)
        lay.kda.run_views(p["x"], p["og"], p["gate"], p["beta"], p["o"], caches, cache_indices)
        if out.dim() == 4:
            return out
        return out.view(1, N, H, HEAD_DIM)

    __call__ = forward_decode

    def covered(
        self,
        layer: Any,
        mixed_qkv: torch.Tensor,
        a: torch.Tensor,
        b: torch.Tensor,
        conv_states: torch.Tensor,
        ssm_states: torch.Tensor,
        cache_indices: torch.Tensor,
        *,
        output_gate: Optional[torch.Tensor] = None,
        norm_weight: Optional[torch.Tensor] = None,
        out: Optional[torch.Tensor] = None,
    ) -> Support:
        """Would :meth:`forward_decode` run these inputs (the meaning of SGLang's
        ``kda_fused_decode.covered()`` gate)? Host-side checks only: shapes, dtypes, strides,
        the norm mode and the device; no launch.

        Returns:
            :class:`Support` ``(supported, reason)``, truthy when supported.
        """
        try:
            p = self._views(
                layer, mixed_qkv, a, b, conv_states, ssm_states, cache_indices, output_gate, norm_weight, out
            )
        except (TypeError, ValueError, NotImplementedError, RuntimeError) as e:
            return no(str(e))
        dev = cuda_device_support(mixed_qkv.device)
        if not dev:
            return dev
        if mixed_qkv.is_cuda and p["W"] != 4:
            return no(f"layer.conv_weights: the CUDA kernels take W = 4 taps, got {p['W']}")
        mode = "gated RMSNorm fused" if p["og"] is not None else "no output norm"
        return yes(
            f"{dev.reason}: N={p['N']}, H={p['H']}, {dtype_name(conv_states.dtype)} conv pool "
            f"({'DS' if p['dim_first'] else 'SD'}), {dtype_name(ssm_states.dtype)} state, {mode}"
        )

    # ---- argument mapping --------------------------------------------------------------
    def _views(
        self,
        layer: Any,
        mixed_qkv: Any,
        a: Any,
        b: Any,
        conv_states: Any,
        ssm_states: Any,
        cache_indices: Any,
        output_gate: Any,
        norm_weight: Any,
        out: Any,
    ) -> Dict[str, Any]:
        for attr in ("conv_weights", "A_log", "dt_bias"):
            if getattr(layer, attr, None) is None:
                raise ValueError(
                    f"layer: expected SGLang's RadixLinearAttention attributes conv_weights, bias, A_log, "
                    f"dt_bias, lower_bound; '{attr}' is missing"
                )
        for attr in ("head_k_dim", "head_v_dim"):
            hd = getattr(layer, attr, HEAD_DIM)
            if hd != HEAD_DIM:
                raise ValueError(f"layer.{attr}: expected {HEAD_DIM}, got {hd}")
        H = int(layer.A_log.numel())
        nv = getattr(layer, "num_v_heads", H)
        if nv != H:
            raise ValueError(f"layer.num_v_heads: {nv} differs from the {H} heads of layer.A_log")
        D = H * HEAD_DIM
        _need_dtype(mixed_qkv, "mixed_qkv", (torch.bfloat16,))
        _need_dtype(a, "a", (torch.bfloat16,), " (the raw forget gate F_B·f_a)")
        _need_dtype(b, "b", (torch.bfloat16,), " (beta logits)")
        _need_dtype(conv_states, "conv_states", (torch.bfloat16, torch.float32), " (SGLANG_MAMBA_CONV_DTYPE)")
        _need_dtype(ssm_states, "ssm_states", (torch.float32, torch.bfloat16), " (SGLANG_MAMBA_SSM_DTYPE)")
        _need_dtype(cache_indices, "cache_indices", (torch.int32,), " (forward_metadata.mamba_cache_indices)")
        if mixed_qkv.dim() != 2 or mixed_qkv.shape[1] != 3 * D:
            raise ValueError(
                f"mixed_qkv: expected [N, 3D] = [N, {3 * D}] for the {H} heads of layer.A_log, got shape "
                f"{tuple(mixed_qkv.shape)}"
            )
        N = int(mixed_qkv.shape[0])
        if cache_indices.dim() != 1 or cache_indices.shape[0] < N:
            raise ValueError(
                f"cache_indices: expected [>= N = {N}] (one slot per request; decode has one token per "
                f"request), got shape {tuple(cache_indices.shape)}"
            )
        if (output_gate is None) != (norm_weight is None):
            raise ValueError("output_gate and norm_weight: give both (fused gated RMSNorm) or neither (no output norm)")
        if output_gate is None and not output_norm_in_core():
            raise NotImplementedError("kda_decode.sglang: " + NO_NORM_MISSING)
        cw = layer.conv_weights
        decode_layout = cw.dim() == 3 and cw.shape[0] == 3 and cw.shape[1] != 1 and cw.shape[2] == D  # [3, W, D]
        W = int(cw.shape[1] if decode_layout else cw.shape[-1])
        dim_first, conv = _conv_pool(conv_states, D, W)
        p = dict(N=N, H=H, D=D, W=W, dim_first=dim_first, conv=conv, state=ssm_states)
        p["x"] = mixed_qkv
        p["gate"] = _rows_view(a, N, D, "a")
        p["beta"] = _rows_view(b, N, H, "b")
        if output_gate is not None:
            _need_dtype(output_gate, "output_gate", (torch.bfloat16,), " (g_proj_states)")
            p["og"] = _rows_view(output_gate, N, D, "output_gate")
        else:
            p["og"] = None
        if out is not None:
            _need_dtype(out, "out", (torch.bfloat16,))
            p["o"] = _rows_view(out, N, D, "out")
        return p

    # ---- layers ------------------------------------------------------------------------
    def _layer(self, layer: Any, p: Dict[str, Any], norm_weight: Any, norm_eps: float) -> AdapterLayer:
        cw, bias, A_log, dt_bias = layer.conv_weights, getattr(layer, "bias", None), layer.A_log, layer.dt_bias
        lb = getattr(layer, "lower_bound", None)
        fused = norm_weight is not None
        key = (
            str(A_log.device),
            cw.data_ptr(),
            tuple(cw.shape),
            cw.dtype,
            0 if bias is None else bias.data_ptr(),
            A_log.data_ptr(),
            dt_bias.data_ptr(),
            norm_weight.data_ptr() if fused else None,
            None if lb is None else float(lb),
            float(norm_eps) if fused else None,
            bool(p["dim_first"]),
        )
        lay = self._layers.get(key)
        if lay is not None:
            return lay
        if A_log.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "kda_decode.sglang.forward_decode: the first call for a layer must be eager (it copies "
                "derived weights to the device); run one eager step before CUDA-graph capture"
            )
        if A_log.is_cuda:
            dev = cuda_device_support(A_log.device)
            if not dev:
                raise RuntimeError("kda_decode.sglang.forward_decode: " + dev.reason)
        pol = _kd.Policy(gate_mode=2, variant=self.variant)
        kw = dict(
            **core_weights(_conv_weight_of, cw, bias, A_log, dt_bias, norm_weight, p["D"]),
            lower_bound=None if lb is None else float(lb),
            policies={("decode", p["N"], 1): pol} if p["N"] > 0 else None,
            conv_dim_first=p["dim_first"],
            null_slot=self.null_slot,
            default_policy=pol,
        )
        if fused:
            kda = _kd.PreparedKda(eps=float(norm_eps), **kw)
        else:  # SPEC §9's optional output norm: out = bf16(o), no norm weight
            kda = _kd.PreparedKda(output_norm=False, **kw)
        kda.prepare(_kd.Caches(conv_state=p["conv"], state=p["state"]))
        lay = AdapterLayer(kda, _conv_weight_of, cw, bias, A_log, dt_bias, norm_weight)
        self._layers[key] = lay
        return lay


#: The default backend instance.
kda_decode_backend = KdaDecodeBackend()


def forward_decode(
    layer: Any,
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    conv_states: torch.Tensor,
    ssm_states: torch.Tensor,
    cache_indices: torch.Tensor,
    **kw: Any,
) -> torch.Tensor:
    """:meth:`KdaDecodeBackend.forward_decode` of :data:`kda_decode_backend`."""
    return kda_decode_backend.forward_decode(layer, mixed_qkv, a, b, conv_states, ssm_states, cache_indices, **kw)


def covered(
    layer: Any,
    mixed_qkv: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    conv_states: torch.Tensor,
    ssm_states: torch.Tensor,
    cache_indices: torch.Tensor,
    **kw: Any,
) -> Support:
    """:meth:`KdaDecodeBackend.covered` of :data:`kda_decode_backend`."""
    return kda_decode_backend.covered(layer, mixed_qkv, a, b, conv_states, ssm_states, cache_indices, **kw)
