"""Commands waiting for a busy target (`wait=`): what they say while they wait, the queue `status`
lists, and `cancel waiter=ID`.

Why apart from `bot.app.runs`: these read and mark the store's queue rows only, and `status`
lists the queue. Kept beside the engine, they made every `status` import the whole loop, the
benchmark statistics and SciPy before its first call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from bot.app.context import AppContext
from bot.loop.lease_guard import WAITER_STALE_S
from bot.store.lease_queue import WaiterInfo, cancel_waiter, get_waiter, live_waiters
from bot.store.leases import LeaseHeld, QueueAhead


def waiting_text(busy: LeaseHeld, remaining_s: float, *, now: datetime | None = None) -> str:
    """What a command with `wait=` says when it starts waiting for a busy target (the CLI on
    stderr, Slack in the thread): whom it waits for and until when at most."""
    lease = busy.lease
    head, _, tail = lease.holder.rpartition(":")  # `holder_id`: the actor and a run suffix
    who = head if head and len(tail) == 8 else lease.holder
    what = f"{lease.purpose} by {who}"
    if lease.experiment_id is not None:
        what = f"#{lease.experiment_id} ({what})"
    until = (now or datetime.now(UTC)) + timedelta(seconds=remaining_s)
    if isinstance(busy, QueueAhead):
        what = f"{len(busy.queue)} command(s) queued before it (first: {what})"
    text = (
        f"waiting for {what} to finish on {lease.target}; will start when it does, "
        f"at most until {until.astimezone(UTC):%H:%M} UTC"
    )
    if busy.queued_as is not None:
        text += f"; `cancel waiter={busy.queued_as}` stops waiting"
    return text


@dataclass(frozen=True)
class WaiterCancelResult:
    """What `cancel waiter=ID` did: the waiter (None: no such waiter; it already got the lease,
    gave up or ended), and whether this cancel marked it (False: it was already cancelled)."""

    waiter_id: int
    waiter: WaiterInfo | None
    requested: bool

    def to_json(self) -> dict[str, object]:
        return {"ok": self.requested, "waiter_id": self.waiter_id}

    def text(self) -> str:
        if self.waiter is None:
            return f"no command is waiting as waiter {self.waiter_id} (it got the lease, gave up or ended)"
        if not self.requested:
            return f"waiter {self.waiter_id} was already cancelled by {self.waiter.cancelled_by}"
        return (
            f"waiter {self.waiter_id} ({self.waiter.purpose} by {self.waiter.requested_by} on "
            f"{self.waiter.target}) cancelled: it stops waiting at its next poll and runs nothing"
        )


async def waiter_of(ctx: AppContext, waiter_id: int) -> WaiterInfo | None:
    """The waiter a `cancel waiter=ID` names (RBAC asks who requested it before the cancel runs)."""
    return await ctx.store.run(get_waiter, ctx.store.store, waiter_id)


async def cancel_wait(ctx: AppContext, waiter_id: int, *, actor: str) -> WaiterCancelResult:
    """Cancel a command waiting for a busy target (`wait=`): it has no experiment yet, so this
    marks its queue row, and the waiter ends at its next poll having written nothing."""
    before = await waiter_of(ctx, waiter_id)
    if before is None:
        return WaiterCancelResult(waiter_id, None, False)
    if before.cancelled_at is not None:
        return WaiterCancelResult(waiter_id, before, False)
    after = await ctx.store.run(cancel_waiter, ctx.store.store, waiter_id, actor=actor)
    return WaiterCancelResult(waiter_id, after, after is not None and after.cancelled_by == actor)


async def waiting_queue(ctx: AppContext, target: str | None = None) -> list[WaiterInfo]:
    """The live waiters (`wait=`) of `target` (None: every target), oldest first, for `status`."""
    return await ctx.store.run(live_waiters, ctx.store.store, target, stale_after_s=WAITER_STALE_S)
