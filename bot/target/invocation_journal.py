"""One start's journal on one node: the lines of a single systemd invocation, as observe reads them.

Read by `_SYSTEMD_INVOCATION_ID=` as JSON with `--all` (a 14 KB `server_args=` line and tqdm's
`\\r` lines survive), from the start's first line to a little after its ready line: startup is
what a snapshot is about. Apart from observe because it is the one remote stream observe reads,
with its own bounds and its own wait for journald to catch up.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from bot.sglang import log_events as ev
from bot.sglang.log import LogFeed, LogReport
from bot.target.journal_read import JournalEntry, iter_entries
from bot.target.nodestate import Backoff, NodeLike
from bot.target.privileged import render_params
from bot.target.readiness_result import Readiness

__all__ = [
    "AFTER_READY_LINES",
    "MAX_JOURNAL_BYTES",
    "InvocationJournal",
    "journal_with_ready",
    "read_invocation",
    "ready_line_into",
]

MAX_JOURNAL_BYTES = 64 << 20
"""A long-running server's invocation journal is mostly access and batch lines; startup is at its
head. The read stops after this much (time on the wire), never holding it: entries are parsed as
they arrive and dropped."""
AFTER_READY_LINES = 20


@dataclass
class InvocationJournal:
    """One invocation's journal as read, in bounded memory: the exact command, the cursor range,
    the parser's report and the moments startup needs; not the lines.

    Why not the lines: when the ready line has rotated away, the read goes on to
    `MAX_JOURNAL_BYTES` (64 MiB, ~200,000 batch lines) and holding them cost ~125 MiB per node.
    Entries go through `add` as they arrive (`consume` reads a stream into it); what is kept is
    the first and last entry, the ready line's, the parser's capped state (`LogFeed`) and the
    journal times of line 1 and of the current start's milestones (`times`): a fixed amount
    whatever the length of the journal.
    """

    node: str
    invocation: str
    command: str
    entries_read: int = 0
    first: JournalEntry | None = None
    last: JournalEntry | None = None
    ready_entry: JournalEntry | None = None
    """The first entry holding SGLang's ready line."""
    truncated: bool = False
    times: dict[int, float] = field(default_factory=dict)
    """Parser line number -> journal time, for line 1 and the milestones of the current start
    (its `server_args=` line, capacity lines, ready line): what `startup_durations` reads."""
    _feed: LogFeed = field(default_factory=LogFeed, repr=False)
    _bytes: int = 0

    @property
    def ready(self) -> bool:
        return self.ready_entry is not None

    @property
    def report(self) -> LogReport:
        """The parser's report of every line read (nothing can be added after)."""
        return self._feed.report()

    def held(self) -> int:
        """How many things this journal holds (entries and times): bounded, however long the read."""
        return sum(entry is not None for entry in (self.first, self.last, self.ready_entry)) + len(self.times)

    def add(self, entry: JournalEntry) -> None:
        """One entry, parsed now and not kept (only the moments that matter)."""
        before = self._feed.lines
        self._feed.feed(entry.message)
        self.entries_read += 1
        self._bytes += len(entry.message) + 200
        if self.first is None:
            self.first = entry
            self.times[1] = entry.realtime
        self.last = entry
        if self.ready_entry is None and ev.READY_TEXT in entry.message:
            self.ready_entry = entry
        current = self._feed.current
        if before < current.last_event_line <= self._feed.lines:  # this entry is an event line
            milestones = {
                1,
                current.server_args_line,
                current.ready_line,
                *(rank.get("line") for rank in current.per_rank.values()),
            }
            here = {line for line in milestones if line is not None and before < line <= self._feed.lines}
            if here:
                self.times = {line: at for line, at in self.times.items() if line in milestones}
                self.times |= dict.fromkeys(here, entry.realtime)

    async def consume(self, entries: AsyncIterator[JournalEntry], *, stop_after_ready: bool = True) -> None:
        """Add entries as they arrive; stop a little after the ready line (startup is what a
        snapshot is about) or at `MAX_JOURNAL_BYTES`, marking the journal truncated."""
        after_ready = -1
        async for entry in entries:
            self.add(entry)
            if after_ready < 0 and self.ready_entry is entry:
                after_ready = 0
            elif after_ready >= 0:
                after_ready += 1
            if (stop_after_ready and after_ready >= AFTER_READY_LINES) or self._bytes > MAX_JOURNAL_BYTES:
                self.truncated = True
                return

    def range(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "invocation": self.invocation,
            "command": self.command,
            "lines": self.entries_read,
            "first_cursor": self.first.cursor if self.first else None,
            "last_cursor": self.last.cursor if self.last else None,
            "truncated": self.truncated,
        }


async def read_invocation(
    node: NodeLike, invocation: str, *, stop_after_ready: bool = True
) -> InvocationJournal:
    """The service's own lines of one invocation, from its first line, streamed through
    `InvocationJournal.consume` (see there for where it stops and what it keeps)."""
    params: dict[str, object] = {"invocation": invocation, "output": "json", "all": True}
    command = render_params("journal-invocation", params, sudo=False).shell
    journal = InvocationJournal(node.name, invocation, command)
    stream = node.stream("journal-invocation", **params)
    try:
        await journal.consume(iter_entries(stream), stop_after_ready=stop_after_ready)
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()  # ends the remote journalctl at once
    return journal


async def journal_with_ready(
    node: NodeLike, invocation: str, *, healthy: bool, wait_s: float
) -> InvocationJournal:
    """Re-read while the server is healthy but its ready line has not reached the journal yet
    (journald lags the process by ~0.3 s)."""
    deadline = time.monotonic() + wait_s
    backoff = Backoff(0.1, 1.5, 0.5)
    while True:
        journal = await read_invocation(node, invocation)
        if journal.ready or not healthy or time.monotonic() > deadline:
            return journal
        await backoff.sleep()


def ready_line_into(readiness: Readiness, journal: InvocationJournal) -> None:
    """Record the ready line's moments from this read when the wait did not stay for them."""
    if readiness.ready_line_at is not None or journal.invocation != readiness.invocation:
        return  # recorded already, or another start's journal (an automatic restart since)
    line = journal.ready_entry
    if line is not None:
        readiness.ready_line_at = line.realtime
        readiness.ready_line_seen_at = time.time()
