"""`flagbot serve` stopping: runs in flight get a grace, then are cancelled; a second signal skips it."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.serve import wind_down


class Services:
    """The two things wind_down uses of SlackServices: the task set and drain()."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Any) -> asyncio.Task[Any]:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)


async def test_a_run_that_ends_within_the_grace_is_not_cancelled() -> None:
    services = Services()
    run = services.spawn(asyncio.sleep(0.2, result="done"))
    stop = asyncio.Event()
    stop.set()  # the signal that started the wind-down
    await wind_down(services, stop, grace_s=10)
    assert run.result() == "done"


async def test_a_run_longer_than_the_grace_is_cancelled() -> None:
    services = Services()
    run = services.spawn(asyncio.sleep(3600))
    loop = asyncio.get_running_loop()
    began = loop.time()
    await wind_down(services, asyncio.Event(), grace_s=0.3)
    assert run.cancelled() and loop.time() - began < 5


async def test_a_second_signal_cancels_at_once() -> None:
    services = Services()
    run = services.spawn(asyncio.sleep(3600))
    stop = asyncio.Event()
    stop.set()
    loop = asyncio.get_running_loop()
    began = loop.time()
    stopping = asyncio.create_task(wind_down(services, stop, grace_s=3600))
    await asyncio.sleep(0.1)
    assert not stop.is_set()  # cleared: waiting for a second signal
    stop.set()
    await asyncio.wait_for(stopping, 10)
    assert run.cancelled() and loop.time() - began < 5


async def test_nothing_in_flight_returns_at_once() -> None:
    await asyncio.wait_for(wind_down(Services(), asyncio.Event(), grace_s=3600), 1)
