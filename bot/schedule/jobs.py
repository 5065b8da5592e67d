"""The scheduled jobs: module-level coroutines with plain arguments, as APScheduler's job store
pickles them (`bot.schedule.jobs:check_job` with `(7,)`). Each finds the process's runtime
(`bot.app.runtime.current()`) and calls the logic of the application layer, which is tested
without a scheduler."""

from __future__ import annotations

import logging

from bot.app.ask_timer import apply_due_decisions, run_revert
from bot.app.checks import post_owed_check_runs, run_check
from bot.app.context import AppContext
from bot.app.drift import watch_drift
from bot.app.replicas import publish_digest_once, settle_orphaned_runs
from bot.app.runtime import current
from bot.loop import check_jobs

log = logging.getLogger(__name__)


async def check_job(check_id: int) -> None:
    await run_check(current(), check_id, trigger="schedule")


async def drift_job(target: str) -> None:
    outcome = await watch_drift(current(), target)
    if outcome.skipped:
        log.info("drift watch of %s skipped: %s", target, outcome.skipped)


async def sync_job() -> None:
    """Pick up checks added, paused, resumed or deleted by another process (the CLI)."""
    jobs = check_jobs.active()
    if jobs is not None:
        await jobs.sync()


async def digest_job() -> None:
    """The weekly digest, posted by the publisher `flagbot serve` installed (Slack), once per
    week across replicas (`bot.app.replicas`)."""
    rt = current()
    await publish_digest_once(rt, rt.clock())


async def settle_job() -> None:
    """Settle the runs a dead replica (or CLI) left in flight, once their lease expired, and post
    the check results one left recorded but untold (`bot.app.owed_posts`)."""
    rt = current()
    for outcome in await settle_orphaned_runs(rt):
        log.info("experiment #%d settled: %s", outcome.experiment_id, outcome.status)
    for run_id in await post_owed_check_runs(rt):
        log.info("check run #%d posted late", run_id)


async def decisions_job() -> None:
    """The default action of every Keep / Revert question whose deadline passed (`bot.app.ask`);
    the state is in the database, so a question asked before a restart is still answered."""
    rt = current()
    ctx = AppContext(rt.settings, rt.store, rt.lease_ttl_s)
    done = await apply_due_decisions(ctx, rt.clock(), rt.notifier, revert=rt.revert_runner or run_revert)
    for item in done:
        log.info("experiment #%d: nobody answered, default %s applied", item.experiment_id, item.action)
