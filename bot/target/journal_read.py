"""Reading journalctl's JSON output over a byte stream, so that every line survives.

Why JSON with `--all`: journald keeps SGLang's lines byte for byte (ANSI escapes, tqdm's `\\r`
redraws, a 14 KB `server_args=` line), but `-o json` gives `MESSAGE: null` for a message over
4 KiB unless `--all` is passed, and a message holding control bytes comes as an array of byte
values instead of a string. Both are decoded here. JSON also
brings each line's invocation id, PID, cursor and microsecond timestamp, which readiness and
observe need to keep one server start apart from the next.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

MAX_LINE_BYTES = 8 << 20
"""One JSON entry longer than this is dropped (journald splits lines at 48 KiB anyway)."""


@dataclass(frozen=True)
class JournalEntry:
    """One journal entry: the message text and where it came from."""

    message: str
    realtime: float
    """Unix seconds (journald's receive time, microsecond resolution)."""
    cursor: str = ""
    invocation: str | None = None
    """The invocation the line belongs to: the service's own `_SYSTEMD_INVOCATION_ID`, or the
    `INVOCATION_ID` that systemd puts on its messages about the unit."""
    systemd: bool = False
    """A line of the service manager about the unit (`Main process exited`, `Started ...`)."""
    pid: int | None = None


def decode_message(value: object) -> str:
    """MESSAGE as text: a string, a byte array (control bytes inside), or null (cut, no --all)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, int) for item in value):
        return bytes(item & 0xFF for item in value).decode("utf-8", "replace")
    return ""


def decode_entry(raw: bytes | str) -> JournalEntry | None:
    """One line of `journalctl -o json`; None for a line that is not a journal entry."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict):
        return None
    try:
        realtime = int(doc.get("__REALTIME_TIMESTAMP", 0)) / 1e6
    except (TypeError, ValueError):
        realtime = 0.0
    own = doc.get("_SYSTEMD_INVOCATION_ID")
    about = doc.get("INVOCATION_ID")
    pid_text = doc.get("_PID")
    return JournalEntry(
        message=decode_message(doc.get("MESSAGE")).rstrip("\n"),
        realtime=realtime,
        cursor=str(doc.get("__CURSOR", "")),
        invocation=str(own) if isinstance(own, str) else (str(about) if isinstance(about, str) else None),
        systemd=not isinstance(own, str) and isinstance(about, str),
        pid=int(pid_text) if isinstance(pid_text, str) and pid_text.isdigit() else None,
    )


class LineSplitter:
    """Bytes in, complete lines out; a partial line waits for the next chunk (bounded)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_line
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk
        lines: list[bytes] = []
        while (end := self._buf.find(b"\n")) >= 0:
            line = bytes(self._buf[:end])
            del self._buf[: end + 1]
            if self._skipping:
                self._skipping = False
                continue
            lines.append(line)
        if len(self._buf) > self._max:  # drop the rest of an absurdly long line
            self._buf.clear()
            self._skipping = True
        return lines

    def rest(self) -> bytes:
        """What is left at the end of the stream (a last line without a newline)."""
        tail = b"" if self._skipping else bytes(self._buf)
        self._buf.clear()
        return tail


async def iter_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The lines of a byte stream, in order, the last one even without a final newline."""
    splitter = LineSplitter()
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    tail = splitter.rest()
    if tail:
        yield tail


async def iter_entries(chunks: AsyncIterator[bytes]) -> AsyncIterator[JournalEntry]:
    """Journal entries of a `-o json` byte stream; lines that are not entries are skipped."""
    async for line in iter_lines(chunks):
        entry = decode_entry(line)
        if entry is not None:
            yield entry


def entries_from_bytes(data: bytes) -> list[JournalEntry]:
    """All entries of a complete `-o json` output."""
    return [entry for line in data.split(b"\n") if line and (entry := decode_entry(line)) is not None]


def messages(entries: Iterable[JournalEntry]) -> list[str]:
    return [entry.message for entry in entries]
