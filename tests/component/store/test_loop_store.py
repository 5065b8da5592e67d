"""Revision 0003 (the diagnostic loop's tables) and its repositories, on SQLite and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import event, inspect
from sqlmodel import Session, col, select

from bot.store import AsyncStore, AuditEvent, Baseline, Experiment, Measurement, Snapshot, Store
from bot.store.baselines import current_baseline, pin_baseline
from bot.store.database import make_engine
from bot.store.experiments import (
    cancel_requester,
    create_experiment,
    finish_step,
    get_experiment,
    latest_experiment,
    list_experiments,
    list_steps,
    request_cancel,
    start_step,
    unfinished_experiments,
    update_experiment,
)
from bot.store.hypotheses import (
    add_hypothesis,
    experiments_of,
    get_hypothesis,
    list_hypotheses,
    resolve_hypothesis,
)
from bot.store.investigations import get_investigation, open_investigation
from bot.store.leases import (
    Acquired,
    LeaseHeld,
    acquire,
    attach_experiment,
    current,
    expired_leases,
    heartbeat,
    release,
)
from bot.store.migrate import alembic_config, head_revision, upgrade
from bot.store.models import MeasurementSet
from bot.store.observations import add_observation, list_observations
from bot.store.records import add_evidence, audit, audit_events, evidence_of

LOOP_TABLES = {
    "lease",
    "lease_waiter",
    "experiment",
    "experiment_step",
    "hypothesis",
    "evidence",
    "audit_event",
    "baseline",
    "investigation",
    "kb_observation",
}
T0 = datetime(2026, 11, 29, 22, 40, 1, tzinfo=UTC)
ALICE = {"holder": "cli:alice@laptop", "host": "laptop", "pid": 4242, "purpose": "try"}
BOB = {"holder": "slack:bob", "host": "bot-1", "pid": 77, "purpose": "verify"}


@pytest.fixture
def store(empty_store: Store) -> Store:
    empty_store.upgrade()
    return empty_store


@pytest.fixture
def another_store(store: Store) -> Iterator[Callable[[], Store]]:
    """Opens more Store instances (own engines, own connections) on the same database."""
    opened: list[Store] = []

    def open_one() -> Store:
        opened.append(Store(make_engine(store.engine.url.render_as_string(hide_password=False))))
        return opened[-1]

    yield open_one
    for one in opened:
        one.close()


def a_snapshot(store: Store, target: str = "sglang-qwen") -> int:
    snapshot = store.add(Snapshot(target=target, effective={"max_running_requests": 26}))
    assert snapshot.id is not None
    return snapshot.id


def an_experiment(store: Store, target: str = "sglang-qwen", playbook: str = "try") -> int:
    experiment = create_experiment(
        store, target=target, playbook=playbook, params={"changes": ["--x=1"]}, actor="alice"
    )
    assert experiment.id is not None
    return experiment.id


# --- migrations ---------------------------------------------------------------------------------


def test_importing_the_models_registers_the_loop_tables() -> None:
    """Alembic's env.py imports only bot.store.models; the loop tables must come with it."""
    code = "import bot.store.models\nfrom sqlmodel import SQLModel\nprint(' '.join(SQLModel.metadata.tables))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(out.stdout.split()) >= LOOP_TABLES


def test_head_has_the_loop_tables(store: Store) -> None:
    assert head_revision(store.engine) == "0011"
    assert store.revision() == "0011"
    assert set(inspect(store.engine).get_table_names()) >= LOOP_TABLES
    step_columns = {c["name"] for c in inspect(store.engine).get_columns("experiment_step")}
    assert {"experiment_id", "index", "status", "result", "finished_at"} <= step_columns


