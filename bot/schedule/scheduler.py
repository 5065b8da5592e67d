"""APScheduler 3.x in the bot's event loop, its jobs in flagbot's own database.

Choices, on purpose (docs/schedule.md):

- `AsyncIOScheduler`: jobs are coroutines run as tasks of the bot's loop, next to Slack.
- `SQLAlchemyJobStore` on the Store's engine (SQLite or PostgreSQL, the same URL): a job added
  before a restart is still there after it; its table comes from revision 0006.
- `coalesce=True`: a job that missed several run times while the bot was down runs **once**
  when it is back, not once per missed time.
- `misfire_grace_time=None` for checks, drift and the sync: however late, a missed run still
  runs (once); a check's answer is worth having late. The weekly digest has 24 h
  (`DIGEST_GRACE_S`): a digest more than a day late is skipped, `/flagbot digest` makes it.
- `max_instances=1`: a drift watch still running when its next time comes is not started twice.

With several replicas on one PostgreSQL, only the elected leader runs this scheduler
(`bot.schedule.election`); the job store is shared, so the next leader finds every job where the
last one left it, and a run missed during the handover runs once (coalesce, no misfire limit). A
run the dead leader had *started* is no longer in the job store: a check comes back through the
sync (its row is still `scheduled`), the digest through its claim (`bot.app.replicas`).

The store's `verification_check` table is the truth about checks; the job store holds when they
run. `sync_checks` makes the jobs follow the table: at start (checks stored by a CLI run while no
bot was running), every `SYNC_INTERVAL_S` (checks added, paused or deleted by the CLI while the
bot runs) and right after a change made in this process.

Tests run due jobs under their own clock with `run_due(scheduler, now)`: the same job store,
triggers, coalescing and misfire rules, at a time the test chooses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.job import Job
from apscheduler.jobstores.base import JobLookupError
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import Engine

from bot.app.context import AppContext
from bot.app.digest import weekly_channels
from bot.app.notify import DigestPublisher, Notifier
from bot.app.replicas import resume_owed_digests
from bot.app.runtime import ProbeFunc, ScheduleRuntime, active, install, this_replica, uninstall
from bot.config import Settings
from bot.loop import check_jobs
from bot.schedule import jobs
from bot.schedule.jobs import decisions_job
from bot.store import AsyncStore
from bot.store.checks import list_checks
from bot.store.schedule_models import JOBS_TABLE, VerificationCheck

__all__ = [
    "DIGEST_GRACE_S",
    "JOB_DEFAULTS",
    "SYNC_INTERVAL_S",
    "SchedulerJobs",
    "add_check_job",
    "build_scheduler",
    "check_job_id",
    "prepare",
    "run_due",
    "running_scheduler",
    "stop",
]

log = logging.getLogger(__name__)

JOB_DEFAULTS: dict[str, Any] = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None}
DIGEST_GRACE_S = 24 * 3600
SYNC_INTERVAL_S = 60
SYNC_JOB = "sync-checks"
DIGEST_JOB = "digest"
DECISIONS_JOB = "ask-decisions"
DECISIONS_INTERVAL_S = 60
"""How often the pending Keep / Revert questions are looked at (`bot.app.ask`): a default action
runs at most this long after its deadline."""
SETTLE_JOB = "settle-orphans"
SETTLE_INTERVAL_S = 10
"""How often the leader looks for runs whose driver died (their lease expired): such a run is
settled at most this long after its lease's time to live (`bot.app.replicas`)."""


def check_job_id(check_id: int | None) -> str:
    return f"check-{check_id}"


def drift_job_id(target: str) -> str:
    return f"drift-{target}"


def build_scheduler(engine: Engine, *, timezone: str = "UTC") -> AsyncIOScheduler:
    """A scheduler (not started) whose jobs live in `engine`'s database."""
    return AsyncIOScheduler(
        jobstores={"default": SQLAlchemyJobStore(engine=engine, tablename=JOBS_TABLE)},
        job_defaults=dict(JOB_DEFAULTS),
        timezone=ZoneInfo(timezone),
    )


