"""Server-sent events from an OpenAI-compatible stream, decoded at the cost of one split per read.

Two layers, both pure and cheap because they run once per streamed token:

* `SSEDecoder.feed(bytes) -> list[bytes]`: the `data:` payloads of every complete event in
  what has arrived so far (the WHATWG rules that matter here: events end at a blank line,
  `\\r\\n`, `\\r` and `\\n` all end a line, several `data:` lines join with `\\n`, comments and
  other fields are ignored). A read may end mid-event; the rest waits for the next read.
* `interpret(payload) -> Chunk`: what one payload means for the metrics: content (the first
  one with non-empty text is the first token, as bench_serving counts it; role-only and
  finish-only chunks are not), the server's `usage`, an error reported inside the stream
  (SGLang writes `data: {"error": {...}}` once a stream has started), or `[DONE]`.

`content` is the chat delta's `content` or `reasoning_content`, or a completion's `text`: a
reasoning model's first thinking token is its first token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Chunk", "SSEDecoder", "interpret"]

_DONE = b"[DONE]"


class SSEDecoder:
    """Incremental SSE decoder; keep one per response stream."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        """Payloads of the events completed by `data`, in order (the empty list if none)."""
        buf = self._buf + data if self._buf else data
        if b"\r" in buf:
            if buf.endswith(b"\r"):  # a `\r\n` split across two reads: decide on the next one
                self._buf = buf
                return []
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n\n" not in buf:
            self._buf = buf
            return []
        parts = buf.split(b"\n\n")
        self._buf = parts.pop()
        out: list[bytes] = []
        for part in parts:
            if part.startswith(b"data: ") and b"\n" not in part:
                out.append(part[6:])  # the common case: one `data: ...` line
            elif part:
                payload = _general(part)
                if payload is not None:
                    out.append(payload)
        return out

    def pending(self) -> bytes:
        """Bytes received after the last complete event (a stream cut mid-event)."""
        return self._buf


def _general(event: bytes) -> bytes | None:
    lines: list[bytes] = []
    for line in event.split(b"\n"):
        name, _, value = line.partition(b":")
        if name == b"data":  # `data` alone is a data line with an empty value
            lines.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(lines) if lines else None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One event as the metrics see it."""

    content: bool = False
    """Carries non-empty generated text."""
    text: str = ""
    """That text (what a tokenizer counts when the stream has no running usage)."""
    done: bool = False
    usage: dict[str, Any] | None = None
    error: str | None = None


DONE = Chunk(done=True)
EMPTY = Chunk()


def interpret(payload: bytes) -> Chunk:
    """The meaning of one `data:` payload (never raises: an unreadable payload is an error)."""
    if payload == _DONE:
        return DONE
    try:
        obj = json.loads(payload)
    except ValueError:
        return Chunk(error=f"unreadable stream event: {payload[:120]!r}")
    if not isinstance(obj, dict):
        return Chunk(error=f"unexpected stream event: {payload[:120]!r}")
    if obj.get("error") or obj.get("object") == "error":
        return Chunk(error=_error_text(obj))
    text: object = None
    choices = obj.get("choices")
    if choices and isinstance(choices, list) and isinstance(choices[0], dict):
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            text = delta.get("content") or delta.get("reasoning_content")
        else:
            text = choice.get("text")
    content = bool(text)
    usage = obj.get("usage")
    if isinstance(usage, dict):
        return Chunk(content=content, text=str(text) if content else "", usage=usage)
    return Chunk(content=True, text=str(text)) if content else EMPTY


def _error_text(obj: dict[str, Any]) -> str:
    error = obj.get("error")
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or json.dumps(error)[:200]
        return str(message)
    if isinstance(error, str):
        return error
    return str(obj.get("message") or "error event in stream")
