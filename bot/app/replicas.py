"""What the scheduler's leader owes the runs another replica left behind.

Why in the application layer: a replica that dies takes two kinds of work with it, and neither is
the scheduler's own business. A scheduled run it had started (the weekly digest) is claimed in
the store (`bot.store.scheduled_runs`), so the next leader runs it once; a run of a playbook it
had in flight keeps the target's lease until the lease's time to live passes, and then waits to
be settled (resumed or rolled back) the way `flagbot serve` settles at start (`bot.app.runs`).
The leader looks for such runs every `SETTLE_INTERVAL_S` (`bot.schedule.scheduler`), so the
settling comes within the lease's time to live plus that interval, not only at the next command,
and the run's thread hears it through the notifier the scheduler was given.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from bot.app.context import AppContext
from bot.app.digest import week_ended_before
from bot.app.runs import settle_every_target
from bot.app.runtime import ScheduleRuntime
from bot.app.settle import tell_settled
from bot.loop.report import RunOutcome
from bot.store.experiments import unfinished_experiments
from bot.store.leases import current
from bot.store.scheduled_runs import claim_run, finish_run, unfinished_runs

__all__ = [
    "DIGEST_JOB_NAME",
    "digest_key",
    "publish_digest_once",
    "resume_owed_digests",
    "settle_orphaned_runs",
]

log = logging.getLogger(__name__)

DIGEST_JOB_NAME = "digest"
OWED_DIGEST_MAX_AGE = timedelta(hours=24)
"""A digest a dead leader had started is still posted this long after it was due (the same day of
grace the digest job has in the scheduler); older ones are left to `/flagbot digest`."""


def digest_key(now: datetime, timezone: str) -> str:
    """The weekly digest's claim: one per week digested, e.g. `digest:2026-W48`."""
    return f"{DIGEST_JOB_NAME}:{week_ended_before(now, timezone)}"


async def publish_digest_once(rt: ScheduleRuntime, due_at: datetime) -> bool:
    """Post the weekly digest due at `due_at`, once across replicas; False when it was not posted
    (no publisher, or another run of that week finished already)."""
    if rt.digest is None:
        log.warning("weekly digest skipped: nowhere to post it in this process")
        return False
    key = digest_key(due_at, rt.settings.schedules.timezone)
    claimed = await rt.store.run(
        claim_run, rt.store.store, key, job=DIGEST_JOB_NAME, replica=rt.replica, now=rt.clock()
    )
    if not claimed:
        log.info("%s already posted; not posting it again", key)
        return False
    await rt.digest.publish_weekly(due_at)
    await rt.store.run(finish_run, rt.store.store, key, replica=rt.replica, now=rt.clock())
    return True


async def resume_owed_digests(rt: ScheduleRuntime) -> list[str]:
    """At the start of a leadership: post each digest another replica started and never finished
    (it died or stood down in the middle), for the week it was due; the keys posted."""
    owed = await rt.store.run(unfinished_runs, rt.store.store, job=DIGEST_JOB_NAME, other_than=rt.replica)
    posted: list[str] = []
    for claim in owed:
        if rt.clock() - claim.started_at > OWED_DIGEST_MAX_AGE:
            log.warning("%s was left unfinished by %s too long ago; not posted", claim.key, claim.replica)
            continue
        log.warning("%s was left unfinished by %s; posting it now", claim.key, claim.replica)
        if await publish_digest_once(rt, claim.started_at):
            posted.append(claim.key)
    return posted


async def settle_orphaned_runs(rt: ScheduleRuntime) -> list[RunOutcome]:
    """Settle the runs whose driver is gone (a replica or a CLI that died: their lease expired)
    and tell each run's thread (or the notifier's default channel) what became of it.

    A target whose lease is alive is skipped before anything is built: its run is being driven,
    and this is looked at every `SETTLE_INTERVAL_S`."""
    store = rt.store
    unfinished = await store.run(unfinished_experiments, store.store)
    if not unfinished:
        return []
    orphaned: list[str] = []
    for target in sorted({row.target for row in unfinished}):
        lease = await store.run(current, store.store, target)
        if lease is None or lease.expired(rt.clock()):
            orphaned.append(target)
    if not orphaned:
        return []
    ctx = AppContext(rt.settings, store, rt.lease_ttl_s)
    settled: list[RunOutcome] = []
    for target, result in await settle_every_target(ctx, only=orphaned):
        if isinstance(result, Exception):  # unreachable, diverged, taken meanwhile: next round
            log.warning("settling the runs left on %s failed: %s", target, result)
            continue
        settled += result
    await tell_settled(store, rt.notifier, settled, why="by a flagbot replica that stopped")
    return settled
