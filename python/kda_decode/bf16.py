"""numpy has no bfloat16: bf16 data travels as uint16 bit patterns (SPEC §2, DESIGN.md)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["bf16_to_float32", "float32_to_bf16"]


def float32_to_bf16(x: npt.ArrayLike) -> np.ndarray:
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


def bf16_to_float32(b: npt.ArrayLike) -> np.ndarray:
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
