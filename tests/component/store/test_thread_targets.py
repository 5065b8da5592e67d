"""Which target a Slack thread is about (`thread_targets`), on SQLite and PostgreSQL: the runs
recorded in it, an approval card at its root, an investigation discussed in it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.digest.threads import THREAD_ACTION, record_thread
from bot.store import Store
from bot.store.approvals import create_request, set_card
from bot.store.experiments import create_experiment
from bot.store.investigations import open_investigation
from bot.store.records import audit, thread_targets


@pytest.fixture
def store(empty_store: Store) -> Store:
    empty_store.upgrade()
    return empty_store


def targets(store: Store, channel: str, ts: str) -> set[str]:
    return thread_targets(store, channel, ts, action=THREAD_ACTION)


def test_a_thread_is_about_the_targets_recorded_in_it_and_nothing_else(store: Store) -> None:
    row = create_experiment(store, target="prod", playbook="try", params={}, actor="slack:U1")
    record_thread(store, experiment_id=row.id, target="prod", channel="C1", thread_ts="100.1")
    record_thread(store, experiment_id=None, target="prod", channel="C1", thread_ts="100.1")
    record_thread(store, experiment_id=None, target="dev", channel="C1", thread_ts="200.2")
    record_thread(store, experiment_id=None, target="dev", channel="C2", thread_ts="100.1")
    audit(store, actor="x", target="dev", action="slack:try", detail={"channel": "C1", "thread_ts": "100.1"})
    assert targets(store, "C1", "100.1") == {
        "prod"
    }  # another action with the same detail is no thread record
    assert targets(store, "C1", "200.2") == {"dev"}
    assert targets(store, "C2", "100.1") == {"dev"}
    assert targets(store, "C1", "999.9") == set()
    record_thread(store, experiment_id=None, target="dev", channel="C1", thread_ts="100.1")
    assert targets(store, "C1", "100.1") == {"prod", "dev"}


def test_an_approval_card_and_an_investigation_root_their_threads(store: Store) -> None:
    request = create_request(
        store,
        target="prod",
        command="revert 3 target=prod",
        requester="U1",
        channel="C1",
        needs="approval",
        expires_in=timedelta(hours=1),
    )
    assert request.id is not None
    set_card(store, request.id, "300.3")
    open_investigation(store, target="staging", title="why", created_by="U1", channel="C1", thread_ts="400.4")
    assert targets(store, "C1", "300.3") == {"prod"}
    assert targets(store, "C1", "400.4") == {"staging"}
