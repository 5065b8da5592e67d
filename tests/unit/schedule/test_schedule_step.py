"""The `schedule_checks` step: what it stores as the conclusion, where it will post, and that a
running scheduler gets the jobs at once while the CLI only stores them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from bot.loop import check_jobs
from bot.loop.actions import StepContext
from bot.loop.report import MemoryReporter
from bot.loop.run_state import AfterStart, BeforeStart, Conclusion, RestartRecord, RunState
from bot.loop.steps.schedule_steps import schedule_checks
from bot.schedule.scheduler import SchedulerJobs, build_scheduler, check_job_id, stop
from bot.store import AsyncStore, Snapshot
from bot.store.checks import list_checks
from bot.store.experiments import create_experiment
from tests.support.schedule import FLAGS, settings


@dataclass
class ThreadReporter(MemoryReporter):
    """A reporter posting into a Slack thread (as `SlackThreadReporter` exposes it)."""

    channel: str = "C9"
    thread: str = "1700000000.000900"


def context(astore: AsyncStore, tmp_path: Path, reporter: MemoryReporter, state: RunState) -> StepContext:
    experiment = create_experiment(astore.store, target="lab", playbook="try", params={}, actor="cli:t")
    assert experiment.id is not None
    return StepContext(
        experiment_id=experiment.id,
        target="lab",
        ts=None,
        store=astore,
        settings=settings(tmp_path, check_after=["10m", "24h"]),
        params={},
        state=state,
        reporter=reporter,
        actor="cli:t",
        cache_dir=tmp_path / "cache",
        playbook="try",
    )


async def test_a_kept_try_schedules_its_checks_in_its_thread_and_the_running_scheduler_gets_them(
    astore: AsyncStore, tmp_path: Path
) -> None:
    before = astore.store.add(
        Snapshot(target="lab", requested_flags=[], effective={"max_running_requests": 48})
    )
    after = astore.store.add(
        Snapshot(
            target="lab", invocation_id="i2", requested_flags=FLAGS, effective={"max_running_requests": 26}
        )
    )
    ctx = context(
        astore,
        tmp_path,
        ThreadReporter(),
        RunState(
            conclusion=Conclusion(kept=True, verdict="regressed"),
            before=BeforeStart(snapshot_id=before.id),
            after=AfterStart(snapshot_id=after.id),
        ),
    )
    scheduler = build_scheduler(astore.store.engine)
    scheduler.start(paused=True)
    try:
        async with check_jobs.installed(SchedulerJobs(scheduler, astore)):
            result = await schedule_checks(ctx, profile="probe")
        checks = await astore.run(list_checks, astore.store)
        assert result["checks"] == [c.id for c in checks] and len(checks) == 2
        assert [c.after_s for c in checks] == [600.0, 86400.0]
        assert checks[1].due_at - checks[0].due_at == timedelta(hours=24) - timedelta(minutes=10)
        first = checks[0]
        assert (first.channel, first.thread_ts, first.profile) == ("C9", "1700000000.000900", "probe")
        assert first.expected["snapshot_id"] == after.id and first.expected["max_running_requests"] == 26
        assert first.expected["flags"] == FLAGS and first.expected["kept"] is True
        for check in checks:
            job = scheduler.get_job(check_job_id(check.id))
            assert job is not None and job.next_run_time == check.due_at and job.args == (check.id,)
    finally:
        await stop(scheduler)
    assert "Checks scheduled" in [getattr(b, "title", "") for b, _ in ctx.reporter.blocks]  # type: ignore[attr-defined]


async def test_from_the_cli_the_checks_are_only_stored_and_a_reverted_try_checks_the_start_before(
    astore: AsyncStore, tmp_path: Path
) -> None:
    before = astore.store.add(
        Snapshot(target="lab", requested_flags=[], effective={"max_running_requests": 48})
    )
    state = RunState(conclusion=Conclusion(kept=False), before=BeforeStart(snapshot_id=before.id))
    ctx = context(astore, tmp_path, MemoryReporter(), state)
    result = await schedule_checks(ctx, after=["1h"])
    checks = await astore.run(list_checks, astore.store)
    assert result["checks"] == [checks[0].id] and checks[0].after_s == 3600.0
    assert checks[0].expected["snapshot_id"] == before.id and checks[0].channel is None
    with pytest.raises(ValueError, match="not a duration"):
        await schedule_checks(ctx, after=["soon"])
    failed = RunState(restart=RestartRecord(start_failed=True, rolled_back=False))
    nothing = context(astore, tmp_path, MemoryReporter(), failed)
    assert (await schedule_checks(nothing))["checks"] == []
