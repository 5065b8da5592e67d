"""The target's lease around a command that is no playbook (bench, rollback, reconcile).

Why here and not in each front end: a rollback or a benchmark while a `try` restarts the target
would each spoil the other, so every front end must take the lease the same way, with the same
holder naming and the same takeover audit (`bot.loop.lease_guard`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.app.context import AppContext
from bot.app.progress import Progress
from bot.loop.lease_guard import HeldLease, hold_lease, holder_id


@asynccontextmanager
async def leased(
    ctx: AppContext, target: str, *, purpose: str, actor: str, wait_s: float, progress: Progress
) -> AsyncIterator[HeldLease]:
    """Hold `target`'s lease for the block (LeaseHeld when it stays busy for `wait_s`); waiting
    and a takeover are told to `progress`."""
    async with hold_lease(
        ctx.store,
        target,
        purpose=purpose,
        holder=holder_id(actor),
        ttl_s=ctx.lease_ttl_s,
        wait_s=wait_s,
        on_wait=progress.lease_wait,
    ) as held:
        if held.taken_over is not None:
            await progress.lease_taken_over(target, held.taken_over)
        yield held


def lost_reason(held: HeldLease) -> str | None:
    """Why the lease was lost during the block, or None when it was held throughout."""
    return held.lost_reason if held.lost.is_set() else None
