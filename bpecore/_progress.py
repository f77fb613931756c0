"""The one progress bar of the command line and the trainer: a line on stderr, redrawn in place.

``Progress("chunk", total, "M chars", 1e6)`` is called with the amount done so far
(``bar(done)``; at most one redraw per ``interval`` seconds) and closed with ``bar.close()``:
``chunk [############                  ]  42%  12.3 M chars/s``. Without a total it shows the
amount instead of the bar: ``pre-tokenize: 12.3 MB  4.5 MB/s``.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A one-line progress bar: ``label [####......]  42%  rate unit/s``, or the amount done."""

    WIDTH = 30  #: characters of the bar

    def __init__(
        self,
        label: str,
        total: float | None,
        unit: str = "",
        scale: float = 1.0,
        stream: TextIO | None = None,
        interval: float = 0.1,
    ) -> None:
        self.label, self.total, self.unit, self.scale = label, total or None, unit, scale
        self.stream = sys.stderr if stream is None else stream
        self.interval = interval
        self.start = time.perf_counter()
        self.last = 0.0
        self.done = 0.0

    def __call__(self, done: float, force: bool = False) -> None:
        """Record ``done`` (in the caller's units, before ``scale``); redraw if due or ``force``."""
        self.done = done
        now = time.perf_counter()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9) / self.scale
        if self.total:
            frac = min(done / self.total, 1.0)
            line = f"{self.label} [{'#' * int(frac * self.WIDTH):<{self.WIDTH}}] {frac:4.0%} {rate:7.1f} {self.unit}/s"
        else:
            line = f"{self.label}: {done / self.scale:.1f} {self.unit}  {rate:.1f} {self.unit}/s"
        self.stream.write(f"\r{line}   ")
        self.stream.flush()

    def close(self, done: float | None = None) -> None:
        """Draw the final state (``done``, else the last amount recorded) and end the line."""
        self(self.done if done is None else done, force=True)
        self.stream.write("\n")
        self.stream.flush()
