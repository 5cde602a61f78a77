# Stubs of the extension kda_decode._core (csrc/), made with
#   python -m nanobind.stubgen -m kda_decode._core -o python/kda_decode/_core.pyi
# from an installed build; make them again when the bindings change (mypy reads them).
"""
kda-decode native core (nanobind). Use the wrappers in the kda_decode package; this module's signatures are positional and internal.
"""

from collections.abc import Sequence
from typing import Final

import numpy
from numpy.typing import NDArray

HEAD_DIM: int = 128

RANK: int = 128

MAX_Q: int = 16

SLOT_RANGE: int = 1

ROW_RANGE: int = 2

ACCEPTED: int = 4

PENDING: int = 8

PAD_START: int = 16

MODES: tuple[str, ...] = ("decode", "append", "per_token", "record", "fused")

class Error(ValueError):
    pass

class DTypeError(TypeError):
    pass

class ShapeError(ValueError):
    pass

class LayoutError(ValueError):
    pass

class DeviceError(ValueError):
    pass

class ArgumentError(ValueError):
    pass

class PlanError(ValueError):
    pass

class Caches:
    """
    kda::Caches: the tensors of a layer's caches (kda_decode.Caches converts to it).
    """

    def __init__(
        self,
        conv_state: object | None,
        state: object | None,
        correction: object | None = None,
        key_gate: object | None = None,
        pending: object | None = None,
    ) -> None: ...
    @property
    def conv_state(self) -> object: ...
    @conv_state.setter
    def conv_state(self, arg: object, /) -> None: ...
    @property
    def state(self) -> object: ...
    @state.setter
    def state(self, arg: object, /) -> None: ...
    @property
    def correction(self) -> object: ...
    @correction.setter
    def correction(self, arg: object, /) -> None: ...
    @property
    def key_gate(self) -> object: ...
    @key_gate.setter
    def key_gate(self, arg: object, /) -> None: ...
    @property
    def pending(self) -> object: ...
    @pending.setter
    def pending(self, arg: object, /) -> None: ...

class StepArgs:
    """kda::StepArgs: the per-step arguments besides inputs, out and caches."""

    def __init__(
        self,
        slots: object | None,
        q: int = 1,
        mode: str = "decode",
        accepted: object | None = None,
        out_slots: object | None = None,
        record_rows: object | None = None,
        stream: int = 0,
    ) -> None: ...
    @property
    def slots(self) -> object: ...
    @slots.setter
    def slots(self, arg: object, /) -> None: ...
    @property
    def q(self) -> int: ...
    @q.setter
    def q(self, arg: int, /) -> None: ...
    @property
    def mode(self) -> str: ...
    @mode.setter
    def mode(self, arg: str, /) -> None: ...
    @property
    def accepted(self) -> object: ...
    @accepted.setter
    def accepted(self, arg: object, /) -> None: ...
    @property
    def out_slots(self) -> object: ...
    @out_slots.setter
    def out_slots(self, arg: object, /) -> None: ...
    @property
    def record_rows(self) -> object: ...
    @record_rows.setter
    def record_rows(self, arg: object, /) -> None: ...
    @property
    def stream(self) -> int: ...
    @stream.setter
    def stream(self, arg: int, /) -> None: ...

