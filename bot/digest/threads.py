"""Where each run's Slack thread is: recorded when the run starts, read back by the digest.

Why an audit event and not a new column: the Slack reporter already knows the channel and the
thread's `ts` when the engine reports the start, and "flagbot opened a thread for experiment
#N" is an event with an actor and a time like any other; the audit trail outlives the
experiment, needs no store revision, and one indexed query by experiment id reads it back. An
experiment tied to an investigation with a recorded thread is linked to that thread too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bot.digest.model import ThreadLink
from bot.store import Store
from bot.store.digest_reads import audit_events_of, investigations_by_id
from bot.store.records import audit

__all__ = ["THREAD_ACTION", "record_thread", "threads_of"]

THREAD_ACTION = "slack-thread"


def record_thread(
    store: Store,
    *,
    experiment_id: int | None,
    target: str,
    channel: str,
    thread_ts: str,
    permalink: str | None = None,
    actor: str = "flagbot",
) -> None:
    """Remember that experiment #N is discussed in this Slack thread (the newest record wins).

    `experiment_id` None: a thread opened for a command on `target` before (or without) an
    experiment (a status card just posted, a rollback, a bench); a mention in the thread then
    acts on that target (`bot.store.records.thread_targets`)."""
    detail: dict[str, Any] = {"channel": channel, "thread_ts": thread_ts}
    if permalink:
        detail["permalink"] = permalink
    audit(store, actor=actor, target=target, action=THREAD_ACTION, detail=detail, experiment_id=experiment_id)


def threads_of(
    store: Store, experiment_ids: Iterable[int], investigations: dict[int, int] | None = None
) -> dict[int, ThreadLink]:
    """experiment id -> its thread: the newest recorded one, else its investigation's thread.

    `investigations` maps experiment id -> investigation id for the experiments that have one.
    """
    found: dict[int, ThreadLink] = {}
    for event in audit_events_of(store, THREAD_ACTION, experiment_ids):
        link = _link(event.detail)
        if link is not None and event.experiment_id is not None:
            found[event.experiment_id] = link
    missing = {e: i for e, i in (investigations or {}).items() if e not in found}
    threads: dict[int, ThreadLink] = {}
    for row in investigations_by_id(store, missing.values()):
        if row.id is not None and row.channel and row.thread_ts:
            threads[row.id] = ThreadLink(row.channel, row.thread_ts)
    for experiment_id, investigation_id in missing.items():
        if investigation_id in threads:
            found[experiment_id] = threads[investigation_id]
    return found


def _link(detail: dict[str, Any]) -> ThreadLink | None:
    channel, ts = detail.get("channel"), detail.get("thread_ts")
    if not isinstance(channel, str) or not isinstance(ts, str) or not channel or not ts:
        return None
    permalink = detail.get("permalink")
    return ThreadLink(channel, ts, permalink if isinstance(permalink, str) and permalink else None)
