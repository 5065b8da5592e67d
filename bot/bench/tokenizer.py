"""Counting the tokens of a streamed chunk's text with the tokenizer file a target names.

Why: a server under speculative decoding sends several tokens in one chunk, and a server that
sends no running usage (`stream_options.continuous_usage_stats`) leaves the client to count
them. bench_serving retokenizes the chunk's text with the model's tokenizer; flagbot does the
same with the file `[targets.NAME.bench] tokenizer` names (a Hugging Face `tokenizer.json`,
read from the bot host, never fetched from a model hub).

Dependencies stay light: the `tokenizers` package is used when it is installed (any model
type); without it, only a word-level model (`"model": {"type": "WordLevel"}`) can be counted,
by splitting the text as its `Whitespace` pre-tokenizer does (runs of word characters, runs of
other non-space characters): exact for such a tokenizer, and refused with a clear error for
any other model type rather than guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

try:  # optional: counts any model type; without it only word-level files are accepted
    from tokenizers import Tokenizer as _HFTokenizer  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - depends on the environment
    _HFTokenizer = None

__all__ = ["TokenCounter", "TokenizerError", "load_token_counter"]

MAX_TOKENIZER_BYTES = 64 * 1024 * 1024
"""A tokenizer.json of a large vocabulary is ~10-30 MB; a bigger file is not one."""
_WHITESPACE_PIECES = re.compile(r"\w+|[^\w\s]+")
"""The `tokenizers` `Whitespace` pre-tokenizer's split."""

TokenCounter = Callable[[str], int]
"""Tokens in one piece of generated text (special tokens not added)."""


class TokenizerError(ValueError):
    """The configured tokenizer file cannot be used; the message says why."""


def load_token_counter(path: str | Path) -> TokenCounter:
    """A counter for the tokenizer file at `path`; TokenizerError naming the file and the problem."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if not file.is_file():
            raise TokenizerError(f"tokenizer {file}: not a regular file")
        if size > MAX_TOKENIZER_BYTES:
            raise TokenizerError(f"tokenizer {file}: {size} bytes, more than a tokenizer file has")
        spec = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenizerError(f"tokenizer {file}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"tokenizer {file}: not a JSON tokenizer file ({exc})") from None
    model = spec.get("model") if isinstance(spec, dict) else None
    kind = model.get("type") if isinstance(model, dict) else None
    if not isinstance(kind, str):
        raise TokenizerError(f"tokenizer {file}: no model type (not a Hugging Face tokenizer.json)")
    if _HFTokenizer is not None:
        try:
            hf = _HFTokenizer.from_file(str(file))
        except Exception as exc:  # the library raises its own exception types
            raise TokenizerError(f"tokenizer {file}: the tokenizers library refused it ({exc})") from None
        return lambda text: len(hf.encode(text, add_special_tokens=False).ids)
    if kind != "WordLevel":
        raise TokenizerError(
            f"tokenizer {file}: a {kind} model needs the `tokenizers` package installed on the "
            "bot host; without it only WordLevel tokenizers are counted"
        )
    return word_level_count


def word_level_count(text: str) -> int:
    """Tokens of `text` under a word-level tokenizer with the `Whitespace` pre-tokenizer."""
    return len(_WHITESPACE_PIECES.findall(text))
