"""Posts that must go out once across replicas, and the ones a dead replica owes.

A scheduled job records its result (a check run, a drift change) and then posts it. A replica
that dies between the two (SIGKILLed, its host gone) or a Slack outage leaves the result written
and nobody told, and nothing would ever run that job again for it. So each post is claimed first
in `scheduled_run` (`bot.store.scheduled_runs`, key `KIND:ID`) and the claim finished once told;
the leader posts what is owed later, marked late. A claim left unfinished by a replica that died
is taken over; a result younger than `OWED_POST_GRACE` may still be being posted by the job that
recorded it (a leader handover runs two at once) and is left alone; one older than
`OWED_POST_MAX_AGE` is history, not news.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from bot.app.notify import Notice
from bot.app.runtime import ScheduleRuntime
from bot.store.scheduled_runs import claim_run, finish_run

__all__ = ["OWED_POST_GRACE", "OWED_POST_MAX_AGE", "late_note", "owed_window", "post_once"]

OWED_POST_GRACE = timedelta(minutes=2)
OWED_POST_MAX_AGE = timedelta(days=1)


def owed_window(now: datetime) -> dict[str, datetime]:
    """The `recorded_before` / `recorded_after` bounds of what is owed at `now`."""
    return {"recorded_before": now - OWED_POST_GRACE, "recorded_after": now - OWED_POST_MAX_AGE}


def late_note(at: datetime) -> str:
    """What a late post says of itself."""
    return (
        f"seen at {at:%Y-%m-%d %H:%M} UTC, posted late: the replica that saw it stopped before telling anyone"
    )


async def post_once(
    rt: ScheduleRuntime,
    kind: str,
    row_id: int | None,
    notice: Notice,
    remember: Callable[[str], Awaitable[None]],
) -> str | None:
    """Claim `KIND:ID`, post `notice`, `remember` the message id the notifier kept, finish the
    claim (also when the post went nowhere: it is not tried again). None when another replica
    finished it already or holds it."""
    store = rt.store
    key = f"{kind}:{row_id}"
    claimed = await store.run(claim_run, store.store, key, job=kind, replica=rt.replica, now=rt.clock())
    if not claimed:
        return None
    posted = await rt.notifier.notify(notice)
    if posted is not None:
        await remember(posted)
    await store.run(finish_run, store.store, key, replica=rt.replica, now=rt.clock())
    return posted
