"""Waiting on a condition with a deadline, never a sleep standing in for readiness.

The condition is a plain or an async callable; it is looked at with a growing back-off (50 ms up
to 0.5 s), and the wait fails with what it waited for once `timeout` seconds have passed."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from bot.target.nodestate import Backoff


async def until(
    condition: Callable[[], object | Awaitable[object]], what: str, timeout: float = 30.0
) -> None:
    backoff = Backoff(0.05, 1.5, 0.5)
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while True:
        found = condition()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return
        if datetime.now(UTC) > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await backoff.sleep()
