"""The one holder of a target's lease: the engine's playbook runs and reconciles, `flagbot
bench`, Slack's bench/rollback/reconcile and the scheduler's checks all take it here. Anything
that changes or loads a server takes the target's lease or waits for it, so a benchmark never
measures a server that a `try` is restarting, and a `try` never judges figures that a benchmark
disturbed.

Why one holder: taking over an expired lease, the heartbeat, noticing the lease was taken and
giving it back are the crash-safety contract (docs/loop.md, docs/crash-safety.md); written once,
every caller keeps it the same way and says "lease lost" in the same words.

    async with hold_lease(astore, "sglang-qwen", purpose="bench", holder=holder_id(actor),
                          ttl_s=60, wait_s=600) as held:
        ...                      # held.lease: ours; held.lost is set if it is taken from us

- The lease is taken at once when the target is free or its lease expired (a takeover is
  audited, `takeover`); otherwise, with `wait_s > 0`, it is polled with a backoff
  (`POLL_FIRST_S`, x`POLL_GROWTH`, at most `POLL_MAX_S`, never past the deadline) until it is
  free or the wait is over; then `LeaseHeld` (the holder's, naming who, where, for what, since
  when) is raised and nothing was taken.
- A waiting command is queued (`bot.store.lease_queue`, one `lease_waiter` row, refreshed at
  each poll) and takes the lease only when it is the oldest live waiter, so a released lease
  goes first come, first served; a command that does not wait is refused (`QueueAhead`) while
  live waiters are queued, even when the lease is free. `cancel waiter=ID` marks a waiter
  cancelled: it ends at its next poll with `WaitCancelled`, having taken nothing.
- While held, a task renews it every `ttl_s / 3`. When a renewal finds the lease is no longer
  ours (another process took it over after our heartbeats stopped for longer than the ttl),
  `held.lost_reason` says who has it now and `held.lost` is set; the body decides what to do
  (the engine stops its run at the next step boundary, a benchmark flags its figures).
- On leaving the block, however it is left (an exception, a cancellation), the heartbeat stops
  and the lease is released; a release that fails is logged (the lease then expires by itself).
  A lease lost meanwhile is not ours to release: the conditional delete leaves it alone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import uuid4

from bot.aio import stop_tasks
from bot.store import AsyncStore
from bot.store.lease_queue import join_queue, leave_queue, live_waiters, poll_queue
from bot.store.leases import (
    Acquired,
    LeaseHeld,
    LeaseInfo,
    QueueAhead,
    WaitCancelled,
    acquire,
    attach_experiment,
    current,
    heartbeat,
    release,
)
from bot.store.models import utcnow
from bot.store.records import audit

__all__ = [
    "POLL_FIRST_S",
    "POLL_GROWTH",
    "POLL_MAX_S",
    "WAITER_STALE_S",
    "Clock",
    "HeldLease",
    "LeaseHeld",
    "WaitCancelled",
    "hold_lease",
    "holder_actor",
    "holder_id",
    "lost_message",
]

log = logging.getLogger(__name__)

POLL_FIRST_S = 0.25
"""The first pause before asking again for a busy lease."""
POLL_GROWTH = 1.5
"""Each further pause is this much longer ..."""
POLL_MAX_S = 5.0
"""... up to this; a waiter sees a released lease at most this late."""
WAITER_STALE_S = 3 * POLL_MAX_S
"""A queued waiter not seen at a poll for this long is taken for dead and skipped: a crashed
waiter never blocks the queue (three missed polls, not one, so a slow store is no death)."""

Clock = Callable[[], datetime | None]
"""The time lease decisions are made at; None means the store's own `utcnow()` (tests move an
engine's clock forward to make a lease look stale)."""


def holder_id(actor: str) -> str:
    """A holder id unique to this run, e.g. `cli:alice@laptop:1f2e3d4c`."""
    return f"{actor}:{uuid4().hex[:8]}"


def holder_actor(holder: str) -> str:
    """The actor of a `holder_id` (`cli:alice@laptop:1f2e3d4c` -> `cli:alice@laptop`); a holder
    named otherwise is its own actor."""
    head, _, tail = holder.rpartition(":")
    return head if head and len(tail) == 8 else holder


