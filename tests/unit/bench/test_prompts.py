"""Synthetic prompts: the length the server counts, no shared prefixes, reproducible by seed."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from bot.bench.prompts import WORDS, calibrate, make_prompt
from flagbot_lab.twin.engine.tokens import count_chat_tokens, count_text_tokens


@given(st.integers(min_value=1, max_value=5000), st.integers(min_value=0, max_value=2**32))
def test_a_prompt_of_n_words_is_n_tokens_to_a_character_counting_server(n: int, seed: int) -> None:
    prompt = make_prompt(random.Random(seed), n)
    assert len(prompt.split()) == n
    assert count_text_tokens(prompt) == n  # max(words, ceil(chars / 4)): 4 characters a word


def test_prompts_are_reproducible_and_share_no_prefix() -> None:
    a, b = random.Random(7), random.Random(7)
    first = [make_prompt(a, 256) for _ in range(50)]
    assert first == [make_prompt(b, 256) for _ in range(50)]
    assert len({p.split()[:8].__str__() for p in first}) == 50


def test_the_words_are_distinct_three_letter_words() -> None:
    assert len(set(WORDS)) == len(WORDS) > 100
    assert all(len(w) == 3 and w.isalpha() and w.islower() for w in WORDS)


def test_calibration_removes_a_chat_templates_overhead_in_one_step() -> None:
    rng = random.Random(1)
    requested = 1024
    words = requested
    for _ in range(2):
        reported = count_chat_tokens([{"role": "user", "content": make_prompt(rng, words)}])
        words = calibrate(requested, words, reported)
    assert count_chat_tokens([{"role": "user", "content": make_prompt(rng, words)}]) == requested


def test_calibration_scales_when_words_split_into_several_tokens() -> None:
    assert calibrate(1000, 1000, 2000) == 500
    assert calibrate(1000, 1000, None) == 1000
    assert calibrate(1000, 1000, 1000) == 1000
    assert calibrate(8, 8, 15) == 1  # never below one word