class Policy:
    """
    What the caller fixes per step key (SPEC §5).

    Policy(pitch=0, gate_mode='auto', variant='auto', narrow='auto')

    pitch: packed-row pitch in elements the step must be given (0 = take it from the tensor; checked >= 0 by PreparedKda).
    gate_mode: 'auto' (the planner picks 0 or 1), 0 per item, 1 shared, 2 precomputed (gate_in holds F_B·f_a, D wide).
    variant: 'auto' or a forced variant: 'cpu', 'split', 'wide', 'stream', 'ws'.
    narrow: the CTA form of Wide's q = 1 decode / per_token steps with bf16 state in gate modes 1 and 2: 'auto' (the planner's rule: beyond one wave of six CTAs per SM on a device of high DRAM bandwidth per SM), 'on' (128-thread CTAs wherever the grid is beyond one wave of six), 'off' (256-thread CTAs).

    Raises ArgumentError (ValueError) for an unknown gate mode, variant or narrow name, DTypeError (TypeError) for a gate mode of the wrong type.
    """

    def __init__(
        self, pitch: int = 0, gate_mode: object = "auto", variant: str = "auto", narrow: str = "auto"
    ) -> None: ...
    @property
    def pitch(self) -> int:
        """Packed-row pitch in elements (0 = any)."""

    @pitch.setter
    def pitch(self, arg: int, /) -> None: ...
    @property
    def gate_mode(self) -> object:
        """'auto', 0, 1 or 2."""

    @gate_mode.setter
    def gate_mode(self, arg: object, /) -> None: ...
    @property
    def variant(self) -> str:
        """'auto' or a forced variant name."""

    @variant.setter
    def variant(self, arg: str, /) -> None: ...
    @property
    def narrow(self) -> str:
        """'auto', 'on' or 'off'."""

    @narrow.setter
    def narrow(self, arg: str, /) -> None: ...
    def __eq__(self, arg: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __repr__(self) -> str: ...

class Status:
    """
    Caller errors found in the data since the last status() call (SPEC §4).

    flags: OR of SLOT_RANGE=1, ROW_RANGE=2, ACCEPTED=4, PENDING=8, PAD_START=16.
    first_request: the lowest offending request index, -1 when flags == 0.
    ok: flags == 0.
    """

    def __init__(self) -> None: ...
    @property
    def flags(self) -> int:
        """OR of the error flags (int)."""

    @property
    def first_request(self) -> int:
        """Lowest offending request index, -1 if none."""

    @property
    def ok(self) -> bool:
        """True when no flag is set."""

    def describe(self) -> str:
        """'ok' or e.g. 'SLOT_RANGE|ACCEPTED (first request 3)'."""

    def __repr__(self) -> str: ...
    def __eq__(self, arg: object, /) -> bool: ...

    SLOT_RANGE: Final[int] = ...
    """(arg: object, /) -> int"""

    ROW_RANGE: Final[int] = ...
    """(arg: object, /) -> int"""

    ACCEPTED: Final[int] = ...
    """(arg: object, /) -> int"""

    PENDING: Final[int] = ...
    """(arg: object, /) -> int"""

    PAD_START: Final[int] = ...
    """(arg: object, /) -> int"""

class PreparedKda:
    """
    Native kda::PreparedKda. Internal: use kda_decode.PreparedKda, which keeps the borrowed weights alive and resolves streams.
    """

    def __init__(
        self,
        conv_weight: object | None,
        A_log: object | None,
        dt_bias: object | None,
        norm_weight: object | None,
        f_b_weight: object | None,
        conv_bias: object | None,
        eps: float,
        lower_bound: float | None,
        output_norm: bool,
        policies: Sequence[tuple[str, int, int, Policy]],
        conv_dim_first: bool,
        null_slot: int,
        default_policy: Policy,
    ) -> None: ...
    def prepare(self, caches: Caches) -> None: ...
    def run(self, projected: object | None, out: object | None, caches: Caches, args: StepArgs) -> None: ...
    def run_views(
        self,
        qkv: object | None,
        out_gate: object | None,
        gate_in: object | None,
        beta: object | None,
        out: object | None,
        caches: Caches,
        args: StepArgs,
    ) -> None: ...
    def commit(
        self, caches: Caches, slots: object | None, record_rows: object | None, counts: object | None, stream: int
    ) -> None: ...
    def flush(self, caches: Caches, slots: object | None, record_rows: object | None, stream: int) -> None: ...
    def process_weights_after_loading(
        self,
        conv_weight: object | None,
        A_log: object | None,
        dt_bias: object | None,
        norm_weight: object | None,
        f_b_weight: object | None,
        conv_bias: object | None,
        eps: float,
        lower_bound: float | None,
        output_norm: bool,
    ) -> None: ...
    def status(self, stream: int) -> Status: ...
    def plan(self, mode: str, B: int, q: int, caches: Caches) -> dict: ...
    @property
    def heads(self) -> int: ...
    @property
    def taps(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def device_info(self) -> dict: ...

def decode_conv_weight(conv_weight: object | None) -> NDArray[numpy.float32]:
    """
    nn.Conv1d depthwise weight [3D, 1, W] (fp32 or bf16, host memory) -> numpy [3, W, D] fp32.
    """

def stream_layout(
    conv_state: object | None,
    state: object | None,
    q: int,
    conv_dim_first: bool,
    input_row_stride_bytes: int,
    out_row_stride_bytes: int,
    W: int,
) -> tuple[bool, int] | None: ...
def stream_ctas(items: int, sms: int) -> int:
    """
    Persistent CTAs for `items` items on `sms` SMs: per = ceil(items / 2·sms), ctas = ceil(items / per).
    """

def deferred_supported(state: object | None, lower_bound: float | None) -> bool: ...
def replays(H: int, B: int, q: int) -> bool:
    """
    Does a fused step of this shape run a fused variant (else flush + record verify)?
    """

def cuda_built() -> bool:
    """True when the extension was built with the CUDA backend."""
