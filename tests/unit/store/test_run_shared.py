"""`AsyncStore.run_shared`: reads asked under one key while one is in flight share it (its result
or its error); the next read after it ends asks again; another key, or a cancelled waiter, does
not disturb them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store import AsyncStore, Store

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = AsyncStore(Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}"))
    try:
        yield opened
    finally:
        await opened.aclose()


class Read:
    """A read held until released, counting how often it ran."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def __call__(self, answer: str) -> str:
        self.calls += 1
        self.started.set()
        assert self.release.wait(30)
        if self.fail:
            raise LookupError("the store said no")
        return f"{answer}#{self.calls}"


async def _started(read: Read) -> None:
    assert await asyncio.to_thread(read.started.wait, 30)


async def test_waiters_share_the_read_in_flight_and_the_next_read_asks_again(store: AsyncStore) -> None:
    read = Read()
    first = asyncio.create_task(store.run_shared(("facts", "lab"), read, "lab"))
    await _started(read)
    others = [asyncio.create_task(store.run_shared(("facts", "lab"), read, "lab")) for _ in range(5)]
    await asyncio.sleep(0)  # one turn of the loop: each waiter has asked (the read is still held)
    read.release.set()
    assert await asyncio.gather(first, *others) == ["lab#1"] * 6
    assert read.calls == 1
    assert await store.run_shared(("facts", "lab"), read, "lab") == "lab#2"


async def test_another_key_is_another_read(store: AsyncStore) -> None:
    lab, prod = Read(), Read()
    held = asyncio.create_task(store.run_shared(("facts", "lab"), lab, "lab"))
    await _started(lab)
    prod.release.set()
    # one worker thread (SQLite): prod's read runs once lab's has ended
    other = asyncio.create_task(store.run_shared(("facts", "prod"), prod, "prod"))
    lab.release.set()
    assert await held == "lab#1" and await other == "prod#1"
    assert (lab.calls, prod.calls) == (1, 1)


async def test_an_error_reaches_every_waiter_and_a_cancelled_one_leaves_the_rest(store: AsyncStore) -> None:
    read = Read(fail=True)
    waiters = [asyncio.create_task(store.run_shared("k", read, "x")) for _ in range(3)]
    await _started(read)
    waiters[0].cancel()
    read.release.set()
    outcomes = await asyncio.gather(*waiters, return_exceptions=True)
    assert isinstance(outcomes[0], asyncio.CancelledError)
    assert all(isinstance(outcome, LookupError) for outcome in outcomes[1:])
    assert read.calls == 1
