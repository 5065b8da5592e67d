"""How a load worker measures itself: its event loop's lag and idle time, and an artificial
per-event CPU cost.

Why apart from the worker: these are the client's own instruments (`client_health` judges a
level by them), not part of sending requests; the worker only starts and stops them.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from array import array
from collections.abc import Callable
from typing import Any

__all__ = ["LAG_PERIOD", "IdleMeter", "lag_probe", "spin"]

LAG_PERIOD = 0.005
"""The loop-lag probe's period: short enough to see a busy loop, long enough to cost nothing."""


def spin(seconds: float) -> None:
    """Burn `seconds` of CPU (tests and docs show what a saturated client looks like)."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


Select = Callable[[float | None], list[tuple[selectors.SelectorKey, int]]]
"""A selector's `select` (`selectors.BaseSelector.select`)."""


class IdleMeter:
    """Sums the time the loop waits in its selector: wall minus that is the time it was busy
    (running callbacks, or descheduled by the OS while runnable). Wraps the selector's `select`
    of asyncio's own loop; on another loop (uvloop) it measures nothing and says so (None)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.idle = 0.0
        selector: Any = getattr(loop, "_selector", None)  # asyncio's own; private, stable since 3.4
        self._selector = selector
        original: Select | None = getattr(selector, "select", None)
        self._original = original
        if original is None:
            return

        def select(timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            start = time.perf_counter()
            try:
                return original(timeout)
            finally:
                self.idle += time.perf_counter() - start

        selector.select = select

    def stop(self) -> float | None:
        if self._original is None:
            return None
        self._selector.select = self._original
        return self.idle


async def lag_probe(stop: asyncio.Event, lags: array[float]) -> None:
    """How late the loop runs a timer: the time every read's timestamp may be stale by."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(LAG_PERIOD)
        lags.append(time.perf_counter() - t - LAG_PERIOD)
