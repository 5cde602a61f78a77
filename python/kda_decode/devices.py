"""Where test and demo data lives: numpy arrays for the CPU backend, or torch tensors on
CUDA (or on the CPU, to run the torch code path without a GPU). One adapter for
:mod:`kda_decode.main`, :mod:`kda_decode.golden` and the differential fuzzer.

bf16 data stays uint16 bit patterns on the numpy side; on the torch side it is a
``torch.bfloat16`` tensor with the same bits.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

__all__ = ["Device", "cuda_usable"]


def cuda_usable() -> bool:
    """A CUDA build of this package, and torch sees a GPU."""
    from .helpers import cuda_built

    if not cuda_built():
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class Device:
    """'cpu' (numpy, CPU backend), 'cuda' (torch CUDA tensors) or 'torch-cpu' (torch CPU tensors).

    Attributes:
        name: the device name.
        torch: the torch module (torch devices only).
        tdev: torch's device string, 'cuda' or 'cpu' (torch devices only).
    """

    def __init__(self, name: str):
        if name not in ("cpu", "cuda", "torch-cpu"):
            raise ValueError(f"device: expected 'cpu', 'cuda' or 'torch-cpu', got {name!r}")
        self.name = name
        self.torch: Any = None
        self.tdev = "cpu"
        if name != "cpu":
            import torch

            self.torch = torch
            self.tdev = "cuda" if name == "cuda" else "cpu"

    @property
    def is_torch(self) -> bool:
        return self.name != "cpu"

    def put(self, a: Optional[np.ndarray], bf16: bool = False) -> Any:
        """A copy of ``a`` on this device, with the same strides and offset (column slices,
        padded rows and transposes stay what they are); None stays None.

        ``bf16``: the uint16 array holds bf16 bit patterns (a torch.bfloat16 tensor on torch).
        """
        if a is None:
            return None
        if not self.is_torch:
            return np.array(a, copy=True)
        torch = self.torch
        a = np.asarray(a)
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        es = a.itemsize
        ok = (
            root.flags.c_contiguous and root.itemsize == es and root.dtype == a.dtype and all(s >= 0 for s in a.strides)
        )
        off = 0
        if ok:
            off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            ok = off % es == 0 and all(s % es == 0 for s in a.strides)
        src = root.reshape(-1) if ok else np.ascontiguousarray(a).reshape(-1)
        if bf16:
            t = torch.from_numpy(src.view(np.int16).copy()).to(self.tdev).view(torch.bfloat16)
        else:
            t = torch.from_numpy(src.copy()).to(self.tdev)
        if ok:
            return t.as_strided(a.shape, [s // es for s in a.strides], off // es)
        return t.view(a.shape) if a.size else t.reshape(a.shape)

    def host(self, t: Any) -> np.ndarray:
        """A numpy copy of ``t`` (bf16 back as uint16 bit patterns)."""
        if not self.is_torch:
            return np.array(t, copy=True)
        torch = self.torch
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            return np.array(t.view(torch.int16).numpy().view(np.uint16), copy=True)
        return np.array(t.numpy(), copy=True)

    def zeros_bf16(self, shape: Sequence[int]) -> Any:
        """A zero bf16 tensor (uint16 on numpy)."""
        if not self.is_torch:
            return np.zeros(tuple(shape), np.uint16)
        return self.torch.zeros(tuple(shape), dtype=self.torch.bfloat16, device=self.tdev)

    def assign(self, t: Any, a: np.ndarray) -> None:
        """Copies host data into an existing tensor (same address: what an engine does)."""
        if self.is_torch:
            t.copy_(self.put(np.ascontiguousarray(a)))
        else:
            np.copyto(t, a)

    def sync(self) -> None:
        """Waits for the device (CUDA); nothing elsewhere."""
        if self.name == "cuda":
            self.torch.cuda.synchronize()