def add_check_job(scheduler: AsyncIOScheduler, check: VerificationCheck) -> Job:
    """The check's one run at `due_at` (already past: it runs at the scheduler's next look)."""
    job = scheduler.add_job(
        jobs.check_job,
        trigger=DateTrigger(run_date=check.due_at),
        args=[check.id],
        id=check_job_id(check.id),
        name=f"check #{check.id} of experiment #{check.experiment_id} on {check.target}",
        replace_existing=True,
    )
    if check.status == "paused":
        job = scheduler.pause_job(job.id)
    return job


def apply_checks(scheduler: AsyncIOScheduler, checks: list[VerificationCheck]) -> dict[str, list[str]]:
    """Make the check jobs follow the table: add the missing, pause, resume, remove the gone."""
    done: dict[str, list[str]] = {"added": [], "paused": [], "resumed": [], "removed": []}
    wanted = {check_job_id(c.id): c for c in checks if c.status in ("scheduled", "paused")}
    present = {job.id: job for job in scheduler.get_jobs() if job.id.startswith("check-")}
    for job_id in present.keys() - wanted.keys():
        scheduler.remove_job(job_id)
        done["removed"].append(job_id)
    for job_id, check in wanted.items():
        job = present.get(job_id)
        if job is None:
            add_check_job(scheduler, check)
            done["added"].append(job_id)
        elif check.status == "paused" and job.next_run_time is not None:
            scheduler.pause_job(job_id)
            done["paused"].append(job_id)
        elif check.status == "scheduled" and job.next_run_time is None:
            scheduler.resume_job(job_id)
            done["resumed"].append(job_id)
    return done


@dataclass
class SchedulerJobs:
    """The check jobs of an APScheduler, as the loop and the `checks` command see them (a
    `bot.loop.check_jobs.CheckJobs`): installed while `flagbot serve`'s scheduler runs."""

    scheduler: AsyncIOScheduler
    store: AsyncStore

    def add(self, check: VerificationCheck) -> None:
        add_check_job(self.scheduler, check)

    def next_run(self, check_id: int) -> datetime | None:
        job = self.scheduler.get_job(check_job_id(check_id))
        found: datetime | None = job.next_run_time if job is not None else None
        return found

    async def sync(self) -> dict[str, list[str]]:
        checks = await self.store.run(
            list_checks, self.store.store, statuses=("scheduled", "paused"), limit=100_000
        )
        return apply_checks(self.scheduler, checks)


def _keep_or_replace(
    scheduler: AsyncIOScheduler, job_id: str, trigger: Any, func: Any, **kwargs: Any
) -> None:
    """Add a recurring job, but keep the stored one when its trigger is unchanged: replacing it
    would recompute its next run from now and drop the run it missed while the bot was down."""
    existing = scheduler.get_job(job_id)
    if existing is not None and str(existing.trigger) == str(trigger):
        return
    scheduler.add_job(func, trigger=trigger, id=job_id, replace_existing=True, **kwargs)


def schedule_recurring(scheduler: AsyncIOScheduler, settings: Settings) -> None:
    """The drift watch per target, the weekly digest (when a channel is set) and the sync."""
    zone = ZoneInfo(settings.schedules.timezone)
    for target in settings.targets:
        trigger = CronTrigger.from_crontab(settings.schedules.drift_cron, timezone=zone)
        _keep_or_replace(
            scheduler,
            drift_job_id(target),
            trigger,
            jobs.drift_job,
            args=[target],
            name=f"drift watch of {target}",
        )
    for job in scheduler.get_jobs():
        if job.id.startswith("drift-") and job.id.removeprefix("drift-") not in settings.targets:
            scheduler.remove_job(job.id)
    if weekly_channels(settings):  # `schedules.digest_channel`, or a target's own channel
        trigger = CronTrigger.from_crontab(settings.schedules.digest_cron, timezone=zone)
        _keep_or_replace(
            scheduler,
            DIGEST_JOB,
            trigger,
            jobs.digest_job,
            name="weekly digest",
            misfire_grace_time=DIGEST_GRACE_S,
        )
    elif scheduler.get_job(DIGEST_JOB) is not None:
        scheduler.remove_job(DIGEST_JOB)
    _keep_or_replace(
        scheduler,
        SYNC_JOB,
        IntervalTrigger(seconds=SYNC_INTERVAL_S, timezone=zone),
        jobs.sync_job,
        name="pick up checks changed elsewhere",
    )
    _keep_or_replace(
        scheduler,
        DECISIONS_JOB,
        IntervalTrigger(seconds=DECISIONS_INTERVAL_S, timezone=zone),
        jobs.decisions_job,
        name="default actions of unanswered Keep / Revert questions",
    )
    _keep_or_replace(
        scheduler,
        SETTLE_JOB,
        IntervalTrigger(seconds=SETTLE_INTERVAL_S, timezone=zone),
        jobs.settle_job,
        name="settle runs a dead replica left in flight",
    )


