"""kda_decode — the prepared Kimi Delta Attention (KDA) decode core for LLM serving.

One fused step takes, per token, the outputs of the layer's input projection and produces
the attention output, updating the request's short-conv window and recurrent state in
place (``decode``; ``append``, decode with the state written once every Qr steps; and the
speculative-decoding verify modes ``per_token``, ``record`` and ``fused``; see the project's
SPEC).

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
Host-side operand errors are checked once, in C++, and raised as typed errors whose
message names the operand, what was expected and what came: :class:`DTypeError` (a
``TypeError``: wrong dtype, or not a tensor), and the ``ValueError`` subclasses
:class:`ShapeError` (rank, dimensions, rows), :class:`LayoutError` (strides, alignment),
:class:`DeviceError`, :class:`ArgumentError` (q, mode, eps, a missing or unexpected tensor)
and :class:`PlanError` (a policy that cannot run its step key). Errors in the *data* (slot
ids, accepted counts, pending counts) never raise: the offending request is treated as a
pad and :meth:`PreparedKda.status` reports them.

torch is never imported by this package unless a torch tensor is passed in.

Modules
-------
``prepared`` (:class:`PreparedKda`), ``arguments`` (:class:`Caches`, argument
conversion), ``bf16`` (numpy bf16 conversion), ``helpers`` (SPEC §5 helpers),
``devices`` (numpy / torch data adapter of ``main``, ``golden`` and the tests), ``torch``
(custom ops), ``vllm`` (vLLM drop-in and module reading), ``sglang`` (SGLang's decode backend
call), ``golden`` and ``main`` (CLIs).
This file only re-exports.

Serving engines
---------------
``import kda_decode.torch`` registers torch custom ops (``torch.ops.kda_decode.run`` ...;
``torch.compile``, ``torch.library.opcheck``; the methods below then trace under
torch.compile). :meth:`PreparedKda.from_module` reads a vLLM ``KimiK3DeltaAttention``-style
module; ``kda_decode.vllm.fused_kda_decode`` is a drop-in for vLLM's
``ops.fused_kda_decode``; ``kda_decode.sglang.kda_decode_backend.forward_decode`` takes
SGLang's ``KDAAttnBackend.forward_decode`` tensors as they are.
"""

from ._core import (
    ACCEPTED,
    HEAD_DIM,
    MAX_Q,
    PAD_START,
    PENDING,
    RANK,
    ROW_RANGE,
    SLOT_RANGE,
    ArgumentError,
    DeviceError,
    DTypeError,
    Error,
    LayoutError,
    PlanError,
    Policy,
    ShapeError,
    Status,
)
from ._version import __version__  # written once, in _version.py (pyproject and CMake read it too)
from .arguments import MODES, Caches
from .bf16 import bf16_to_float32, float32_to_bf16
from .helpers import cuda_built, decode_conv_weight, deferred_supported, replays, stream_ctas, stream_layout
from .prepared import PreparedKda

__all__ = [
    "ACCEPTED",
    "HEAD_DIM",
    "MAX_Q",
    "MODES",
    "PAD_START",
    "PENDING",
    "RANK",
    "ROW_RANGE",
    "SLOT_RANGE",
    "ArgumentError",
    "Caches",
    "DTypeError",
    "DeviceError",
    "Error",
    "LayoutError",
    "PlanError",
    "Policy",
    "PreparedKda",
    "ShapeError",
    "Status",
    "__version__",
    "bf16_to_float32",
    "cuda_built",
    "decode_conv_weight",
    "deferred_supported",
    "float32_to_bf16",
    "replays",
    "stream_ctas",
    "stream_layout",
]
