"""Synthetic prompts of a controlled length, as bench_serving's `random-ids` dataset makes them.

Why words and not token ids: the chat endpoint takes text only, and flagbot does not know the
server's tokenizer. The words are 3-letter English words each written with a leading space
(4 characters): common words like these are single tokens in the BPE vocabularies of current
open models, and a server that estimates tokens from characters (4 per token, as the twin does)
counts the same number. Every prompt is drawn afresh from a seeded generator, so two prompts
share no prefix and the radix cache cannot make a later request cheaper than the first.

What the server counts may still differ (chat templates add a few tokens; a tokenizer may
split a word). `calibrate` corrects the word count from a warmup request's
`usage.prompt_tokens`, so the measured requests carry the requested input length as the server
counts it; the token counts reported are always the server's own.
"""

from __future__ import annotations

import random

__all__ = ["WORDS", "calibrate", "make_prompt"]

WORDS: tuple[str, ...] = tuple(
    (  # noqa: SIM905 - a paragraph reads better than 113 quoted words
        "the and for are but not you all any can had her was one our out day get has him his how "
        "man new now old see two way who boy did its let put say she too use act add age ago air "
        "arm art ask bad bag bed big bit box bus buy car cup cut dog dry due eat end eye far few "
        "fit fly fun god gun guy hat hit hot ice job key kid law lay leg lie lot low map mix mom "
        "net oil own pay per pop red run sea set sit six sky son sun tax tea ten top try war wet "
        "win yes yet"
    ).split()
)
"""Common 3-letter words. Expected to be one token each with a leading space in current BPE
vocabularies (not checked per tokenizer here: `calibrate` corrects from what the server counts)."""


def make_prompt(rng: random.Random, words: int) -> str:
    """`words` random words separated by single spaces (the first without a leading space)."""
    return " ".join(rng.choices(WORDS, k=max(1, words)))


def calibrate(requested: int, words_sent: int, reported: int | None) -> int:
    """Words to send so the server counts `requested` prompt tokens, after one observation.

    The model is `tokens = words + overhead` (a chat template's fixed cost); a server whose
    count is far from that (a tokenizer splitting these words) is scaled instead. Without a
    reported count nothing changes.
    """
    if reported is None or reported <= 0 or words_sent <= 0:
        return words_sent
    overhead = reported - words_sent
    if 0 <= overhead <= max(64, requested // 4):
        return max(1, words_sent + requested - reported)
    return max(1, round(words_sent * requested / reported))
