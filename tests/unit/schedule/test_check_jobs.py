"""Scheduled checks under a controlled clock: real APScheduler with its job store in SQLite, the
target replaced by `FakeTarget` (this layer's unit tests; the testbed tests look at a real one)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime, install, uninstall
from bot.loop import check_jobs
from bot.schedule.scheduler import SchedulerJobs, build_scheduler, check_job_id, prepare, run_due, stop
from bot.store import AsyncStore
from bot.store.checks import check_runs, get_check, set_check_status
from tests.support.schedule import T0, Clock, FakeTarget, concluded_check, settings


def checks(ran: list[str]) -> list[str]:
    return [job for job in ran if job.startswith("check-")]


class Bot:
    """One "bot process": a runtime and a scheduler started paused (jobs run only by `run_due`)."""

    def __init__(self, astore: AsyncStore, tmp_path: Path, target: FakeTarget, clock: Clock) -> None:
        self.notifier = MemoryNotifier()
        self.scheduler = build_scheduler(astore.store.engine)
        self.runtime = ScheduleRuntime(
            settings(tmp_path, targets=False),
            astore,
            self.notifier,
            clock=clock,
            probe=target,
        )
        self.jobs = SchedulerJobs(self.scheduler, astore)

    async def __aenter__(self) -> Bot:
        install(self.runtime)
        check_jobs.install(self.jobs)
        self.scheduler.start(paused=True)
        await prepare(self.jobs, self.runtime.settings)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop(self.scheduler)
        check_jobs.uninstall(self.jobs)
        uninstall(self.runtime)


async def test_a_check_fires_when_due_and_posts_only_on_a_change_of_state(
    astore: AsyncStore, tmp_path: Path
) -> None:
    target, clock = FakeTarget(), Clock()
    ten = concluded_check(astore.store, due_at=T0 + timedelta(minutes=10))
    day = concluded_check(astore.store, due_at=T0 + timedelta(hours=24))
    day_two = await astore.run(
        lambda s: __import__("bot.store.checks", fromlist=["add_check"]).add_check(
            s,
            target="lab",
            experiment_id=day.experiment_id,
            after=timedelta(hours=48),
            due_at=T0 + timedelta(hours=48),
            expected=day.expected,
            created_by="t",
            channel="C1",
            thread_ts="9.9",
        ),
        astore.store,
    )
    async with Bot(astore, tmp_path, target, clock) as bot:
        assert checks(await run_due(bot.scheduler, clock.advance(minutes=5))) == []
        assert target.looks == 0
        assert checks(await run_due(bot.scheduler, clock.advance(minutes=5))) == [check_job_id(ten.id)]
        assert bot.notifier.notices == []  # pass, as concluded: recorded, not posted
        assert [r.result for r in await astore.run(check_runs, astore.store, ten.id or 0)] == ["pass"]
        assert bot.scheduler.get_job(check_job_id(ten.id)) is None  # a one-shot job is gone after its run

        target.capacity = 26  # something changed the server behind flagbot's back
        assert checks(await run_due(bot.scheduler, clock.advance(hours=24))) == [check_job_id(day.id)]
        assert len(bot.notifier.notices) == 1
        notice = bot.notifier.notices[0]
        assert (notice.channel, notice.thread_ts) == ("C1", "1700000000.000100")
        assert "pass -> fail" in notice.text and "max_running_requests 26, concluded 48" in notice.text
        run = (await astore.run(check_runs, astore.store, day.id or 0))[0]
        assert run.result == "fail" and run.posted_ts == "memory-1" and run.ran_at == clock.now

        assert checks(await run_due(bot.scheduler, clock.advance(hours=24))) == [check_job_id(day_two.id)]
        assert len(bot.notifier.notices) == 1  # still failing: no second post
        assert (await astore.run(get_check, astore.store, day_two.id or 0)).last_result == "fail"  # type: ignore[union-attr]


async def test_a_check_survives_a_restart_and_a_paused_one_does_not_run(
    astore: AsyncStore, tmp_path: Path
) -> None:
    target, clock = FakeTarget(capacity=40), Clock()
    check = concluded_check(astore.store, due_at=T0 + timedelta(minutes=10))
    paused = concluded_check(astore.store, due_at=T0 + timedelta(minutes=10))
    async with Bot(astore, tmp_path, target, clock) as first:
        job = first.scheduler.get_job(check_job_id(check.id))
        assert job is not None and job.next_run_time == check.due_at
    await astore.run(set_check_status, astore.store, paused.id or 0, "paused")  # e.g. `flagbot checks pause`
    async with Bot(astore, tmp_path, target, clock) as second:  # a new process, the same database
        assert second.scheduler.get_job(check_job_id(check.id)) is not None
        assert second.scheduler.get_job(check_job_id(paused.id)).next_run_time is None  # type: ignore[union-attr]
        # the bot was down when they were due: the scheduled one runs now, the paused one does not
        ran = checks(await run_due(second.scheduler, clock.advance(hours=3)))
        assert ran == [check_job_id(check.id)] and target.looks == 1
        assert len(second.notifier.notices) == 1 and "pass -> fail" in second.notifier.notices[0].text
        await astore.run(set_check_status, astore.store, paused.id or 0, "scheduled")
        assert (await second.jobs.sync())["resumed"] == [check_job_id(paused.id)]
        assert checks(await run_due(second.scheduler, clock.advance(minutes=1))) == [check_job_id(paused.id)]
        assert len(second.notifier.notices) == 2  # its own experiment's first fail: posted too


async def test_a_missed_recurring_job_runs_once_and_a_late_digest_not_at_all(
    astore: AsyncStore, tmp_path: Path
) -> None:
    from apscheduler.triggers.cron import CronTrigger

    from tests.support.schedule import RUNS, counting_job

    RUNS.clear()
    scheduler = build_scheduler(astore.store.engine)
    scheduler.start(paused=True)
    try:
        scheduler.add_job(
            counting_job, CronTrigger.from_crontab("*/30 * * * *"), args=["drift"], id="d", next_run_time=T0
        )
        scheduler.add_job(
            counting_job,
            CronTrigger.from_crontab("0 9 * * MON"),
            args=["digest"],
            id="w",
            next_run_time=T0,
            misfire_grace_time=24 * 3600,
        )
        ran = await run_due(scheduler, T0 + timedelta(hours=10))  # 21 drift times and the digest missed
        assert sorted(ran) == ["d", "w"] and len(RUNS) == 2
        assert scheduler.get_job("d").next_run_time == T0 + timedelta(hours=10, minutes=30)  # type: ignore[union-attr]
        RUNS.clear()
        ran = await run_due(scheduler, T0 + timedelta(days=9))  # the next Monday's digest is 2 days late
        assert ran == ["d"] and [name for name, _ in RUNS] == ["drift"]
        assert scheduler.get_job("w").next_run_time == T0 + timedelta(days=14)  # type: ignore[union-attr]
    finally:
        await stop(scheduler)