async def prepare(jobs: SchedulerJobs, settings: Settings) -> None:
    """Everything the scheduler should hold, from the config and the store."""
    schedule_recurring(jobs.scheduler, settings)
    await jobs.sync()
    runtime = active()
    if runtime is not None:
        await decisions_job()  # a deadline passed while the bot was down: applied at start
        await resume_owed_digests(runtime)  # a digest the last leader died in the middle of


def _run_times(job: Job, now: datetime) -> list[datetime]:
    times: list[datetime] = []
    moment = job.next_run_time
    while moment is not None and moment <= now:
        times.append(moment)
        moment = job.trigger.get_next_fire_time(moment, now)
    return times


async def run_due(scheduler: AsyncIOScheduler, now: datetime) -> list[str]:
    """Run the jobs due at `now` as APScheduler would, under a clock the caller controls.

    The scheduler must be started paused (`start(paused=True)`), so its own loop never runs a
    job by the wall clock. For each due job: its run times up to `now`, only the last when it
    coalesces, without those later than `misfire_grace_time`; each is awaited; then the job's
    next run time is stored, or the job is removed when its trigger has no more. Returns the
    ids of the jobs that ran (one entry per run).
    """
    ran: list[str] = []
    for job in scheduler.get_jobs():
        times = _run_times(job, now)
        if not times:
            continue
        if job.coalesce:
            times = times[-1:]
        for moment in times:
            grace = job.misfire_grace_time
            if grace is not None and now - moment > timedelta(seconds=grace):
                log.info("job %s missed its run at %s", job.id, moment)
                continue
            await job.func(*job.args, **job.kwargs)
            ran.append(job.id)
        following = job.trigger.get_next_fire_time(times[-1], now)
        try:
            if following is not None:
                scheduler.modify_job(job.id, next_run_time=following)
            else:
                scheduler.remove_job(job.id)
        except JobLookupError:
            pass  # the job removed itself (a check deleted while it ran)
    return ran


@asynccontextmanager
async def running_scheduler(
    ctx: AppContext,
    *,
    notifier: Notifier,
    digest: DigestPublisher | None = None,
    replica: str | None = None,
    probe: ProbeFunc | None = None,
) -> AsyncIterator[SchedulerJobs]:
    """`flagbot serve`'s scheduler: started in this event loop for the block, then shut down.

    Checks and the drift watch tell their changes of state through `notifier` (the bot's: into
    experiments' threads, drift into `slack.investigation_channel`); the weekly digest goes
    through `digest` (skipped when None). `replica` names this process in claims (default
    `host:pid`); `probe` replaces how checks look at a target (tests).
    """
    settings = ctx.settings
    scheduler = build_scheduler(ctx.store.store.engine, timezone=settings.schedules.timezone)
    runtime = ScheduleRuntime(
        settings,
        ctx.store,
        notifier,
        lease_ttl_s=ctx.lease_ttl_s,
        digest=digest,
        probe=probe,
        replica=replica or this_replica(),
    )
    scheduled = SchedulerJobs(scheduler, ctx.store)
    install(runtime)
    check_jobs.install(scheduled)
    scheduler.start(paused=True)
    try:
        await prepare(scheduled, settings)
        scheduler.resume()
        log.info("scheduler started: %d jobs", len(scheduler.get_jobs()))
        yield scheduled
    finally:
        await stop(scheduler)
        check_jobs.uninstall(scheduled)
        uninstall(runtime)


async def stop(scheduler: AsyncIOScheduler) -> None:
    """Shut down and wait until it has: `AsyncIOScheduler.shutdown` only schedules the shutdown
    in the loop, and a scheduler still running could pick up a job a new one is handed."""
    if not scheduler.running:
        return
    scheduler.shutdown(wait=False)
    for _ in range(1000):
        if not scheduler.running:
            return
        await asyncio.sleep(0)