def test_upgrade_from_0002_keeps_the_rows(empty_store: Store) -> None:
    upgrade(empty_store.engine, "0002")
    assert not set(inspect(empty_store.engine).get_table_names()) & LOOP_TABLES
    snapshot_id = a_snapshot(empty_store)
    measurement_set = empty_store.add(MeasurementSet(target="sglang-qwen", snapshot_id=snapshot_id))
    empty_store.add(
        Measurement(
            target="sglang-qwen",
            snapshot_id=snapshot_id,
            set_id=measurement_set.id,
            concurrency=64,
            metrics={"output_throughput": 1582.4},
        )
    )

    assert empty_store.upgrade() == "0011"

    kept = empty_store.latest_snapshot("sglang-qwen")
    assert kept is not None and kept.id == snapshot_id and kept.effective == {"max_running_requests": 26}
    [measurement] = empty_store.measurements(snapshot_id=snapshot_id)
    assert measurement.set_id == measurement_set.id
    assert measurement.metrics == {"output_throughput": 1582.4}
    pinned = pin_baseline(
        empty_store,
        target="sglang-qwen",
        snapshot_id=snapshot_id,
        set_id=measurement_set.id,
        pinned_by="alice",
    )
    assert current_baseline(empty_store, "sglang-qwen") == pinned


def test_downgrade_to_0002_drops_only_the_loop_tables_and_upgrade_brings_them_back(store: Store) -> None:
    snapshot_id = a_snapshot(store)
    experiment_id = an_experiment(store)
    acquire(store, "sglang-qwen", **ALICE, experiment_id=experiment_id)

    command.downgrade(alembic_config(store.engine), "0002")

    assert store.revision() == "0002"
    tables = set(inspect(store.engine).get_table_names())
    assert not tables & LOOP_TABLES
    assert {"snapshot", "measurement", "measurement_set", "comparison", "target_state"} <= tables
    snapshot = store.latest_snapshot("sglang-qwen")
    assert snapshot is not None and snapshot.id == snapshot_id

    assert store.upgrade() == "0011"
    assert get_experiment(store, experiment_id) is None
    assert current(store, "sglang-qwen") is None
    assert an_experiment(store) >= 1


# --- leases -------------------------------------------------------------------------------------


def test_a_free_target_is_acquired(store: Store) -> None:
    got = acquire(store, "sglang-qwen", **ALICE, ttl_s=30, now=T0)
    assert got.taken_over is None
    assert got.lease.holder == "cli:alice@laptop" and got.lease.pid == 4242
    assert got.lease.acquired_at == got.lease.heartbeat_at == T0
    assert current(store, "sglang-qwen") == got.lease
    assert current(store, "other") is None


def test_a_held_lease_is_refused_with_who_holds_it(store: Store) -> None:
    experiment_id = an_experiment(store)
    acquire(store, "sglang-qwen", **ALICE, experiment_id=experiment_id, now=T0)
    with pytest.raises(LeaseHeld) as raised:
        acquire(store, "sglang-qwen", **BOB, now=T0 + timedelta(seconds=3))
    assert str(raised.value) == (
        f"sglang-qwen is busy: held by cli:alice@laptop on laptop (pid 4242) for experiment "
        f"#{experiment_id} (try) since 2026-11-29 22:40:01 UTC, last heartbeat 3 s ago"
    )
    assert raised.value.lease.holder == "cli:alice@laptop"
    assert current(store, "sglang-qwen") == raised.value.lease  # unchanged


def test_without_an_experiment_the_message_names_the_purpose(store: Store) -> None:
    acquire(store, "sglang-qwen", **ALICE, now=T0)
    with pytest.raises(LeaseHeld, match=r"for try since 2026-11-29 22:40:01 UTC, last heartbeat 0 s ago"):
        acquire(store, "sglang-qwen", **BOB, now=T0)