def lost_message(target: str, now_held: LeaseInfo | None) -> str:
    """The one "lease lost" message: who holds the target now, or that nobody does."""
    if now_held is None:
        return f"the lease of {target} was released by someone else"
    return f"the lease of {target} was lost ({now_held.describe()})"


@dataclass
class HeldLease:
    """The lease a `hold_lease` block holds."""

    lease: LeaseInfo
    """As acquired (its `heartbeat_at` is not updated by the heartbeats)."""
    taken_over: LeaseInfo | None
    """The expired lease ours replaced (audited as "takeover"), or None."""
    waited_s: float
    """How long it took to get it (0 when the target was free)."""
    lost: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a heartbeat finds the lease is no longer ours (after `lost_reason` is)."""
    lost_reason: str | None = None
    beats: int = 0
    """Heartbeats that renewed the lease so far."""
    astore: AsyncStore | None = field(default=None, repr=False)

    @property
    def target(self) -> str:
        return self.lease.target

    @property
    def holder(self) -> str:
        return self.lease.holder

    async def attach(self, experiment_id: int) -> None:
        """Record the experiment this lease is for (an engine takes the lease before it creates
        the experiment, so a refusal writes nothing); LookupError when the lease is not ours."""
        assert self.astore is not None, "attach needs the store the lease was taken in"
        await self.astore.run(
            attach_experiment, self.astore.store, self.target, holder=self.holder, experiment_id=experiment_id
        )


@asynccontextmanager
async def hold_lease(
    astore: AsyncStore,
    target: str,
    *,
    purpose: str,
    holder: str,
    ttl_s: float,
    wait_s: float = 0.0,
    host: str | None = None,
    pid: int | None = None,
    on_wait: Callable[[LeaseHeld, float], None] | None = None,
    clock: Clock | None = None,
    command: str = "",
    queue: bool = True,
) -> AsyncIterator[HeldLease]:
    """Hold `target`'s lease for the block; LeaseHeld when it stays busy for `wait_s` seconds.

    `on_wait(busy, remaining_s)` is called when the wait starts and whenever the lease changes
    hands while waiting (to say whom we wait for); it is never called with `wait_s == 0`.
    `clock` gives the time the lease is taken and renewed at (None: now).

    `queue`: take part in the target's waiting queue (`bot.store.lease_queue`): without `wait_s`,
    QueueAhead (a LeaseHeld) when live waiters are queued, even if the lease is free; with
    `wait_s`, wait as a `lease_waiter` row (`command` is what it shows) and take the lease only
    when first in line; WaitCancelled when `cancel waiter=ID` cancels it. The engine's reconcile
    passes False: settling what a dead run left is not a command that jumps the queue.
    """
    if ttl_s <= 0:
        raise ValueError(f"lease ttl must be positive, got {ttl_s}")
    now: Clock = clock or (lambda: None)
    host = host or socket.gethostname()
    pid = os.getpid() if pid is None else pid
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        if queue:
            await _refuse_if_queued(astore, target, now())
        got = await _acquire(astore, target, holder, host, pid, purpose, ttl_s, now())
    except LeaseHeld:
        if wait_s <= 0:
            raise
        got = await _wait_in_queue(
            astore, target, holder, host, pid, purpose, ttl_s, wait_s, command, on_wait, now, started
        )

    held = HeldLease(got.lease, got.taken_over, loop.time() - started, astore=astore)
    beating = asyncio.create_task(_heartbeats(astore, held, ttl_s, now), name=f"lease {target}")
    try:
        if got.taken_over is not None:
            old = got.taken_over
            await astore.run(
                audit,
                astore.store,
                actor=holder,
                target=target,
                action="takeover",
                detail={"previous": old.describe(now()), "holder": old.holder, "purpose": purpose},
                experiment_id=old.experiment_id,
            )
        yield held
    finally:
        await stop_tasks([beating])  # a heartbeat left beating would hold the lease for ever
        try:
            await astore.run(release, astore.store, target, holder=holder)
        except Exception as exc:  # it expires by itself after ttl_s
            log.warning("releasing the lease of %s failed: %s", target, exc)


async def _refuse_if_queued(astore: AsyncStore, target: str, at: datetime | None) -> None:
    """QueueAhead when live waiters are queued for `target` (nobody jumps the queue)."""
    ahead = await astore.run(live_waiters, astore.store, target, stale_after_s=WAITER_STALE_S, now=at)
    if ahead:
        raise QueueAhead(target, ahead)


async def _wait_in_queue(
    astore: AsyncStore,
    target: str,
    holder: str,
    host: str,
    pid: int,
    purpose: str,
    ttl_s: float,
    wait_s: float,
    command: str,
    on_wait: Callable[[LeaseHeld, float], None] | None,
    now: Clock,
    started: float,
) -> Acquired:
    """Wait as a queued waiter until first in line with the lease free; the waiter row is gone
    however this ends (the lease taken, the deadline passed, cancelled, or the task cancelled)."""
    loop = asyncio.get_running_loop()
    deadline = started + wait_s
    at = now() or utcnow()
    waiter = await astore.run(
        join_queue,
        astore.store,
        target,
        holder=holder,
        purpose=purpose,
        requested_by=holder_actor(holder),
        command=command,
        deadline=at + timedelta(seconds=deadline - loop.time()),
        now=at,
    )
    pause = POLL_FIRST_S
    told: str | None = None
    try:
        while True:
            turn = await astore.run(
                poll_queue, astore.store, waiter.id, stale_after_s=WAITER_STALE_S, now=now()
            )
            if turn.cancelled:
                raise WaitCancelled(turn.waiter, waiter.id)
            try:
                if turn.ahead:
                    raise QueueAhead(target, turn.ahead)
                return await _acquire(astore, target, holder, host, pid, purpose, ttl_s, now())
            except LeaseHeld as busy:
                busy.queued_as = waiter.id
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise
                if on_wait is not None and told != busy.lease.holder:
                    on_wait(busy, remaining)
                told = busy.lease.holder
                await asyncio.sleep(min(pause, remaining))
                pause = min(pause * POLL_GROWTH, POLL_MAX_S)
    finally:
        with suppress(Exception):  # a row left behind goes stale by itself (WAITER_STALE_S)
            await asyncio.shield(astore.run(leave_queue, astore.store, waiter.id))


async def _acquire(
    astore: AsyncStore,
    target: str,
    holder: str,
    host: str,
    pid: int,
    purpose: str,
    ttl_s: float,
    at: datetime | None,
) -> Acquired:
    """One `acquire` in the store's thread; if we are cancelled meanwhile, a lease it took is given back."""
    attempt = asyncio.ensure_future(
        astore.run(
            acquire,
            astore.store,
            target,
            holder=holder,
            host=host,
            pid=pid,
            purpose=purpose,
            ttl_s=ttl_s,
            now=at,
        )
    )
    try:
        return await asyncio.shield(attempt)
    except asyncio.CancelledError:
        with suppress(Exception):  # LeaseHeld included: then there is nothing to give back
            await attempt
            await astore.run(release, astore.store, target, holder=holder)
        raise


async def _heartbeats(astore: AsyncStore, held: HeldLease, ttl_s: float, now: Clock) -> None:
    """Renew every ttl/3; when the lease is gone, say so on `held` and stop."""
    target, holder = held.target, held.holder
    while True:
        await asyncio.sleep(ttl_s / 3)
        try:
            ours = await astore.run(heartbeat, astore.store, target, holder=holder, now=now())
        except Exception as exc:  # a database hiccup: the next beat tries again
            log.warning("heartbeat of %s failed: %s", target, exc)
            continue
        if ours:
            held.beats += 1
            continue
        try:
            now_held = await astore.run(current, astore.store, target)
        except Exception:  # the loss is certain; only who has it now is unknown
            now_held = None
        held.lost_reason = lost_message(target, now_held)
        held.lost.set()
        return
