"""Token accounting without a tokenizer: deterministic, documented, cheap.

The twin has no vocabulary, but `usage`, `/metrics`, TTFT (prefill time grows with the prompt)
and the KV budget all need token counts. The rules, which tests and benchmark scripts can
rely on:

* A prompt given as token ids counts its ids.
* A prompt given as text counts `max(words, ceil(chars / 4))`: English BPE vocabularies average
  about four characters per token, and no word is less than one token, so a word-level
  tokenizer (as benchmark tools use offline) never counts more tokens than the twin.
* A chat prompt counts its messages' text plus 4 tokens per message (role and delimiters) plus
  3 for the assistant header, the overhead of common chat templates.
* Generated text is filler words, one token per word, each after the first with a leading
  space, so a whitespace split of the output gives exactly `completion_tokens` words.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

__all__ = ["content_text", "count_chat_tokens", "count_text_tokens", "filler_offset", "word", "word_json"]

PER_MESSAGE = 4
ASSISTANT_HEADER = 3

_WORDS = (  # noqa: SIM905 - a paragraph reads better than 100 quoted words
    "the of and to in is that it was for on are as with his they at be this from have or by one "
    "had not but what all were when we there can an your which their said if do will each about "
    "how up out them then she many some so these would other into has more her two like him see "
    "time could no make than first been its who now people my made over did down only way find "
    "use may water long little very after words called just where most know"
).split()
WORDS: tuple[str, ...] = tuple(_WORDS)
_FIRST = tuple(w.capitalize() for w in WORDS)
_REST = tuple(" " + w for w in WORDS)
_FIRST_JSON = tuple(json.dumps(w) for w in _FIRST)
_REST_JSON = tuple(json.dumps(w) for w in _REST)


def count_text_tokens(text: str) -> int:
    if not text:
        return 0
    return max(len(text.split()), (len(text) + 3) // 4)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if isinstance(p, str))
    return ""


def count_chat_tokens(messages: list[Any]) -> int:
    total = ASSISTANT_HEADER
    for message in messages:
        if isinstance(message, dict):
            total += PER_MESSAGE + count_text_tokens(content_text(message.get("content")))
    return total


def filler_offset(rid: str) -> int:
    """Where in the word list a request's output starts: fixed by its id, so reproducible."""
    return zlib.crc32(rid.encode())


def word(offset: int, index: int) -> str:
    """The text of output token `index` of a request whose words start at `offset`."""
    i = (offset + index) % len(WORDS)
    return _FIRST[i] if index == 0 else _REST[i]


def word_json(offset: int, index: int) -> str:
    """`word` as a JSON string literal (precomputed: this runs once per streamed token)."""
    i = (offset + index) % len(WORDS)
    return _FIRST_JSON[i] if index == 0 else _REST_JSON[i]


def text_of(offset: int, count: int) -> str:
    return "".join(word(offset, i) for i in range(count))
