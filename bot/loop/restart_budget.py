"""`policy.max_restarts_per_hour`: how many restarts a target may still take, counted in the store.

Every restart flagbot makes is an audit event (`bot.store.records.RESTART_ACTION`, written by
`bot.target.restart` before it stops the ranks), whichever command, probe or rollback made it. A
command that restarts asks, before anything runs, whether the restarts it needs fit the window:
the last hour holds `used` restarts and the command needs `needed` more; it may go when
`used + needed <= limit`. Otherwise it is refused with the time (UTC) the oldest restarts leave
the window and enough room opens. A command needing more than the limit can never fit.
Rollbacks of a failed run are never refused: they are counted, not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.store import AsyncStore
from bot.store.models import utcnow
from bot.store.records import restart_times

WINDOW = timedelta(hours=1)
SETTING = "policy.max_restarts_per_hour"


class RestartLimitError(RuntimeError):
    """A command refused by `policy.max_restarts_per_hour` (the message says when it may run)."""


@dataclass(frozen=True)
class RestartAllowance:
    """The restarts of the last hour (`recent`, each within `WINDOW` of `now`) against `limit`."""

    limit: int
    needed: int
    recent: tuple[datetime, ...]
    now: datetime

    @property
    def used(self) -> int:
        return len(self.recent)

    @property
    def allowed(self) -> bool:
        return self.used + self.needed <= self.limit

    @property
    def next_allowed(self) -> datetime | None:
        """When `needed` restarts fit (None: now, or never when `needed` exceeds the limit)."""
        if self.allowed or self.needed > self.limit:
            return None
        leaving = self.used + self.needed - self.limit  # how many must age out of the window
        return sorted(self.recent)[leaving - 1] + WINDOW

    def refusal(self, target: str, what: str) -> str | None:
        """Why `what` may not restart `target` now, naming the setting and the next allowed time."""
        if self.allowed:
            return None
        need = f"{what} needs {_restarts(self.needed)}"
        if self.needed > self.limit:
            return (
                f"{target}: {need}, more than {SETTING} = {self.limit} allows in any hour; "
                "raise the limit in the target's policy to run it"
            )
        when = self.next_allowed
        assert when is not None  # allowed is False and needed fits the limit
        return (
            f"{target}: {need} and the target had {_restarts(self.used)} in the last hour "
            f"({SETTING} = {self.limit}); the next restart is allowed at {when:%Y-%m-%d %H:%M:%S} UTC"
        )


def _restarts(count: int) -> str:
    return f"{count} restart" + ("" if count == 1 else "s")


def allowance(recent: Sequence[datetime], *, limit: int, needed: int, now: datetime) -> RestartAllowance:
    """The allowance at `now` from restart times (those older than `WINDOW` are not counted)."""
    start = now - WINDOW
    return RestartAllowance(limit, needed, tuple(t for t in recent if start < t <= now), now)


async def read_allowance(
    store: AsyncStore, target: str, *, limit: int, needed: int, now: datetime | None = None
) -> RestartAllowance:
    """The allowance from the restarts the store recorded for the target in the last hour."""
    at = now or utcnow()
    recent = await store.run(restart_times, store.store, target, since=at - WINDOW)
    return allowance(recent, limit=limit, needed=needed, now=at)


async def check_restarts(
    store: AsyncStore, target: str, *, limit: int, needed: int, what: str, now: datetime | None = None
) -> None:
    """RestartLimitError when `needed` restarts do not fit the target's last hour."""
    found = await read_allowance(store, target, limit=limit, needed=needed, now=now)
    why = found.refusal(target, what)
    if why is not None:
        raise RestartLimitError(why)