def test_reacquiring_ones_own_lease_is_a_heartbeat(store: Store) -> None:
    acquire(store, "sglang-qwen", **ALICE, now=T0)
    experiment_id = an_experiment(store)
    again = acquire(
        store, "sglang-qwen", **ALICE, experiment_id=experiment_id, now=T0 + timedelta(seconds=20)
    )
    assert again.taken_over is None
    assert again.lease.acquired_at == T0
    assert again.lease.heartbeat_at == T0 + timedelta(seconds=20)
    assert again.lease.experiment_id == experiment_id


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    first = acquire(store, "sglang-qwen", **ALICE, ttl_s=60, now=T0).lease
    assert not first.expired(T0 + timedelta(seconds=60))  # exactly at the ttl: still alive
    with pytest.raises(LeaseHeld):
        acquire(store, "sglang-qwen", **BOB, now=T0 + timedelta(seconds=60))

    later = T0 + timedelta(seconds=61)
    assert first.expired(later)
    got = acquire(store, "sglang-qwen", **BOB, ttl_s=15, now=later)

    assert got.taken_over == first
    assert got.lease.holder == "slack:bob" and got.lease.ttl_s == 15
    assert got.lease.acquired_at == later
    assert current(store, "sglang-qwen") == got.lease
    # the old holder finds out at its next heartbeat, and cannot release or attach what it lost
    assert heartbeat(store, "sglang-qwen", holder="cli:alice@laptop", now=later) is False
    assert release(store, "sglang-qwen", holder="cli:alice@laptop") is False
    with pytest.raises(LookupError, match="cli:alice@laptop does not hold the lease of sglang-qwen"):
        attach_experiment(store, "sglang-qwen", holder="cli:alice@laptop", experiment_id=an_experiment(store))
    assert current(store, "sglang-qwen") == got.lease


def test_heartbeats_keep_a_lease_alive(store: Store) -> None:
    acquire(store, "sglang-qwen", **ALICE, ttl_s=10, now=T0)
    for seconds in (8, 16, 24):
        assert heartbeat(store, "sglang-qwen", holder="cli:alice@laptop", now=T0 + timedelta(seconds=seconds))
    with pytest.raises(LeaseHeld, match="last heartbeat 6 s ago"):
        acquire(store, "sglang-qwen", **BOB, now=T0 + timedelta(seconds=30))
    assert heartbeat(store, "sglang-qwen", holder="slack:bob") is False


def test_each_lease_expires_by_its_own_ttl(store: Store) -> None:
    acquire(store, "short", **ALICE, ttl_s=10, now=T0)
    acquire(store, "long", **ALICE, ttl_s=100, now=T0)
    at = T0 + timedelta(seconds=50)
    assert [lease.target for lease in expired_leases(store, now=at)] == ["short"]
    assert expired_leases(store, now=T0 + timedelta(seconds=5)) == []
    with pytest.raises(LeaseHeld):
        acquire(store, "long", **BOB, now=at)
    assert acquire(store, "short", **BOB, now=at).taken_over is not None


def test_release_and_attach(store: Store) -> None:
    acquire(store, "sglang-qwen", **ALICE, now=T0)
    experiment_id = an_experiment(store)
    attach_experiment(store, "sglang-qwen", holder="cli:alice@laptop", experiment_id=experiment_id)
    lease = current(store, "sglang-qwen")
    assert lease is not None and lease.experiment_id == experiment_id
    assert release(store, "sglang-qwen", holder="slack:bob") is False
    assert current(store, "sglang-qwen") is not None
    assert release(store, "sglang-qwen", holder="cli:alice@laptop") is True
    assert current(store, "sglang-qwen") is None
    assert release(store, "sglang-qwen", holder="cli:alice@laptop") is False
    assert acquire(store, "sglang-qwen", **BOB, now=T0).taken_over is None


def test_a_non_positive_ttl_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="lease ttl must be positive"):
        acquire(store, "sglang-qwen", **ALICE, ttl_s=0)


