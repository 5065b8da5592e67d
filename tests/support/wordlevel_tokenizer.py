"""A small word-level Hugging Face `tokenizer.json`, written by the test that needs it.

Why: the load generator's tokenizer path is tested with a real tokenizer file, built locally;
nothing is fetched from a model hub. The file is what `tokenizers` itself saves for a
`WordLevel` model with the `Whitespace` pre-tokenizer, so the same file also loads in the
`tokenizers` package when it is installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_wordlevel_tokenizer"]


def write_wordlevel_tokenizer(path: Path, words: Iterable[str], *, model_type: str = "WordLevel") -> Path:
    """Write a tokenizer.json whose vocabulary is `words` (plus `[UNK]`) and return its path."""
    vocab = {"[UNK]": 0}
    for word in words:
        vocab.setdefault(word, len(vocab))
    spec: dict[str, object] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": model_type, "vocab": vocab, "unk_token": "[UNK]"},
    }
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path
