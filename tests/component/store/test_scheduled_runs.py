"""Claims of scheduled runs (`bot.store.scheduled_runs`) on SQLite and PostgreSQL: a run is
claimed once, a finished one is never claimed again, an unfinished one of another replica is
taken over (the next leader's), and its claimant then cannot finish it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.store import Store
from bot.store.scheduled_runs import claim_run, finish_run, get_run, unfinished_runs

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
KEY = "digest:2026-W48"


@pytest.fixture
def store(empty_store: Store) -> Store:
    """Upgraded, on SQLite and PostgreSQL (tests/conftest.py)."""
    empty_store.upgrade()
    return empty_store


def test_a_finished_run_is_never_claimed_again(store: Store) -> None:
    assert claim_run(store, KEY, job="digest", replica="a", now=T0)
    assert claim_run(store, KEY, job="digest", replica="a", now=T0)  # its own claim, again
    assert finish_run(store, KEY, replica="a", now=T0 + timedelta(seconds=3))
    assert not claim_run(store, KEY, job="digest", replica="b", now=T0 + timedelta(hours=1))
    assert not claim_run(store, KEY, job="digest", replica="a", now=T0 + timedelta(hours=1))
    assert unfinished_runs(store, job="digest", other_than="b") == []


def test_an_unfinished_run_of_a_dead_replica_is_taken_over_once(store: Store) -> None:
    assert claim_run(store, KEY, job="digest", replica="dead", now=T0)
    (owed,) = unfinished_runs(store, job="digest", other_than="new")
    assert (owed.key, owed.replica, owed.started_at) == (KEY, "dead", T0)
    assert unfinished_runs(store, job="digest", other_than="dead") == []
    assert claim_run(store, KEY, job="digest", replica="new", now=T0 + timedelta(minutes=1))
    assert not finish_run(store, KEY, replica="dead")  # the old claimant lost it
    assert finish_run(store, KEY, replica="new", now=T0 + timedelta(minutes=2))
    done = get_run(store, KEY)
    assert done is not None and done.replica == "new" and done.started_at == T0
    assert done.finished_at == T0 + timedelta(minutes=2)