def race(
    stores: list[Store], contenders: list[dict[str, object]], target: str, now: datetime
) -> list[object]:
    """Every contender calls acquire at once, each on its own Store; returns Acquired or LeaseHeld."""
    barrier = threading.Barrier(len(contenders))
    outcomes: list[object] = [None] * len(contenders)

    def contend(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = acquire(stores[i], target, now=now, **contenders[i])  # type: ignore[arg-type]
        except LeaseHeld as held:
            outcomes[i] = held

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(contenders))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("expired_holder", [False, True], ids=["free", "expired"])
def test_racing_stores_exactly_one_wins(
    store: Store, another_store: Callable[[], Store], expired_holder: bool
) -> None:
    contenders = [
        {"holder": f"worker-{i}", "host": f"host-{i}", "pid": 1000 + i, "purpose": "try"} for i in range(4)
    ]
    stores = [another_store() for _ in contenders]
    for round_ in range(5):
        target = f"target-{round_}"
        if expired_holder:
            acquire(store, target, holder="crashed", host="gone", pid=1, purpose="try", ttl_s=5, now=T0)
        outcomes = race(stores, contenders, target, T0 + timedelta(seconds=60))

        winners = [o for o in outcomes if isinstance(o, Acquired)]
        losers = [o for o in outcomes if isinstance(o, LeaseHeld)]
        assert len(winners) == 1 and len(losers) == len(contenders) - 1, outcomes
        winner = winners[0].lease
        assert current(store, target) == winner
        for held in losers:
            assert held.lease.holder == winner.holder
            assert f"held by {winner.holder} on {winner.host} (pid {winner.pid})" in str(held)
        if expired_holder:
            assert winners[0].taken_over is not None and winners[0].taken_over.holder == "crashed"
        else:
            assert winners[0].taken_over is None


async def test_leases_through_the_async_store(store: Store) -> None:
    astore = AsyncStore(store)
    try:
        got = await astore.run(acquire, astore.store, "sglang-qwen", **ALICE)
        assert got.lease.holder == "cli:alice@laptop"
        with pytest.raises(LeaseHeld, match="sglang-qwen is busy: held by cli:alice@laptop"):
            await astore.run(acquire, astore.store, "sglang-qwen", **BOB)
        assert await astore.run(release, astore.store, "sglang-qwen", holder="cli:alice@laptop")
    finally:
        await astore.aclose()


# --- experiments and steps ----------------------------------------------------------------------


def test_an_experiment_starts_pending_at_step_zero(store: Store) -> None:
    experiment_id = an_experiment(store)
    experiment = get_experiment(store, experiment_id)
    assert experiment is not None
    assert (experiment.status, experiment.cursor, experiment.state) == ("pending", 0, {})
    assert experiment.params == {"changes": ["--x=1"]}
    assert experiment.created_at.tzinfo is not None
    assert get_experiment(store, experiment_id + 100) is None


def test_finish_step_checkpoints_the_experiment(store: Store) -> None:
    experiment_id = an_experiment(store)
    first = start_step(store, experiment_id, index=0, name="apply", action="apply_flags", args={"x": 1})
    assert first.status == "running" and first.finished_at is None

    done = finish_step(
        store, first.id or 0, status="ok", result={"restarted": True}, state={"applied": ["--x=1"]}
    )

    assert done.status == "ok" and done.result == {"restarted": True} and done.finished_at is not None
    experiment = get_experiment(store, experiment_id)
    assert experiment is not None
    assert experiment.cursor == 1 and experiment.state == {"applied": ["--x=1"]}

    second = start_step(store, experiment_id, index=1, name="bench", action="bench", args={})
    failed = finish_step(store, second.id or 0, status="failed", result={}, error="boom", state={"tries": 1})
    assert failed.error == "boom"
    experiment = get_experiment(store, experiment_id)
    assert experiment is not None
    assert experiment.cursor == 1  # a failed step does not move the cursor
    assert experiment.state == {"tries": 1}  # but its state is kept

    third = start_step(store, experiment_id, index=1, name="bench", action="bench", args={})
    finish_step(store, third.id or 0, status="stopped", result={"reason": "enough"}, state={})
    experiment = get_experiment(store, experiment_id)
    assert experiment is not None and experiment.cursor == 2
    assert [(s.index, s.status) for s in list_steps(store, experiment_id)] == [
        (0, "ok"),
        (1, "failed"),
        (1, "stopped"),
    ]


