"""Stopping background tasks without trusting that one cancel is enough.

Python 3.11's `asyncio.wait_for` can swallow a cancellation that arrives just as the awaited
thing finishes (the result wins, the cancel is lost). A watcher loop that was inside such a call
then goes on forever, and `task.cancel(); await task` waits for it forever: CI once saw a
rollback hang for ten minutes this way in readiness's unit watcher. `stop_tasks` re-sends the
cancel until every task has ended, and gives up (loudly) after a bounded grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterable
from typing import Any

log = logging.getLogger(__name__)
RESEND_S = 0.2


async def stop_tasks(
    tasks: Iterable[asyncio.Future[Any]], *, grace_s: float = 5.0
) -> list[asyncio.Future[Any]]:
    """Cancel `tasks` and wait until they have ended; return those still running after `grace_s`.

    A task's own exception is retrieved (and dropped): the caller is stopping it, not waiting
    for its result. A task that survives the grace is logged and left to the loop's shutdown.
    """
    everything = list(tasks)
    pending = {task for task in everything if not task.done()}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s
    while pending:
        for task in pending:
            task.cancel()
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(RESEND_S, remaining))
    for task in everything:
        if task.done() and not task.cancelled():
            with contextlib.suppress(BaseException):
                task.exception()
    if pending:
        log.warning(
            "%d task(s) did not stop within %.1f s: %s", len(pending), grace_s, sorted(map(repr, pending))
        )
    return list(pending)


async def gather_all_or_none(*awaitables: Awaitable[Any]) -> list[Any]:
    """`asyncio.gather`, except that when one fails the others are stopped before it is raised.

    Plain `gather` raises the first error and leaves the siblings running: remote reads go on
    with nobody waiting for them (holding SSH channels, up to their own timeouts)."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        await stop_tasks(tasks)
        raise
