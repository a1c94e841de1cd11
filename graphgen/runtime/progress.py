"""A progress line on stderr for long runs: lines done, rate, time left.

Written here rather than taken from tqdm or rich because the runtime path depends on
onnxruntime, onnxruntime-extensions and numpy only.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Redrawn in place on a terminal; one line every ``interval`` seconds elsewhere (logs, CI)."""

    def __init__(self, total: int | None, *, done: int = 0, unit: str = "lines", stream: TextIO | None = None) -> None:
        self.total = total
        self.done = done
        self.unit = unit
        self.stream = stream or sys.stderr
        self.terminal = self.stream.isatty()
        self.interval = 0.2 if self.terminal else 10.0
        self._first = done
        self._started = time.perf_counter()
        self._shown = 0.0
        self._shown_done: int | None = None

    def advance(self, count: int) -> None:
        self.done += count
        now = time.perf_counter()
        if now - self._shown >= self.interval:
            self._shown = now
            self._draw(now)

    def close(self) -> None:
        if self._shown_done != self.done:
            self._draw(time.perf_counter())
        if self.terminal:
            self.stream.write("\n")
        self.stream.flush()

    def line(self, now: float | None = None) -> str:
        elapsed = (now or time.perf_counter()) - self._started
        rate = (self.done - self._first) / elapsed if elapsed > 0 else 0.0
        text = f"{self.done:,}"
        if self.total:
            text += f"/{self.total:,} {self.unit} ({100 * self.done / self.total:.0f}%)"
        else:
            text += f" {self.unit}"
        text += f", {rate:.1f} {self.unit}/s, {_clock(elapsed)} elapsed"
        if self.total and rate > 0 and self.done < self.total:
            text += f", {_clock((self.total - self.done) / rate)} left"
        return text

    def _draw(self, now: float) -> None:
        self._shown_done = self.done
        text = f"[graphgen] {self.line(now)}"
        self.stream.write(f"\r{text}\x1b[K" if self.terminal else f"{text}\n")
        self.stream.flush()
