"""A line per stage of a long run, with elapsed time and ETA, for a person at a terminal.

Used by ``python -m kda_decode.main``. ``Progress(enabled=None)`` decides by itself: on when
the stream is a terminal and ``CI`` is not set in the environment, off otherwise (logs and CI
stay as they were). The ETA weighs the stages: a stage of weight 8 is expected to take as
long as eight of weight 1, from the time per weight of the stages done so far.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Callable, Iterator, Optional, TextIO


def auto_enabled(stream: Optional[TextIO] = None) -> bool:
    """On for a terminal, off in CI (``CI`` set and not 0/false) or when redirected."""
    s = sys.stderr if stream is None else stream
    ci = os.environ.get("CI", "").strip().lower()
    if ci and ci not in ("0", "false", "no"):
        return False
    isatty = getattr(s, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def _fmt(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    m, s = divmod(round(seconds), 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


class Progress:
    """Stages of known relative cost; prints ``[i/n] name ...`` and, when it ends,
    ``[i/n] name: X s (elapsed Y, ETA Z)``.

    Args:
        total_weight: the sum of the weights of every stage to come.
        stages: how many stages (for ``[i/n]``).
        enabled: True / False, or None for :func:`auto_enabled`.
        stream: where the lines go (default: stderr, so stdout stays the report).
        clock: the time source (tests).
    """

    def __init__(
        self,
        total_weight: float,
        stages: int,
        *,
        enabled: Optional[bool] = None,
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = auto_enabled(self.stream) if enabled is None else bool(enabled)
        self.total = float(total_weight)
        self.n = int(stages)
        self.i = 0
        self.done_weight = 0.0
        self.clock = clock
        self.t0 = clock()

    def _line(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.stream, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str, weight: float = 1.0) -> Iterator[None]:
        """A stage: the line before it and the line after it, with timings."""
        self.i += 1
        tag = f"[{self.i}/{self.n}]"
        self._line(f"{tag} {name} ...")
        t = self.clock()
        yield
        now = self.clock()
        self.done_weight += float(weight)
        elapsed = now - self.t0
        left = max(0.0, self.total - self.done_weight)
        eta = elapsed / self.done_weight * left if self.done_weight > 0 else 0.0
        tail = "done" if left <= 0 else f"ETA {_fmt(eta)}"
        self._line(f"{tag} {name}: {_fmt(now - t)} (elapsed {_fmt(elapsed)}, {tail})")
