"""APScheduler itself, as `flagbot serve` runs it: jobs in flagbot's database (SQLite and
PostgreSQL) survive a new scheduler instance, and the scheduler's own loop runs a job that
missed many run times once (coalesce). No clock is faked here: the missed times are in the past."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger

from bot.app.context import AppContext
from bot.app.notify import MemoryNotifier
from bot.schedule.scheduler import DIGEST_GRACE_S, build_scheduler, running_scheduler, stop
from bot.store import AsyncStore
from bot.target.readiness import Backoff
from tests.support.schedule import RUNS, counting_job, migrated_store, settings


@pytest.fixture(params=["sqlite", "postgresql"])
async def astore(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncStore]:
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    store = AsyncStore(migrated_store(request.param, tmp_path, url))
    yield store
    await store.aclose()


async def until(condition: object, what: str, timeout: float = 10.0) -> None:
    backoff = Backoff(0.02, 1.5, 0.2)
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while not condition():  # type: ignore[operator]
        if datetime.now(UTC) > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await backoff.sleep()


async def test_a_job_survives_a_restart_and_its_missed_runs_run_once(astore: AsyncStore) -> None:
    RUNS.clear()
    first = build_scheduler(astore.store.engine)
    first.start()
    later = datetime.now(UTC) + timedelta(hours=1)
    first.add_job(
        counting_job, CronTrigger.from_crontab("* * * * *"), args=["minutely"], id="m", next_run_time=later
    )
    first.shutdown(wait=False)  # AsyncIOScheduler shuts down in its loop: let it finish first
    await until(lambda: not first.running, "the first scheduler to stop")

    second = build_scheduler(astore.store.engine)  # a new process: only the database is shared
    second.start(paused=True)
    try:
        job = second.get_job("m")
        assert job is not None and job.next_run_time == later and job.args == ("minutely",)
        assert job.coalesce and job.max_instances == 1 and job.misfire_grace_time is None
        missed_since = datetime.now(UTC) - timedelta(minutes=10)  # ten run times passed while "down"
        second.modify_job("m", next_run_time=missed_since)
        second.resume()
        await until(lambda: RUNS, "the missed job to run")
        await until(
            lambda: second.get_job("m").next_run_time > datetime.now(UTC), "its next run to be stored"
        )  # type: ignore[union-attr]
        assert [name for name, _ in RUNS] == ["minutely"]  # once, not ten times
    finally:
        await stop(second)


async def test_serve_schedules_drift_and_digest_and_keeps_them_across_restarts(
    astore: AsyncStore, tmp_path: Path
) -> None:
    config = settings(tmp_path, drift_cron="0 3 * * *", digest_channel="C0DIGEST", timezone="Europe/Berlin")
    ctx = AppContext(config, astore)
    async with running_scheduler(ctx, notifier=MemoryNotifier()) as running:
        jobs = {job.id: job for job in running.scheduler.get_jobs()}
        assert set(jobs) == {"drift-lab", "digest", "sync-checks", "ask-decisions", "settle-orphans"}
        assert jobs["digest"].misfire_grace_time == DIGEST_GRACE_S
        assert str(jobs["digest"].trigger.timezone) == "Europe/Berlin"
        drift_next = jobs["drift-lab"].next_run_time
        assert drift_next.hour == 3 and drift_next > datetime.now(UTC)
    async with running_scheduler(ctx, notifier=MemoryNotifier()) as running:
        assert running.scheduler.get_job("drift-lab").next_run_time == drift_next  # type: ignore[union-attr]
    quiet = settings(tmp_path, drift_cron="15 * * * *")  # no digest channel; the cron changed
    async with running_scheduler(AppContext(quiet, astore), notifier=MemoryNotifier()) as running:
        assert running.scheduler.get_job("digest") is None
        assert running.scheduler.get_job("drift-lab").next_run_time.minute == 15  # type: ignore[union-attr]
