"""Shared pieces of the engine adapters (kda_decode.vllm, kda_decode.sglang): the support
query's answer type, the core features they depend on and device checks; the row views of
the tensors they are handed; the prepared-layer record and its weight arguments."""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Tuple

from ._core import HEAD_DIM

if TYPE_CHECKING:
    import torch

    from ._core import Status
    from .prepared import PreparedKda


class Support(NamedTuple):
    """The answer of a support query: ``(supported, reason)``.

    Truthy exactly when supported, so it stands in for a plain bool in an engine's
    ``if is_fused_kda_decode_supported(...)``; unpacks as ``ok, reason = ...``. ``reason``
    says which backend runs the layer, or what is not supported and what would be.
    """

    supported: bool
    reason: str

    def __bool__(self) -> bool:  # a non-empty tuple would always be truthy
        return bool(self.supported)


def yes(reason: str) -> Support:
    return Support(True, reason)


def no(reason: str) -> Support:
    return Support(False, reason)


@functools.cache
def output_norm_in_core() -> bool:
    """Whether the core offers SPEC §9's optional output norm (``PreparedKda(output_norm=...)``).

    The adapters' no-norm mode (vLLM's ``fuse_output_norm=False``; SGLang's decode backend,
    whose model applies ``o_norm`` itself) is reported and accepted only once it exists.
    """
    import kda_decode as kd

    try:
        return "output_norm" in inspect.signature(kd.PreparedKda.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented signature
        return False


NO_NORM_MISSING = (
    "the no-norm mode (out = bf16(o), no RMSNorm and no output gate: SPEC §9's optional output "
    "norm) needs PreparedKda(output_norm=False), which this kda_decode does not have yet; pass the "
    "output gate and the norm weight to fuse the gated RMSNorm instead"
)

_DEVICE_CACHE: Dict[Tuple[str, int], Support] = {}


def cuda_device_support(device: Any) -> Support:
    """Can this build run its CUDA backend on ``device`` (a torch device or 'cuda:N')?

    Host-side queries only (torch's device capability and the driver through libcuda),
    cached per device: cheap enough for every call, and safe during CUDA-graph capture.
    """
    import torch

    import kda_decode as kd

    from . import build_info

    dev = torch.device(device)
    if dev.type != "cuda":
        return yes("CPU backend")
    if not kd.cuda_built():
        return no(build_info.cuda_problem() or "kda_decode was built without the CUDA backend")
    if not torch.cuda.is_available():
        return no("no CUDA device is visible to torch")
    idx = torch.cuda.current_device() if dev.index is None else dev.index
    key = ("cuda", idx)
    hit = _DEVICE_CACHE.get(key)
    if hit is None:
        cap = torch.cuda.get_device_capability(idx)
        why = build_info.cuda_problem(cap)
        hit = no(why) if why is not None else yes(f"CUDA backend (sm_{cap[0]}{cap[1]})")
        _DEVICE_CACHE[key] = hit
    return hit


def dtype_name(dt: Any) -> str:
    return str(dt).replace("torch.", "")


# ---------------------------------------------------------------------------------------
# tensor plumbing shared by the engine adapters (torch is imported by the caller)
# ---------------------------------------------------------------------------------------


def rows_view(t: torch.Tensor, rows: int, cols: int, name: str) -> torch.Tensor:
    """``t`` seen as ``[rows, cols]`` without a copy (ValueError when impossible)."""
    if t.dim() == 2 and tuple(t.shape) == (rows, cols):
        v = t
    else:
        if t.numel() != rows * cols:
            raise ValueError(
                f"{name}: expected {rows}·{cols} elements ([{rows}, {cols}] or an equivalent shape), "
                f"got shape {tuple(t.shape)}"
            )
        try:
            v = t.view(rows, cols)
        except RuntimeError as e:
            raise ValueError(
                f"{name}: cannot be viewed as [{rows}, {cols}] without a copy (shape {tuple(t.shape)}, "
                f"strides {t.stride()}): {e}"
            ) from None
    if cols > 1 and rows > 0 and v.stride(1) != 1:
        raise ValueError(
            f"{name}: expected a unit inner stride (rows of {cols} contiguous elements), "
            f"got strides {t.stride()} for shape {tuple(t.shape)}"
        )
    return v


def sync_current_stream(t: torch.Tensor) -> None:
    """Waits for the current stream of ``t``'s device (CUDA): the core derives its weight
    copies with blocking copies outside torch's streams, which are not ordered after work
    queued on torch's non-blocking streams (e.g. a reload's copies)."""
    if t.is_cuda:
        import torch

        torch.cuda.current_stream(t.device).synchronize()


ConvWeightOf = Callable[[Any, int], Any]


def core_weights(
    conv_weight_of: ConvWeightOf, conv_weight: Any, bias: Any, A_log: Any, dt_bias: Any, norm_weight: Any, D: int
) -> Dict[str, Any]:
    """The weight arguments of ``PreparedKda(...)`` and ``process_weights_after_loading(...)``
    from an engine's source tensors (``conv_weight_of`` maps the engine's conv layout to
    ``[3D, 1, W]``). The stream wait comes last: a layout conversion queues a copy on the
    current stream, and the core reads every tensor with blocking copies outside it."""
    weights = dict(
        conv_weight=conv_weight_of(conv_weight, D),
        A_log=A_log.detach().view(-1),
        dt_bias=dt_bias.detach().view(-1),
        norm_weight=None if norm_weight is None else norm_weight.detach(),
        f_b_weight=None,
        conv_bias=None if bias is None else bias.detach(),
    )
    sync_current_stream(A_log)
    return weights


class AdapterLayer:
    """One prepared layer of an engine adapter and the source tensors its derived copies
    come from (``norm_weight`` None in no-norm mode)."""

    def __init__(
        self,
        kda: Any,
        conv_weight_of: ConvWeightOf,
        conv_weight: Any,
        bias: Any,
        A_log: Any,
        dt_bias: Any,
        norm_weight: Any,
    ) -> None:
        self.kda = kda
        self.conv_weight_of = conv_weight_of
        self.conv_weight = conv_weight
        self.bias = bias
        self.A_log = A_log
        self.dt_bias = dt_bias
        self.norm_weight = norm_weight

    def reload(self) -> None:
        """Recomputes the derived copies from the source tensors (reloaded in place)."""
        D = self.kda.heads * HEAD_DIM
        sources = (self.conv_weight, self.bias, self.A_log, self.dt_bias, self.norm_weight)
        self.kda.process_weights_after_loading(**core_weights(self.conv_weight_of, *sources, D))


class AdapterLayers:
    """The prepared layers of an engine adapter (one per distinct layer key, in the order of
    their first call) and what an engine asks of all of them.

    Args:
        null_slot: pad slot id besides negatives (-1 = none).
        variant: forced variant for every step ('auto' lets the planner choose).
    """

    def __init__(self, *, null_slot: int = 0, variant: str = "auto"):
        self.null_slot = int(null_slot)
        self.variant = variant
        self._layers: Dict[Tuple[Any, ...], AdapterLayer] = {}

    @property
    def prepared(self) -> List[PreparedKda]:
        """The prepared layers, in the order of their first call."""
        return [layer.kda for layer in self._layers.values()]

    def process_weights_after_loading(self) -> None:
        """Recomputes every prepared layer's derived conv/norm copies from the tensors it was
        first called with (reloaded in place). Call eagerly, once after a weight reload;
        captured CUDA graphs then replay with the new weights.

        Raises:
            ValueError / TypeError: a source tensor changed shape or dtype.
        """
        for layer in self._layers.values():
            layer.reload()

    def status(self) -> List[Status]:
        """Per prepared layer (first-call order): caller errors found in the data since the
        last call (see :meth:`PreparedKda.status`; synchronises the stream on CUDA)."""
        return [layer.kda.status() for layer in self._layers.values()]

    def clear(self) -> None:
        """Forgets every prepared layer (the next call of each prepares it again, eagerly)."""
        self._layers.clear()
