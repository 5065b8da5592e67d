"""observe reads an invocation's journal in bounded memory (issue 17, item 7).

The journal arrives as chunks of `journalctl -o json` from an async iterator; between chunks the
test checks that every complete entry so far has already been parsed (the reader works as the
bytes arrive, it does not collect them) and that what the journal holds stays within a fixed
bound, however many entries pass. No timing, no RSS: counts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from bot.target.invocation_journal import AFTER_READY_LINES, InvocationJournal
from bot.target.journal_read import iter_entries
from tests.unit.target.scripted_node import journal_json
from tests.unit.target.test_observe import CAPACITY, INV, READY, SERVER_ARGS

BATCH = (
    "[2026-11-29 20:15:{s:02d} TP0] Decode batch. #running-req: 26, #token: 81234, token usage: 0.04, "
    "gen throughput (token/s): 1582.31, #queue-req: {q}"
)
WARNING = "[2026-11-29 20:15:00] WARNING: the request queue is long because max_running_requests was reached"
HELD_BOUND = 8
"""first, last, the ready entry, and the times of line 1, the server_args line, one capacity line per rank."""


def journal_bytes(messages: list[str], *, start: float = 1000.0) -> bytes:
    return b"".join(
        journal_json(message, invocation=INV, at=start + k) for k, message in enumerate(messages, start=0)
    )


async def chunked(
    data: bytes, size: int, journal: InvocationJournal, seen: list[tuple[int, int]]
) -> AsyncIterator[bytes]:
    """`data` in chunks of `size`; before each next chunk, what the journal has taken in so far."""
    complete = 0
    for start in range(0, len(data), size):
        if start:
            assert journal.entries_read == complete  # parsed as it arrived, none waiting
            assert journal.held() <= HELD_BOUND
            seen.append((complete, journal.held()))
        chunk = data[start : start + size]
        complete += chunk.count(b"\n")
        yield chunk


async def test_a_long_journal_without_its_ready_line_is_parsed_as_it_arrives_in_bounded_memory() -> None:
    """The ready line has rotated away: the read goes to the end, 20,000 entries, and holds a few things."""
    messages = [SERVER_ARGS.format(rank=0), CAPACITY]
    for k in range(20_000):
        messages.append(WARNING if k % 100 == 0 else BATCH.format(s=k % 60, q=k))
        if k % 1000 == 0:
            messages.append(CAPACITY)  # a capacity line again: its time replaces the earlier one
    data = journal_bytes(messages)
    journal = InvocationJournal("n0", INV, "journalctl ...")
    seen: list[tuple[int, int]] = []
    await journal.consume(iter_entries(chunked(data, 4093, journal, seen)))

    assert len(seen) > 1000  # checked between more than a thousand chunks
    assert journal.entries_read == len(messages) and not journal.truncated and not journal.ready
    assert max(held for _, held in seen) <= HELD_BOUND
    report = journal.report
    assert report.server_args is not None and report.server_args["max_running_requests"] == 48
    assert report.lines == len(messages)
    last_capacity = max(k for k, message in enumerate(messages, start=1) if message == CAPACITY)
    assert next(iter(report.current.per_rank.values()))["line"] == last_capacity
    # line 1 is the server_args line; the capacity line's time is the latest one's
    assert journal.times == {1: 1000.0, last_capacity: 1000.0 + last_capacity - 1}
    assert journal.range()["lines"] == len(messages)
    assert journal.range()["first_cursor"] == "c-1000.0"


async def test_the_read_stops_a_little_after_the_ready_line_and_keeps_its_moment() -> None:
    messages = ["starting", SERVER_ARGS.format(rank=0), CAPACITY, READY]
    messages += [BATCH.format(s=k % 60, q=k) for k in range(200)]
    data = journal_bytes(messages)
    journal = InvocationJournal("n0", INV, "journalctl ...")
    seen: list[tuple[int, int]] = []
    await journal.consume(iter_entries(chunked(data, 512, journal, seen)))

    assert journal.truncated and journal.ready
    assert journal.entries_read == 4 + AFTER_READY_LINES
    assert journal.ready_entry is not None and journal.ready_entry.realtime == 1003.0
    assert journal.times == {1: 1000.0, 2: 1001.0, 3: 1002.0, 4: 1003.0}
    assert journal.report.current.ready_line == 4
