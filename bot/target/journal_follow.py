"""Following a unit's journal across lost SSH connections, without losing or repeating an entry.

Why: readiness learns of a fatal line only from the follower; a follower that dies with its
connection (sshd restarted, a NAT idle cut) would miss the line that explains a failed start.
`journalctl --follow` cannot be resumed where it was, so after a loss the follow starts again
from one second before the last entry seen (`--since @<seconds>`, whole seconds so no float
rounding can skip an entry) and the entries of that overlap already seen are skipped by their
cursor (only there: an entry newer than the last one seen is new whatever its cursor). A journal
stream is never re-run by the session itself (`bot.target.ssh_reconnect.RETRY_SAFE`): only the reader
knows where to resume.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from bot.target.errors import ConnectionLostError
from bot.target.journal_read import JournalEntry, iter_entries
from bot.target.nodestate import NodeLike, journal_since

RESUMES_IN_A_ROW = 3
"""Losses with no new entry in between before the loss is passed on (a connection that drops
each time it is opened is a fault to report, not to retry for ever)."""


@dataclass(frozen=True)
class Resume:
    """One resumed follow, as evidence."""

    node: str
    since: str | None
    error: str
    at: float

    def describe(self) -> str:
        start = f"from {self.since}" if self.since else "from the start"
        return (
            f"journal follow on {self.node} lost its connection ({self.error}); "
            f"resumed {start}, entries already seen skipped"
        )


async def follow_journal(
    node: NodeLike,
    params: Mapping[str, object],
    *,
    on_resume: Callable[[Resume], None] | None = None,
) -> AsyncIterator[JournalEntry]:
    """The entries of `journal-follow` with `params` (`output` must be json), for as long as the
    caller reads, resumed after each lost connection. Raises `ConnectionLostError` after
    `RESUMES_IN_A_ROW` losses without a new entry, `UnreachableError` when it cannot reconnect."""
    seen: set[str] = set()
    last: float | None = None
    current = dict(params)
    losses = 0
    resumed = False
    while True:
        try:
            async for entry in iter_entries(node.stream("journal-follow", **current)):
                if resumed and last is not None and entry.realtime <= last and entry.cursor in seen:
                    continue
                seen.add(entry.cursor)
                losses = 0
                last = max(last or 0.0, entry.realtime)
                yield entry
            return
        except ConnectionLostError as exc:
            losses += 1
            if losses > RESUMES_IN_A_ROW:
                raise
            resumed = True
            if last is not None:
                current = {key: value for key, value in current.items() if key != "lines"}
                current["since"] = journal_since(last)
            if on_resume is not None:
                since = current.get("since")
                on_resume(Resume(node.name, str(since) if since else None, exc.detail or "lost", time.time()))
