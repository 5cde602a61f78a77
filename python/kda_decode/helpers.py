"""The helpers of SPEC §5, and whether the extension was built with CUDA."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _core
from .arguments import count, tensor

__all__ = ["cuda_built", "decode_conv_weight", "deferred_supported", "replays", "stream_ctas", "stream_layout"]


def cuda_built() -> bool:
    """Whether the extension was built with the CUDA backend.

    ``False`` for a ``KDA_CPU_ONLY=1`` build or a build where nvcc was not found; then
    only CPU tensors are accepted (CUDA tensors raise ``RuntimeError`` at construction).
    """
    return bool(_core.cuda_built())


def decode_conv_weight(conv_weight: Any) -> np.ndarray:
    """nn.Conv1d depthwise weight ``[3D, 1, W]`` (fp32 or bf16, host memory) → ``[3, W, D]``.

    ``out[s, j, c] = w[s·D + c, 0, j]``, fp32, a new numpy array.

    Raises:
        DTypeError: wrong dtype. ShapeError: wrong shape. DeviceError: device memory.
    """
    out: np.ndarray = _core.decode_conv_weight(tensor(conv_weight))
    return out


def stream_layout(
    conv_state: Any,
    state: Any = None,
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
    r: Optional[Tuple[bool, int]] = _core.stream_layout(
        tensor(conv_state),
        tensor(state),
        count(q, "q"),
        bool(conv_dim_first),
        count(input_row_stride_bytes, "input_row_stride_bytes"),
        count(out_row_stride_bytes, "out_row_stride_bytes"),
        count(W, "W"),
    )
    return r


def stream_ctas(items: int, sms: int) -> int:
    """Persistent CTAs for the streaming variant: two per SM, equal share.

    ``per = ceil(items / (2·sms))``, ``ctas = ceil(items / per)``; 0 when items or sms ≤ 0.
    """
    return int(_core.stream_ctas(count(items, "items"), count(sms, "sms")))


def deferred_supported(state: Any, lower_bound: Optional[float] = None) -> bool:
    """Can the fused verify fold this layer's records? (VK-dense fp32 or bf16 state; any gate.)"""
    return bool(_core.deferred_supported(tensor(state), None if lower_bound is None else float(lower_bound)))


def replays(H: int, B: int, q: int) -> bool:
    """Does a fused step of shape (H, B, q) run a fused variant (else flush + record verify)?"""
    return bool(_core.replays(count(H, "H"), count(B, "B"), count(q, "q")))
