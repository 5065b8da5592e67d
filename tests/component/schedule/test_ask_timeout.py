"""The timer of `policy.on_regression = "ask"` (`bot.app.ask`, the job `ask-decisions`): a
question's default action runs once its deadline passed, not before, never after an answer, and
a question asked before a restart of the bot (a new runtime and scheduler over the same database)
is still answered: at start when its deadline passed while the bot was down. The clock is the
runtime's, moved by the test; nothing sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bot.app.ask import TIMEOUT_ACTOR, AlreadyDecidedError, answer
from bot.app.context import AppContext
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime, install, uninstall
from bot.loop.run_state import RunState
from bot.schedule.scheduler import DECISIONS_JOB, SchedulerJobs, build_scheduler, prepare, run_due, stop
from bot.store import AsyncStore
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment
from bot.store.records import audit_events
from tests.support.pending_decision import ASKED_AT, pending_try
from tests.support.schedule import migrated_store, settings

DEADLINE = ASKED_AT + timedelta(minutes=30)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    wrapped = AsyncStore(migrated_store("sqlite", tmp_path))
    yield wrapped
    await wrapped.aclose()


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class Reverts:
    """Records the reverts the timer runs (the revert run itself is the `revert` playbook's,
    covered by the loop's tests)."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    async def __call__(self, ctx: AppContext, experiment: Experiment) -> str:
        assert experiment.id is not None
        self.ran.append(experiment.id)
        return "revert run ended succeeded"


@pytest.fixture
def runtime_factory(tmp_path: Path, store: AsyncStore) -> Iterator[list[ScheduleRuntime]]:
    made: list[ScheduleRuntime] = []
    yield made
    for runtime in made:
        uninstall(runtime)


def new_runtime(
    made: list[ScheduleRuntime], tmp_path: Path, store: AsyncStore, clock: Clock, reverts: Reverts
) -> ScheduleRuntime:
    """What a (re)started bot installs: a runtime on the same database."""
    runtime = ScheduleRuntime(settings(tmp_path), store, MemoryNotifier(), clock=clock, revert_runner=reverts)
    install(runtime)
    made.append(runtime)
    return runtime


async def state_of(store: AsyncStore, experiment_id: int) -> RunState:
    row = await store.run(get_experiment, store.store, experiment_id)
    assert row is not None
    return RunState.load(row.state)


async def test_the_default_revert_runs_at_the_deadline_once_and_not_before(
    tmp_path: Path, store: AsyncStore, runtime_factory: list[ScheduleRuntime]
) -> None:
    experiment_id = await pending_try(store, "lab", channel="C1", thread="1.2")
    clock, reverts = Clock(DEADLINE - timedelta(minutes=1)), Reverts()
    runtime = new_runtime(runtime_factory, tmp_path, store, clock, reverts)
    scheduler = build_scheduler(store.store.engine)
    scheduler.start(paused=True)
    try:
        await prepare(SchedulerJobs(scheduler, store), runtime.settings)
        job = scheduler.get_job(DECISIONS_JOB)
        assert job is not None
        due = job.next_run_time
        await run_due(scheduler, due)  # a look before the deadline: nothing
        assert reverts.ran == [] and (await state_of(store, experiment_id)).conclusion.kept is None

        clock.now = DEADLINE + timedelta(seconds=5)
        ran = await run_due(scheduler, due + timedelta(minutes=1))
        assert DECISIONS_JOB in ran and reverts.ran == [experiment_id]
        conclusion = (await state_of(store, experiment_id)).conclusion
        assert (conclusion.answer, conclusion.decided_by) == ("revert", TIMEOUT_ACTOR)
        assert conclusion.kept is None  # False once a real revert run succeeded (`after_revert`)
        assert isinstance(runtime.notifier, MemoryNotifier)
        [notice] = runtime.notifier.notices
        assert (notice.channel, notice.thread_ts) == ("C1", "1.2")
        assert "Nobody answered by 06:30 UTC: flagbot reverted" in notice.text

        await run_due(scheduler, due + timedelta(minutes=2))  # the next look: nothing again
        assert reverts.ran == [experiment_id]
        events = await store.run(audit_events, store.store, "lab")
        assert [(e.actor, e.action) for e in events] == [(TIMEOUT_ACTOR, "revert-decision")]
        with pytest.raises(AlreadyDecidedError, match="no decision pending"):
            await answer(AppContext(runtime.settings, store), experiment_id, "keep", actor="slack:U1")
    finally:
        await stop(scheduler)


async def test_an_answer_before_the_deadline_leaves_the_timer_nothing_to_do(
    tmp_path: Path, store: AsyncStore, runtime_factory: list[ScheduleRuntime]
) -> None:
    experiment_id = await pending_try(store, "lab")
    clock, reverts = Clock(DEADLINE + timedelta(hours=1)), Reverts()
    runtime = new_runtime(runtime_factory, tmp_path, store, clock, reverts)
    await answer(AppContext(runtime.settings, store), experiment_id, "keep", actor="slack:U1")
    scheduler = build_scheduler(store.store.engine)
    scheduler.start(paused=True)
    try:
        await prepare(SchedulerJobs(scheduler, store), runtime.settings)
    finally:
        await stop(scheduler)
    assert reverts.ran == []
    assert isinstance(runtime.notifier, MemoryNotifier) and runtime.notifier.notices == []
    conclusion = (await state_of(store, experiment_id)).conclusion
    assert conclusion.kept is True and conclusion.decided_by == "slack:U1"


async def test_a_question_asked_before_a_restart_is_answered_at_start_when_its_deadline_passed(
    tmp_path: Path, store: AsyncStore, runtime_factory: list[ScheduleRuntime]
) -> None:
    experiment_id = await pending_try(store, "lab", default="keep")
    reverts = Reverts()
    before = new_runtime(runtime_factory, tmp_path, store, Clock(DEADLINE - timedelta(minutes=20)), reverts)
    first = build_scheduler(store.store.engine)
    first.start(paused=True)
    try:
        await prepare(SchedulerJobs(first, store), before.settings)  # the bot as it ran: still pending
    finally:
        await stop(first)
    uninstall(before)
    assert (await state_of(store, experiment_id)).conclusion.kept is None

    # the bot was down over the deadline; a new process starts on the same database
    after = new_runtime(runtime_factory, tmp_path, store, Clock(DEADLINE + timedelta(hours=2)), reverts)
    second = build_scheduler(store.store.engine)
    second.start(paused=True)
    try:
        assert second.get_job(DECISIONS_JOB) is not None  # the timer's job is in the database
        await prepare(SchedulerJobs(second, store), after.settings)
    finally:
        await stop(second)
    conclusion = (await state_of(store, experiment_id)).conclusion
    assert conclusion.kept is True and conclusion.decided_by == TIMEOUT_ACTOR
    assert reverts.ran == []
    events = await store.run(audit_events, store.store, "lab")
    assert [(e.actor, e.action) for e in events] == [(TIMEOUT_ACTOR, "keep")]