def test_a_step_is_started_and_finished_without_reading_it_back(store: Store) -> None:
    """The runner checkpoints twice a step; each call ends with its write, and what it returns is
    the row as stored (every value is set before the commit: nothing for a refresh to learn)."""
    experiment_id = an_experiment(store)
    statements: list[list[str]] = []

    def noted(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements[-1].append(statement.split(None, 1)[0].upper())

    event.listen(store.engine, "before_cursor_execute", noted)
    try:
        statements.append([])
        started = start_step(store, experiment_id, index=0, name="apply", action="apply_flags", args={"x": 1})
        statements.append([])
        done = finish_step(store, started.id or 0, status="ok", result={"r": [1, 2]}, state={"s": {"t": 1}})
    finally:
        event.remove(store.engine, "before_cursor_execute", noted)

    assert [calls[-1] for calls in statements] == ["INSERT", "UPDATE"]  # no SELECT after the write
    [stored] = list_steps(store, experiment_id)
    for row in (started, done):
        assert row.id == stored.id and row.started_at == stored.started_at
    assert (done.status, done.result, done.error, done.finished_at, done.args) == (
        stored.status,
        stored.result,
        stored.error,
        stored.finished_at,
        stored.args,
    )


@pytest.mark.parametrize("bad", ["result", "state"])
def test_finish_step_is_all_or_nothing(store: Store, bad: str) -> None:
    experiment_id = an_experiment(store)
    step = start_step(store, experiment_id, index=0, name="apply", action="apply_flags", args={})
    unserialisable = {"x": object()}
    result, state = (unserialisable, {"ok": 1}) if bad == "result" else ({"ok": 1}, unserialisable)

    with pytest.raises(Exception, match=r"(?i)serializable"):
        finish_step(store, step.id or 0, status="ok", result=result, state=state)

    [kept] = list_steps(store, experiment_id)
    assert kept.status == "running" and kept.result == {} and kept.finished_at is None
    experiment = get_experiment(store, experiment_id)
    assert experiment is not None and experiment.cursor == 0 and experiment.state == {}


def test_step_errors_are_named(store: Store) -> None:
    experiment_id = an_experiment(store)
    step = start_step(store, experiment_id, index=0, name="a", action="a", args={})
    with pytest.raises(ValueError, match="ok, failed, skipped, stopped; not 'running'"):
        finish_step(store, step.id or 0, status="running", result={}, state={})
    with pytest.raises(LookupError, match="no experiment step #999"):
        finish_step(store, 999, status="ok", result={}, state={})
    with pytest.raises(LookupError, match="no experiment #999"):
        start_step(store, 999, index=0, name="a", action="a", args={})


def test_update_experiment(store: Store) -> None:
    experiment_id = an_experiment(store)
    started = datetime.now(UTC)
    updated = update_experiment(
        store, experiment_id, status="running", started_at=started, holder="cli:alice"
    )
    assert (updated.status, updated.holder) == ("running", "cli:alice")
    assert updated.started_at is not None and abs((updated.started_at - started).total_seconds()) < 0.001
    again = get_experiment(store, experiment_id)
    assert again is not None and again.status == "running"

    with pytest.raises(ValueError, match="unknown experiment status 'done'; one of: pending, running"):
        update_experiment(store, experiment_id, status="done")
    with pytest.raises(ValueError, match="experiments have no field"):
        update_experiment(store, experiment_id, colour="red")
    with pytest.raises(ValueError, match="id cannot change"):
        update_experiment(store, experiment_id, id=5)
    with pytest.raises(LookupError, match="no experiment #999"):
        update_experiment(store, 999, status="failed")
    final = get_experiment(store, experiment_id)
    assert final is not None and final.status == "running"


def test_cancel_only_pending_or_running_experiments(store: Store) -> None:
    pending, running, finished = an_experiment(store), an_experiment(store), an_experiment(store)
    update_experiment(store, running, status="running")
    update_experiment(store, finished, status="succeeded")

    assert request_cancel(store, pending, actor="alice") is True
    assert request_cancel(store, running, actor="bob") is True
    assert request_cancel(store, running, actor="carol") is True  # still cancelling; the first asker is kept
    assert request_cancel(store, finished, actor="alice") is False

    cancelled_by = {
        i: (e.cancel_requested_by if (e := get_experiment(store, i)) else "?")
        for i in (pending, running, finished)
    }
    assert cancelled_by == {pending: "alice", running: "bob", finished: None}
    assert [cancel_requester(store, i) for i in (pending, running, finished, 999)] == [
        "alice",
        "bob",
        None,
        None,
    ]
    with pytest.raises(LookupError, match="no experiment #999"):
        request_cancel(store, 999, actor="alice")


def test_unfinished_experiments_oldest_first(store: Store) -> None:
    ids = {status: an_experiment(store) for status in ("running", "succeeded", "interrupted", "failed")}
    for status, experiment_id in ids.items():
        update_experiment(store, experiment_id, status=status)
    pending = an_experiment(store)
    elsewhere = an_experiment(store, target="sglang-llama")

    assert [e.id for e in unfinished_experiments(store, "sglang-qwen")] == [
        ids["running"],
        ids["interrupted"],
        pending,
    ]
    assert [e.id for e in unfinished_experiments(store)] == [
        ids["running"],
        ids["interrupted"],
        pending,
        elsewhere,
    ]


def test_listing_and_latest(store: Store) -> None:
    old = an_experiment(store, playbook="try")
    with Session(store.engine) as session:  # make it a day older than the rest
        row = session.get(Experiment, old)
        assert row is not None
        row.created_at = datetime.now(UTC) - timedelta(days=1)
        session.add(row)
        session.commit()
    verify = an_experiment(store, playbook="verify")
    newest = an_experiment(store, playbook="try")
    an_experiment(store, target="sglang-llama")
    update_experiment(store, newest, status="failed")

    assert [e.id for e in list_experiments(store, "sglang-qwen")] == [newest, verify, old]
    assert [e.id for e in list_experiments(store, "sglang-qwen", limit=2)] == [newest, verify]
    since = datetime.now(UTC) - timedelta(hours=1)
    assert [e.id for e in list_experiments(store, "sglang-qwen", since=since)] == [newest, verify]

    latest = latest_experiment(store, "sglang-qwen")
    assert latest is not None and latest.id == newest
    latest_verify = latest_experiment(store, "sglang-qwen", playbook="verify")
    assert latest_verify is not None and latest_verify.id == verify
    latest_pending_try = latest_experiment(store, "sglang-qwen", playbook="try", statuses=["pending"])
    assert latest_pending_try is not None and latest_pending_try.id == old
    assert latest_experiment(store, "sglang-qwen", statuses=["succeeded", "cancelled"]) is None
    assert latest_experiment(store, "nothing-here") is None


# --- hypotheses, baselines, investigations, evidence, audit, observations -----------------------


def test_hypotheses_are_resolved_with_a_known_status(store: Store) -> None:
    investigation = open_investigation(
        store, target="sglang-qwen", title="why is TTFT high", created_by="alice"
    )
    hypothesis = add_hypothesis(
        store,
        target="sglang-qwen",
        statement="--chunked-prefill-size 4096 lowers TTFT",
        variable="--chunked-prefill-size",
        expectations=["median_ttft_ms down", "throughput within 3%"],
        created_by="alice",
        investigation_id=investigation.id,
    )
    assert hypothesis.id is not None
    assert (hypothesis.status, hypothesis.resolved_at) == ("open", None)
    assert hypothesis.expectations == ["median_ttft_ms down", "throughput within 3%"]

    with pytest.raises(ValueError, match="'proven'; one of: open, confirmed, refuted, inconclusive"):
        resolve_hypothesis(store, hypothesis.id, status="proven")
    unchanged = get_hypothesis(store, hypothesis.id)
    assert unchanged is not None and unchanged.status == "open"

    confirmed = resolve_hypothesis(
        store, hypothesis.id, status="confirmed", because="experiment #3: -18% TTFT"
    )
    assert confirmed.status == "confirmed" and confirmed.because == "experiment #3: -18% TTFT"
    assert confirmed.resolved_at is not None and confirmed.resolved_at.tzinfo is not None

    reopened = resolve_hypothesis(store, hypothesis.id, status="open")
    assert reopened.resolved_at is None and reopened.because == "experiment #3: -18% TTFT"
    with pytest.raises(LookupError, match="no hypothesis #999"):
        resolve_hypothesis(store, 999, status="refuted")
    with pytest.raises(ValueError, match="needs a statement"):
        add_hypothesis(store, target="sglang-qwen", statement="  ", created_by="alice")


def test_hypotheses_listing_and_their_experiments(store: Store) -> None:
    first = add_hypothesis(store, target="sglang-qwen", statement="a", created_by="alice")
    second = add_hypothesis(store, target="sglang-qwen", statement="b", created_by="alice")
    add_hypothesis(store, target="sglang-llama", statement="c", created_by="alice")
    assert first.id is not None and second.id is not None
    resolve_hypothesis(store, first.id, status="refuted")

    assert [h.id for h in list_hypotheses(store, "sglang-qwen")] == [second.id, first.id]
    assert [h.id for h in list_hypotheses(store, "sglang-qwen", status="refuted")] == [first.id]
    with pytest.raises(ValueError, match="unknown hypothesis status"):
        list_hypotheses(store, "sglang-qwen", status="closed")

    tests = [
        create_experiment(
            store, target="sglang-qwen", playbook="try", params={}, actor="alice", hypothesis_id=second.id
        ).id
        for _ in range(2)
    ]
    an_experiment(store)
    assert [e.id for e in experiments_of(store, second.id)] == tests
    assert experiments_of(store, first.id) == []


def test_pinning_a_baseline_deactivates_the_previous(store: Store) -> None:
    assert current_baseline(store, "sglang-qwen") is None
    old_snapshot, new_snapshot, other_snapshot = (a_snapshot(store) for _ in range(3))
    first = pin_baseline(store, target="sglang-qwen", snapshot_id=old_snapshot, pinned_by="alice")
    other = pin_baseline(store, target="sglang-llama", snapshot_id=other_snapshot, pinned_by="bob")
    assert first.active and current_baseline(store, "sglang-qwen") == first

    second = pin_baseline(
        store, target="sglang-qwen", snapshot_id=new_snapshot, note="after the upgrade", pinned_by="bob"
    )

    assert current_baseline(store, "sglang-qwen") == second
    assert current_baseline(store, "sglang-llama") == other  # another target's baseline is untouched
    with Session(store.engine) as session:
        rows = session.exec(
            select(Baseline).where(Baseline.target == "sglang-qwen").order_by(col(Baseline.id))
        )
        assert [(row.id, row.active) for row in rows] == [(first.id, False), (second.id, True)]
    with pytest.raises(LookupError, match="no snapshot #999"):
        pin_baseline(store, target="sglang-qwen", snapshot_id=999, pinned_by="alice")
    assert current_baseline(store, "sglang-qwen") == second  # a refused pin leaves the active one


def test_investigations(store: Store) -> None:
    opened = open_investigation(
        store, target="sglang-qwen", title="slow at 64", created_by="alice", channel="C01", thread_ts="1732.5"
    )
    assert opened.id is not None and opened.status == "open"
    found = get_investigation(store, opened.id)
    assert found is not None and (found.channel, found.thread_ts) == ("C01", "1732.5")
    assert get_investigation(store, opened.id + 1) is None
    with pytest.raises(ValueError, match="needs a title"):
        open_investigation(store, target="sglang-qwen", title="", created_by="alice")


def test_evidence_and_the_audit_trail(store: Store) -> None:
    experiment_id = an_experiment(store)
    add_evidence(
        store,
        target="sglang-qwen",
        kind="table",
        title="before",
        data={"rows": [1]},
        experiment_id=experiment_id,
        step_index=0,
    )
    add_evidence(
        store,
        target="sglang-qwen",
        kind="chart",
        title="after",
        data={"x": [1, 2]},
        experiment_id=experiment_id,
        step_index=2,
    )
    add_evidence(store, target="sglang-qwen", kind="note", title="unrelated", data={})
    assert [(e.title, e.step_index, e.data) for e in evidence_of(store, experiment_id)] == [
        ("before", 0, {"rows": [1]}),
        ("after", 2, {"x": [1, 2]}),
    ]

    for hours in (3, 2, 1):
        store.add(
            AuditEvent(
                at=T0 - timedelta(hours=hours), actor="alice", target="sglang-qwen", action=f"a{hours}"
            )
        )
    recorded = audit(
        store,
        actor="bob",
        target="sglang-qwen",
        action="try",
        detail={"flags": ["--x"]},
        experiment_id=experiment_id,
    )
    audit(store, actor="bob", target="sglang-llama", action="try")

    assert recorded.detail == {"flags": ["--x"]} and recorded.at.tzinfo is not None
    assert [e.action for e in audit_events(store, "sglang-qwen")] == ["try", "a1", "a2", "a3"]
    assert [e.action for e in audit_events(store, "sglang-qwen", since=T0 - timedelta(hours=2))] == [
        "try",
        "a1",
        "a2",
    ]
    assert [e.action for e in audit_events(store, "sglang-qwen", limit=2)] == ["try", "a1"]


def test_deleting_an_experiment_keeps_its_audit_events(store: Store) -> None:
    experiment_id = an_experiment(store)
    add_evidence(store, target="sglang-qwen", kind="note", title="n", data={}, experiment_id=experiment_id)
    audit(store, actor="alice", target="sglang-qwen", action="try", experiment_id=experiment_id)
    with Session(store.engine) as session:
        experiment = session.get(Experiment, experiment_id)
        session.delete(experiment)
        session.commit()
    assert evidence_of(store, experiment_id) == []
    [event] = audit_events(store, "sglang-qwen")
    assert event.experiment_id is None and event.action == "try"


def test_observations(store: Store) -> None:
    experiment_id = an_experiment(store)
    old = add_observation(
        store,
        flag="--enable-torch-compile",
        kind="failure",
        text="fails to start on sm_75",
        target="sglang-qwen",
        gpu_name="Tesla T4",
        compute_capability="7.5",
        sglang_version="0.5.10",
        experiment_id=experiment_id,
        detail={"exit": 1},
    )
    cut = datetime.now(UTC)
    new = add_observation(
        store, flag="--enable-torch-compile", kind="effect", text="+4% at 64", target="sglang-qwen"
    )
    other = add_observation(
        store, flag="--cuda-graph-max-bs", kind="effect", text="+2%", target="sglang-llama"
    )

    assert [o.id for o in list_observations(store)] == [other.id, new.id, old.id]
    assert [o.id for o in list_observations(store, flag="--enable-torch-compile")] == [new.id, old.id]
    assert [o.id for o in list_observations(store, flag="--enable-torch-compile", since=cut)] == [new.id]
    assert old.detail == {"exit": 1} and old.compute_capability == "7.5"


async def test_repositories_through_the_async_store(store: Store) -> None:
    astore = AsyncStore(store)
    try:
        experiment = await astore.run(
            create_experiment, astore.store, target="sglang-qwen", playbook="try", params={}, actor="alice"
        )
        assert experiment.id is not None
        steps = await asyncio.gather(
            *(
                astore.run(
                    start_step, astore.store, experiment.id, index=i, name=f"s{i}", action="a", args={}
                )
                for i in range(3)
            )
        )
        assert sorted(s.index for s in steps) == [0, 1, 2]
        assert await astore.run(request_cancel, astore.store, experiment.id, actor="alice") is True
    finally:
        await astore.aclose()
