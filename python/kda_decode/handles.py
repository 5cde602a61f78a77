"""Integer handles of live :class:`~kda_decode.PreparedKda` objects, and the route of a
step while torch.compile traces it.

The torch custom ops (:mod:`kda_decode.torch`) take a handle, not the object (an op's
arguments must be tensors and scalars). The prepared object looks :mod:`kda_decode.torch`
up when a step runs; nothing writes into another module at import time.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from typing import Any

__all__ = ["prepared_of", "register", "traced_ops"]

_LIVE: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_NEXT_HANDLE = itertools.count(1)


def register(kda: Any) -> int:
    """A new handle for ``kda`` (kept as a weak reference)."""
    handle = next(_NEXT_HANDLE)
    _LIVE[handle] = kda
    return handle


def prepared_of(handle: int) -> Any:
    """The live :class:`~kda_decode.PreparedKda` with this handle (``kda._handle``).

    Raises:
        RuntimeError: no live object has this handle (it was garbage-collected: keep the
            PreparedKda alive as long as graphs or compiled functions use it).
    """
    kda = _LIVE.get(int(handle))
    if kda is None:
        raise RuntimeError(f"kda_decode: no live PreparedKda with handle {handle} (was it garbage-collected?)")
    return kda


def traced_ops() -> Any:
    """:mod:`kda_decode.torch` while torch.compile traces the caller, else None (never imports torch)."""
    ops = sys.modules.get("kda_decode.torch")
    if ops is not None and ops.compiling():
        return ops
    return None
