"""The scheduled jobs: module-level coroutines with plain arguments, as APScheduler's job store
pickles them (`bot.schedule.jobs:check_job` with `(7,)`). Each finds the process's runtime
(`bot.schedule.runtime.current()`) and calls the logic, which lives elsewhere and is tested
without a scheduler."""

from __future__ import annotations

import logging

from bot.schedule.runtime import current

log = logging.getLogger(__name__)


async def check_job(check_id: int) -> None:
    from bot.schedule.checks import run_check

    await run_check(current(), check_id, trigger="schedule")


async def drift_job(target: str) -> None:
    from bot.schedule.drift import watch_drift

    outcome = await watch_drift(current(), target)
    if outcome.skipped:
        log.info("drift watch of %s skipped: %s", target, outcome.skipped)


async def sync_job() -> None:
    """Pick up checks added, paused, resumed or deleted by another process (the CLI)."""
    from bot.schedule.scheduler import sync_checks

    await sync_checks(current())


async def digest_job() -> None:
    """The weekly digest (`bot.digest`, imported here so the scheduler works without it)."""
    import importlib

    rt = current()
    if rt.slack is None or rt.slack_client is None:
        log.warning("weekly digest skipped: no Slack client in this process")
        return
    post = importlib.import_module("bot.digest").post_weekly_digest
    await post(rt.slack, rt.slack_client, rt.clock())
