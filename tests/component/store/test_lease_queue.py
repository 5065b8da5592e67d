"""The waiting queue's repository (`bot.store.lease_queue`, revision 0009), on SQLite and
PostgreSQL, with explicit times: oldest live waiter first, a stale, cancelled or expired waiter
skipped, a cancel marked once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.store import Store
from bot.store.lease_queue import (
    WaiterInfo,
    cancel_waiter,
    get_waiter,
    join_queue,
    leave_queue,
    live_waiters,
    poll_queue,
)

T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
STALE_S = 15.0
TARGET = "lab"


@pytest.fixture
def store(empty_store: Store) -> Store:
    empty_store.upgrade()
    return empty_store


def waiter(store: Store, who: str, at: datetime, *, wait: timedelta = timedelta(minutes=30)) -> WaiterInfo:
    return join_queue(
        store,
        TARGET,
        holder=f"{who}:0123abcd",
        purpose="try",
        requested_by=who,
        command=f"try --x=1 ({who})",
        deadline=at + wait,
        now=at,
    )


def test_three_waiters_are_served_oldest_first(store: Store) -> None:
    first = waiter(store, "slack:U1", T0)
    second = waiter(store, "slack:U2", T0 + timedelta(seconds=1))
    third = waiter(store, "slack:U3", T0 + timedelta(seconds=2))
    now = T0 + timedelta(seconds=3)
    assert [w.id for w in live_waiters(store, TARGET, stale_after_s=STALE_S, now=now)] == [
        first.id,
        second.id,
        third.id,
    ]
    assert poll_queue(store, first.id, stale_after_s=STALE_S, now=now).ahead == []
    assert [w.id for w in poll_queue(store, third.id, stale_after_s=STALE_S, now=now).ahead] == [
        first.id,
        second.id,
    ]
    leave_queue(store, first.id)  # it got the lease: the second is now first in line
    assert poll_queue(store, second.id, stale_after_s=STALE_S, now=now).ahead == []
    assert get_waiter(store, first.id) is None


def test_a_waiter_not_seen_for_three_polls_is_skipped(store: Store) -> None:
    dead = waiter(store, "slack:U1", T0)
    alive = waiter(store, "slack:U2", T0 + timedelta(seconds=1))
    later = T0 + timedelta(seconds=STALE_S + 5)
    turn = poll_queue(store, alive.id, stale_after_s=STALE_S, now=later)  # the dead one never polled again
    assert not turn.cancelled and turn.ahead == []
    assert [w.id for w in live_waiters(store, TARGET, stale_after_s=STALE_S, now=later)] == [alive.id]
    assert dead.id not in [w.id for w in live_waiters(store, None, stale_after_s=STALE_S, now=later)]


def test_a_waiter_past_its_deadline_is_not_live(store: Store) -> None:
    waiter(store, "slack:U1", T0, wait=timedelta(seconds=10))
    assert live_waiters(store, TARGET, stale_after_s=STALE_S, now=T0 + timedelta(seconds=5))
    assert live_waiters(store, TARGET, stale_after_s=STALE_S, now=T0 + timedelta(seconds=11)) == []


def test_a_cancelled_waiter_sees_it_at_its_next_poll_and_leaves_the_queue(store: Store) -> None:
    first = waiter(store, "slack:U1", T0)
    second = waiter(store, "slack:U2", T0 + timedelta(seconds=1))
    done = cancel_waiter(store, first.id, actor="slack:U9", now=T0 + timedelta(seconds=2))
    assert done is not None and done.cancelled_by == "slack:U9"
    again = cancel_waiter(store, first.id, actor="slack:U8")  # already cancelled: the first stays
    assert again is not None and again.cancelled_by == "slack:U9"
    now = T0 + timedelta(seconds=3)
    assert poll_queue(store, first.id, stale_after_s=STALE_S, now=now).cancelled
    assert poll_queue(store, second.id, stale_after_s=STALE_S, now=now).ahead == []  # no longer ahead
    assert cancel_waiter(store, 999, actor="slack:U9") is None
