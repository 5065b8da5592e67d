"""Strip the prefixes that wrap one SGLang log line and say what is left.

A line read from a journal or a container can carry several layers, outermost first:

* a `docker compose logs` service column (`sglang-1  | `);
* Docker's RFC3339Nano timestamp (`2025-03-09T21:45:34.123456789Z `, from `docker logs -t`);
* journald's own prefix (`Mar 09 21:45:34 host ident[pid]: `, or the `-o short-iso`,
  `short-precise`, `short-iso-precise`, `short-full`, `short-unix` and `short-monotonic` forms);
* raw `\\r` progress-bar redraws (tqdm) and ANSI colour escapes;
* a Python `logging` wrapper (`2025-03-07 23:50:27,531 - __main__ - INFO - `);
* SGLang's own `[YYYY-mm-dd HH:MM:SS(.mmm) <ranks>] ` (or time-only `[HH:MM:SS] `), sometimes glued
  after a progress bar or a row of dots instead of at the start of the line;
* the newer `LEVEL file.py:N: ` tag, or uvicorn's `INFO:     `;
* or, instead of SGLang's prefix, a glog header (`E0227 14:34:03.337682 3833148 file.cpp:265] `)
  written by C++ libraries such as Mooncake.

The parser downstream only looks at `message`; the other fields let it tell a rank's line from
the main process's, and a real WARNING from a line that merely contains the word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_JOURNAL_RE = re.compile(
    r"(?P<ts>"
    rf"{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{{1,9}})?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?[+-]\d\d:?\d\d"
    r"|[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? [A-Za-z][\w+-]{0,9}"
    r"|\d{9,11}\.\d{1,9}"  # -o short-unix
    r"|\[ *\d{1,10}\.\d{1,9}\]"  # -o short-monotonic
    r") (?P<host>[^\s\[\]]+) (?P<ident>[^\s\[\]:]+)(?:\[(?P<pid>\d{1,10})\])?: ?"
)
_DOCKER_TS_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z ")
_COMPOSE_RE = re.compile(r"[A-Za-z0-9][\w.-]{0,120}-\d{1,4}\s+\| ")
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_PYLOG_RE = re.compile(
    r"(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - (?P<name>\S{1,200}) - "
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) - "
)
_SGLANG_RE = re.compile(
    r"\[(?P<ts>(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{1,6})?)"
    r"(?P<ranks>(?: [A-Z][A-Z_]{0,15}\d{1,6}){0,8})\] ?"
)
_GLUED_RE = re.compile(
    r"\[(?:\d{4}-\d\d-\d\d )\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?: [A-Z][A-Z_]{0,15}\d{1,6})*\]"
)
_LEVEL_SRC_RE = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) (?P<src>[\w.\-]{1,200}\.py:\d{1,7}): "
)
_UVICORN_RE = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?: +|$)")
_GLOG_RE = re.compile(
    r"(?P<level>[IWEF])(?P<ts>\d{4} \d\d:\d\d:\d\d\.\d{1,9})\s+\d{1,10} (?P<src>[\w.\-]{1,200}:\d{1,7})\] ?"
)
_RANK_RE = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}


@dataclass(frozen=True)
class LogLine:
    """One physical line with its prefixes taken apart.

    `fmt` names the innermost prefix found: "sglang" (SGLang's bracket prefix, with or without
    a level tag), "logger" (a Python logging wrapper without SGLang's prefix inside), "glog",
    or "bare" (nothing recognised; tracebacks, tqdm bars and pre-logging warnings look like this).
    `timestamp` is the innermost timestamp, falling back to journald's or Docker's. `source` is
    the `file.py:N` of a level tag or glog header, or the logger's name of a "logger" line.
    """

    message: str
    timestamp: str | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    level: str | None = None
    source: str | None = None
    fmt: str = "bare"
    outer_timestamp: str | None = None
    unit: str | None = None
    pid: int | None = None

    @property
    def rank_label(self) -> str:
        """The ranks as SGLang prints them, e.g. "DP0 TP0 EP0"; "" for the main process."""
        return " ".join(f"{name}{num}" for name, num in self.ranks.items())


def strip_ansi(text: str) -> str:
    """Remove terminal colour and cursor escapes (a TTY-attached server writes them)."""
    return _ANSI_RE.sub("", text) if "\x1b" in text else text


def last_redraw(text: str) -> str:
    """Keep the meaningful part of a line that tqdm redrew with raw carriage returns.

    A terminal shows only what follows the last `\\r`; but a log line is sometimes written after a
    bar without a newline, so the last segment holding SGLang's prefix wins, else the last
    segment that is not blank.
    """
    if "\r" not in text:
        return text
    segments = text.split("\r")
    for seg in reversed(segments):
        if "[" in seg and _GLUED_RE.search(seg):
            return seg
    for seg in reversed(segments):
        if seg.strip():
            return seg
    return ""


def parse_ranks(text: str) -> dict[str, int]:
    """`"DP0 TP0 EP0"` -> `{"DP": 0, "TP": 0, "EP": 0}`, in printed order; other tokens ignored."""
    ranks: dict[str, int] = {}
    for token in text.split():
        match = _RANK_RE.fullmatch(token)
        if match:
            ranks[match.group(1)] = int(match.group(2))
    return ranks


def _strip_outer(line: str) -> tuple[str, str | None, str | None, int | None]:
    """Remove compose, Docker and journald prefixes; return (rest, timestamp, ident, pid)."""
    ts: str | None = None
    ident: str | None = None
    pid: int | None = None
    match = _COMPOSE_RE.match(line)
    if match:
        line = line[match.end() :]
    match = _DOCKER_TS_RE.match(line)
    if match:
        ts = match.group(0)[:-1]
        line = line[match.end() :]
    jmatch = _JOURNAL_RE.match(line)
    if jmatch:
        ts = jmatch.group("ts")
        ident = jmatch.group("ident")
        pid = int(jmatch.group("pid")) if jmatch.group("pid") else None
        line = line[jmatch.end() :]
        match = _DOCKER_TS_RE.match(line)  # a container's output forwarded into the journal
        if match:
            line = line[match.end() :]
    return line, ts, ident, pid


def parse_line(line: str) -> LogLine:
    """Take one physical line (newline optional) apart into a `LogLine`; never raises."""
    line = line.rstrip("\r\n")
    rest, outer_ts, unit, pid = _strip_outer(line)
    rest = last_redraw(strip_ansi(rest))
    level: str | None = None
    timestamp: str | None = None
    fmt = "bare"
    pymatch = _PYLOG_RE.match(rest)
    if pymatch:
        level = pymatch.group("level")
        timestamp = pymatch.group("ts")
        fmt = "logger"
        rest = rest[pymatch.end() :]
    match = _SGLANG_RE.match(rest)
    if match is None and "[" in rest and not rest.startswith("[") and rest[:1] not in " \t":
        glued = _GLUED_RE.search(rest)
        if glued:
            match = _SGLANG_RE.match(rest, glued.start())
    if match is None:
        gmatch = _GLOG_RE.match(rest) if fmt == "bare" else None
        if gmatch:
            message = rest[gmatch.end() :].rstrip()
            return LogLine(
                message=message,
                timestamp=gmatch.group("ts"),
                level=_GLOG_LEVELS[gmatch.group("level")],
                source=gmatch.group("src"),
                fmt="glog",
                outer_timestamp=outer_ts,
                unit=unit,
                pid=pid,
            )
        return LogLine(
            message=rest.rstrip(),
            timestamp=timestamp or outer_ts,
            level=level,
            source=pymatch.group("name") if pymatch else None,
            fmt=fmt,
            outer_timestamp=outer_ts,
            unit=unit,
            pid=pid,
        )
    ranks = parse_ranks(match.group("ranks"))
    rest = rest[match.end() :]
    source: str | None = None
    lmatch = _LEVEL_SRC_RE.match(rest)
    if lmatch:
        level, source = lmatch.group("level"), lmatch.group("src")
        rest = rest[lmatch.end() :]
    else:
        umatch = _UVICORN_RE.match(rest)
        if umatch:
            level = umatch.group("level")
            rest = rest[umatch.end() :]
    return LogLine(
        message=rest.rstrip(),
        timestamp=match.group("ts"),
        ranks=ranks,
        level=level,
        source=source,
        fmt="sglang",
        outer_timestamp=outer_ts,
        unit=unit,
        pid=pid,
    )
