"""Streaming parser for SGLang server logs (journald, Docker, a terminal paste, a log file).

It answers what a flag-tuning bot asks after a restart: which arguments did the server really
take (`server_args=`), what capacity did it end up with (the capacity line, per rank), did it
reach `The server is fired up and ready to roll!`, and if not, what killed it.

Speed and memory: a steady-state journal is hundreds of MB of batch and access lines that say
nothing about startup. The byte stream is read in chunks and each chunk is searched for a few
ASCII keywords (`log_events.KEYWORDS`); only the lines holding one are decoded and parsed.
Memory is bounded: one chunk, the partial line at its end (capped at `MAX_LINE_BYTES`; the
rest of a longer line is dropped), and capped lists per start. The text entry points apply the
same keyword filter per line, so every entry point returns the same report for the same input.

Several starts in one input (a journal spanning restarts) are split at a new `server_args=`
line once the current start has shown something, at journald's `Started <unit>` line, and
where the journald PID of the service changes. The report's top level describes the last start.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from bot.sglang import log_events as ev
from bot.sglang.adjustments import flag_of
from bot.sglang.log_report import LIST_CAP, LogReport, StartReport
from bot.sglang.logline import LogLine, parse_line
from bot.sglang.server_args import read_server_args

__all__ = [
    "MAX_LINE_BYTES",
    "LogFeed",
    "LogReport",
    "StartReport",
    "parse_log_lines",
    "parse_log_stream",
    "parse_log_text",
]

MAX_LINE_BYTES = 4 << 20
"""A longer line keeps only its first 4 MiB (a server_args line is ~14 KB)."""
MAX_STARTS = 1000
"""Older starts beyond this are counted in `starts_dropped`, not kept."""

_PENDING_CAP = 64
_PIDS_CAP = 1024
_KEYWORDS = ev.KEYWORDS
_KEYWORDS_B = tuple(k.encode("ascii") for k in _KEYWORDS)


class _Scanner:
    """Turns the selected lines into per-start state; line numbers are 1-based."""

    def __init__(self) -> None:
        self.starts: list[StartReport] = [StartReport(first_line=1)]
        self.dropped = 0
        self._pids: dict[str, int] = {}
        self._pending: list[dict[str, Any]] = []
        """Warnings since the last event: their start is known at the next event."""
        self._in_error = False
        """A fatal line was the last event: bare lines until the next prefixed one belong to it."""
        self._link: tuple[str, int] | None = None
        """A chained-traceback separator seen after a fatal line: (how, that line's number)."""

    @property
    def cur(self) -> StartReport:
        return self.starts[-1]

    def _has_content(self) -> bool:
        return self.cur.last_event_line > 0

    def _flush_warnings(self) -> None:
        for warning in self._pending:
            self.cur.add_warning(warning)
        self._pending = []

    def _new_start(self, lineno: int, take_warnings: bool) -> None:
        """Close the current start; post-init warnings printed just before a `server_args=`
        line (`take_warnings`) open the new start rather than trail the old one."""
        if not take_warnings:
            self._flush_warnings()
        first = min([lineno, *(w["line"] for w in self._pending)])
        prev = self.cur
        prev.last_line = first - 1
        prev.compact()
        self.starts.append(StartReport(first_line=first))
        self._link = None
        self._in_error = False
        if len(self.starts) > MAX_STARTS:
            del self.starts[0]
            self.dropped += 1

    def _event(self, lineno: int, stage: str | None = None) -> None:
        self._flush_warnings()
        self.cur.last_event_line = lineno
        if stage is not None:
            self.cur.stage = stage

    def process(self, lineno: int, raw: str) -> None:
        """Parse one line that passed the keyword filter."""
        line = parse_line(raw)
        msg = line.message
        if line.fmt != "bare":
            self._in_error = False
        self._boundaries(lineno, line)
        cur = self.cur
        if "server_args=" in msg and (
            msg.startswith("server_args=") or "server_args=ServerArgs(" in msg or "server_args={" in msg
        ):
            read = read_server_args(msg)
            if read.values is not None:  # not a source line quoting `f"server_args={...}"`
                if self._has_content():
                    self._new_start(lineno, take_warnings=True)
                    cur = self.cur
                cur.set_server_args(read.values, read.complete, lineno, read)
                self._event(lineno, "server_args")
                return
            if msg.startswith("server_args="):  # SGLang's own line, in a form not read
                if self._has_content():
                    self._new_start(lineno, take_warnings=True)
                    cur = self.cur
                cur.unparsed.update(read.unparsed)
                cur.server_args_line = cur.server_args_line or lineno
                self._event(lineno, "server_args")
                return
        if "max_total_num_tokens=" in msg:
            values = ev.capacity(msg)
            if values and "max_total_num_tokens" in values:
                if line.rank_label in cur.per_rank or len(cur.per_rank) < 4 * LIST_CAP:
                    cur.per_rank[line.rank_label] = {**values, "line": lineno}
                self._event(lineno, "capacity")
                return
        dtype = ev.kv_dtype(msg)
        if dtype is not None:
            cur.kv_dtype = cur.kv_dtype or dtype
            return
        if ev.READY_TEXT in msg:
            cur.ready = True
            cur.ready_line = cur.ready_line or lineno
            self._event(lineno, "ready")
            return
        for extract, target, stage in (
            (ev.distributed_init, cur.distributed_init, "distributed_init"),
            (ev.kv_cache, cur.kv_cache, "kv_cache"),
            (ev.weights, cur.weights, "weights"),
            (ev.cuda_graph, cur.cuda_graph, "cuda_graph"),
            (ev.mamba_cache, cur.mamba_cache, "mamba_cache"),
        ):
            found = extract(msg)
            if found is not None:
                if "unparsed" in found:
                    cur.unparsed.setdefault(stage, f"line {lineno}: {found['unparsed']}")
                if len(target) < LIST_CAP:
                    target.append({"line": lineno, "rank": line.rank_label, **found})
                self._event(lineno, stage if stage != "mamba_cache" else None)
                return
        link = ev.chain_link(msg) if line.fmt == "bare" else None
        if link is not None:
            last = cur.errors[-1] if cur.errors else None
            self._link = (link, last["line"]) if last is not None and last["severity"] == "fatal" else None
            return
        severity = ev.fatal(line)
        if severity is not None:
            if len(cur.errors) < LIST_CAP:
                error: dict[str, Any] = {
                    "line": lineno,
                    "text": msg.strip(),
                    "severity": severity,
                    "rank": line.rank_label,
                    "after_ready": cur.ready,
                }
                if self._link is not None and severity == "fatal":
                    error["follows"] = {"line": self._link[1], "link": self._link[0]}
                cur.errors.append(error)
            if severity == "fatal":
                self._link = None
            self._in_error = True
            self._event(lineno, None if cur.ready else "failed")
            return
        if cur.mamba_cap is None:
            cur.mamba_cap = ev.mamba_cap(msg)
        if ev.is_warning(line, in_error=self._in_error):
            text = msg.strip()
            entry = {
                "line": lineno,
                "text": text,
                "level": line.level,
                "source": line.source,
                "rank": line.rank_label,
                "flag": flag_of(text),
            }
            self._pending.append(entry)
            if len(self._pending) > _PENDING_CAP:
                cur.add_warning(self._pending.pop(0))

    def _boundaries(self, lineno: int, line: LogLine) -> None:
        """Open a new start at systemd's `Started` line or when the service's PID changes."""
        if ev.unit_started(line):
            if self._has_content():
                self._new_start(lineno, take_warnings=False)
            return
        if line.unit is None or line.pid is None or line.unit == "systemd":
            return
        previous = self._pids.get(line.unit)
        if previous is None and len(self._pids) >= _PIDS_CAP:
            self._pids.clear()  # garbage input with endless identifiers; real journals have a few
        self._pids[line.unit] = line.pid
        if previous is not None and previous != line.pid and self._has_content():
            self._new_start(lineno, take_warnings=False)

    def finish(self, total_lines: int) -> LogReport:
        self._flush_warnings()
        self.cur.last_line = total_lines
        return LogReport(starts=self.starts, lines=total_lines, starts_dropped=self.dropped)


def _fit(line: str) -> str:
    """Cap a text line exactly as the byte path caps it (first MAX_LINE_BYTES of UTF-8)."""
    if len(line) <= MAX_LINE_BYTES // 4:
        return line
    data = line.encode("utf-8", "replace")
    if len(data) <= MAX_LINE_BYTES:
        return line
    return data[:MAX_LINE_BYTES].decode("utf-8", "replace")


def _run_lines(lines: Iterable[str]) -> LogReport:
    scanner = _Scanner()
    count = 0
    for line in lines:
        count += 1
        line = _fit(line)
        if any(k in line for k in _KEYWORDS):
            scanner.process(count, line)
    return scanner.finish(count)


def _split_text(text: str) -> Iterator[str]:
    start = 0
    while True:
        end = text.find("\n", start)
        if end < 0:
            if start < len(text):
                yield text[start:]
            return
        yield text[start:end]
        start = end + 1


class LogFeed:
    """`parse_log_lines` one item at a time, as the lines arrive: `feed` each, `report` once at the end.

    Holds the parser's capped state and none of the lines, so a journal read line by line
    (observe's) takes the same memory for 20,000 lines as for 200,000. `current` is the start
    being read, for a reader that wants to know which line just became a milestone.
    """

    def __init__(self) -> None:
        self._scanner = _Scanner()
        self.lines = 0
        """Lines fed so far (the last one's number)."""
        self._report: LogReport | None = None

    def feed(self, item: str) -> None:
        """One item (with or without its newline); an item holding `\\n` counts as several lines."""
        if self._report is not None:
            raise RuntimeError("the report was made: nothing more can be fed")
        parts = item.split("\n") if "\n" in item else (item,)
        if len(parts) > 1 and parts[-1] == "":
            parts = parts[:-1]
        for line in parts:
            self.lines += 1
            line = _fit(line)
            if any(k in line for k in _KEYWORDS):
                self._scanner.process(self.lines, line)

    @property
    def current(self) -> StartReport:
        return self._scanner.cur

    def report(self) -> LogReport:
        """The report of everything fed (made once; feeding ends here)."""
        if self._report is None:
            self._report = self._scanner.finish(self.lines)
        return self._report


def parse_log_lines(lines: Iterable[str]) -> LogReport:
    """Parse lines (with or without their newline); an item holding `\\n` counts as several.

    Read files with `newline=""` (or use `parse_log_stream`): universal-newline mode turns
    tqdm's raw `\\r` into line breaks and shifts the line numbers.
    """
    feed = LogFeed()
    for item in lines:
        feed.feed(item)
    return feed.report()


def parse_log_text(text: str) -> LogReport:
    """Parse a whole log held in memory; lines are split at `\\n` only."""
    return _run_lines(_split_text(text))


def parse_log_stream(stream: BinaryIO, chunk_size: int = 1 << 20) -> LogReport:
    """Parse a byte stream chunk by chunk (invalid UTF-8 is replaced, never fatal)."""
    scanner = _Scanner()
    chunk_size = max(1, chunk_size)
    count = 0
    pending: list[bytes] = []
    pending_len = 0
    while True:
        data = stream.read(chunk_size)
        if not data:
            break
        first_nl = data.find(b"\n")
        if first_nl < 0:
            if pending_len < MAX_LINE_BYTES:
                piece = data[: MAX_LINE_BYTES - pending_len]
                pending.append(piece)
                pending_len += len(piece)
            continue
        start = 0
        if pending:
            piece = data[: max(0, min(first_nl, MAX_LINE_BYTES - pending_len))]
            pending.append(piece)
            count = _scan_block(scanner, b"".join(pending) + b"\n", count)
            pending, pending_len, start = [], 0, first_nl + 1
        last_nl = data.rfind(b"\n")
        if last_nl >= start:
            block = data[start : last_nl + 1]
            if len(block) > MAX_LINE_BYTES:  # only when chunk_size exceeds the line cap
                count = _scan_long_block(scanner, block, count)
            else:
                count = _scan_block(scanner, block, count)
        tail = data[last_nl + 1 : last_nl + 1 + MAX_LINE_BYTES]
        if tail:
            pending.append(tail)
            pending_len = len(tail)
    if pending:
        count = _scan_block(scanner, b"".join(pending) + b"\n", count)
    return scanner.finish(count)


def _scan_long_block(scanner: _Scanner, block: bytes, count: int) -> int:
    """A block that may hold lines over the cap: cut each such line, then scan normally."""
    parts = block[:-1].split(b"\n")
    fitted = b"\n".join(part[:MAX_LINE_BYTES] for part in parts) + b"\n"
    return _scan_block(scanner, fitted, count)


def _scan_block(scanner: _Scanner, block: bytes, count: int) -> int:
    """Process the keyword lines of `block` (complete lines, ending in b"\\n"); return count."""
    starts: set[int] = set()
    find = block.find
    for keyword in _KEYWORDS_B:
        pos = find(keyword)
        while pos >= 0:
            line_start = block.rfind(b"\n", 0, pos) + 1
            starts.add(line_start)
            pos = find(keyword, find(b"\n", pos))
    lineno = count
    prev = 0
    for line_start in sorted(starts):
        lineno += block.count(b"\n", prev, line_start)
        prev = line_start
        end = find(b"\n", line_start)
        scanner.process(lineno + 1, block[line_start:end].decode("utf-8", "replace"))
    return count + block.count(b"\n")
