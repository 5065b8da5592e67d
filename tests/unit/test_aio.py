"""stop_tasks ends a task even when its first cancel was swallowed, and never waits for ever;
gather_all_or_none stops the siblings of a failed read."""

from __future__ import annotations

import asyncio

import pytest

from bot.aio import gather_all_or_none, stop_tasks


async def _swallows_one_cancel(ticks: list[int]) -> None:
    """Like a watcher whose `wait_for` lost the cancel: it catches the first and loops on."""
    swallowed = False
    while True:
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            if swallowed:
                raise
            swallowed = True
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        ticks.append(1)


async def _ignores_every_cancel(released: asyncio.Event) -> None:
    while not released.is_set():
        try:
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            continue


async def test_a_task_that_swallowed_its_cancel_is_cancelled_again_and_ends() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(_swallows_one_cancel(ticks))
    await asyncio.sleep(0.05)
    # what `task.cancel(); await task` would do here: wait for ever
    stuck = await stop_tasks([task], grace_s=5)
    assert stuck == [] and task.cancelled()


async def test_a_task_that_never_ends_is_returned_after_the_grace_not_awaited_for_ever() -> None:
    released = asyncio.Event()
    task = asyncio.create_task(_ignores_every_cancel(released))
    await asyncio.sleep(0.05)  # running, inside its loop
    loop = asyncio.get_running_loop()
    began = loop.time()
    stuck = await stop_tasks([task], grace_s=0.5)
    assert stuck == [task] and not task.done()
    assert loop.time() - began < 3
    released.set()  # this test's own hygiene: let it end
    await asyncio.wait({task}, timeout=5)
    assert task.done()


async def test_finished_and_failed_tasks_are_fine_and_their_errors_retrieved() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    done = asyncio.create_task(asyncio.sleep(0))
    failed = asyncio.create_task(fails())
    await asyncio.sleep(0.01)
    assert await stop_tasks([done, failed]) == []
    assert failed.done() and isinstance(failed.exception(), RuntimeError)


async def test_all_results_in_order_when_every_one_succeeds() -> None:
    async def value(x: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return x

    assert await gather_all_or_none(value(1, 0.02), value(2, 0.0), value(3, 0.01)) == [1, 2, 3]


async def test_a_failure_stops_the_siblings_before_it_is_raised() -> None:
    stopped = asyncio.Event()

    async def slow_read() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    async def failing_read() -> None:
        await asyncio.sleep(0.01)
        raise ConnectionError("node 1 went away")

    with pytest.raises(ConnectionError, match="went away"):
        await gather_all_or_none(slow_read(), failing_read())
    assert stopped.is_set()  # already stopped when the error reached the caller
