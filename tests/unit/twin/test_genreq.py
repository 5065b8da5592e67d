"""Generation requests carry their prompt's prefix-cache key: equal prompt starts, equal key starts."""

from __future__ import annotations

from flagbot_lab.twin.engine.genreq import parse_chat, parse_completion, parse_generate
from flagbot_lab.twin.engine.prefix import PrefixCache

SYSTEM = "Use the house style. " * 40


def shared_tokens(a: str | None, b: str | None) -> int:
    assert a is not None and b is not None
    cache = PrefixCache()
    cache.insert(a, now=0.0)
    return cache.match(b).tokens


def test_chats_with_one_system_message_share_it() -> None:
    a = parse_chat({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "a?"}]})
    b = parse_chat({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "b?"}]})
    assert shared_tokens(a.prompt_key, b.prompt_key) > len(SYSTEM) // 4


def test_completions_and_generate_keys_for_text_and_token_ids() -> None:
    text = parse_completion({"prompt": SYSTEM + "one"})
    again = parse_generate({"text": SYSTEM + "two"})
    assert shared_tokens(text.prompt_key, again.prompt_key) == 1 + len(SYSTEM) // 4  # marker included
    ids = parse_completion({"prompt": [7, 8, 9, 10]})
    gen_ids = parse_generate({"input_ids": [7, 8, 9, 11]})
    assert shared_tokens(ids.prompt_key, gen_ids.prompt_key) == 4


def test_non_integer_input_ids_still_count_but_never_share() -> None:
    spec = parse_generate({"input_ids": [1.5, 2.5]})
    assert spec.prompt_tokens == 2 and spec.prompt_key is None
