"""The layer's weights as :class:`~kda_decode.PreparedKda` hands them to the extension, at
construction and on a reload (process_weights_after_loading)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from .arguments import tensor

__all__ = ["KEEP", "NAMES", "convert", "ordered", "reload_arguments"]

#: The weight keywords, in the extension's order.
NAMES = ("conv_weight", "A_log", "dt_bias", "norm_weight", "f_b_weight", "conv_bias")
#: "keep the current value" (the default ``lower_bound`` of a reload).
KEEP: Any = object()


def convert(**w: Any) -> Dict[str, Any]:
    """The weights as the extension takes them (``ml_dtypes.bfloat16`` arrays as uint16 views)."""
    return {k: tensor(w.get(k)) for k in NAMES}


def ordered(w: Dict[str, Any]) -> Tuple[Any, Any, Any, Any, Any, Any]:
    """The six weights in the extension's positional order."""
    return w["conv_weight"], w["A_log"], w["dt_bias"], w["norm_weight"], w["f_b_weight"], w["conv_bias"]


def reload_arguments(
    attention: Any,
    given: Dict[str, Any],
    eps: Optional[float],
    lower_bound: Any,
    *,
    precomputed_gate: bool,
    output_norm: bool = True,
    current_eps: float,
    current_lower_bound: Optional[float],
) -> Tuple[Dict[str, Any], float, Optional[float]]:
    """(weights, eps, lower_bound) of a reload, from the module or from keyword weights.

    Raises:
        TypeError: both a module and weight keywords, or neither (the required weights:
            conv_weight, A_log, dt_bias and, with the output norm, norm_weight).
        AttributeError: the module lacks a required attribute.
    """
    if attention is not None:
        named = [k for k, v in given.items() if v is not None]
        if named:
            raise TypeError(f"process_weights_after_loading: pass the module or the weights, not both (got {named})")
        from .vllm import read_module

        given, m_eps, m_lb = read_module(attention, precomputed_gate, output_norm=output_norm)
        eps = m_eps if eps is None else eps
        lower_bound = m_lb if lower_bound is KEEP else lower_bound
    else:
        required = NAMES[:4] if output_norm else NAMES[:3]
        missing = [k for k in required if given.get(k) is None]
        if missing:
            raise TypeError(f"process_weights_after_loading: missing weights {missing} (or pass the attention module)")
    new_eps = current_eps if eps is None else float(eps)
    if lower_bound is KEEP:
        new_lb = current_lower_bound
    else:
        new_lb = None if lower_bound is None else float(lower_bound)
    return convert(**given), new_eps, new_lb
