"""The twin's prefix cache: keys that turn equal token prefixes into equal string prefixes,
matching in whole tokens, edge splits, locks, and LRU eviction of unlocked leaves only."""

from __future__ import annotations

from flagbot_lab.twin.engine.prefix import PrefixCache, chat_key, ids_key, key_tokens, text_key
from flagbot_lab.twin.engine.tokens import count_text_tokens

SYSTEM = "You are a careful assistant. Answer in one short paragraph. " * 20


def test_keys_count_whole_tokens_and_never_more_than_the_prompt() -> None:
    prompt = SYSTEM + "What is the capital of France?"
    assert key_tokens(text_key(prompt)) - 1 <= count_text_tokens(prompt)  # less the marker unit
    assert key_tokens(ids_key([5, 6, 7])) == 4
    assert len(text_key("abc")) % 4 == 0


def test_a_shared_prefix_matches_in_whole_tokens() -> None:
    cache = PrefixCache()
    cache.insert(text_key(SYSTEM + "Question one?"), now=0.0)
    hit = cache.match(text_key(SYSTEM + "A different question?")).tokens
    assert hit - 1 == len(SYSTEM) // 4  # the marker, then every whole unit of the system prompt
    assert cache.match(text_key("Nothing in common here")).tokens == 1  # the marker alone


def test_text_and_token_id_prompts_never_share_a_prefix() -> None:
    cache = PrefixCache()
    cache.insert(ids_key([116, 104, 101]), now=0.0)  # "the" as code points
    assert cache.match(text_key("the")).tokens == 0
    assert cache.match(ids_key([116, 104, 999])).tokens == 3  # marker and two ids


def test_chat_messages_share_the_system_message() -> None:
    a = chat_key([("system", SYSTEM), ("user", "first")])
    b = chat_key([("system", SYSTEM), ("user", "second")])
    cache = PrefixCache()
    cache.insert(a, now=0.0)
    assert cache.match(b).tokens >= len(SYSTEM) // 4


def test_insert_counts_only_new_tokens_and_splits_an_edge() -> None:
    cache = PrefixCache()
    _, added = cache.insert(ids_key(range(100)), now=0.0)
    assert added == 101 and cache.total_tokens == 101
    _, added = cache.insert(ids_key([*range(60), *range(500, 540)]), now=1.0)
    assert added == 40  # 60 ids and the marker are shared
    assert cache.total_tokens == 141
    assert cache.match(ids_key(range(100))).tokens == 101


def test_locked_paths_are_never_evicted_and_lru_goes_first() -> None:
    cache = PrefixCache()
    old, _ = cache.insert(ids_key(range(1000, 1100)), now=0.0)
    new, _ = cache.insert(ids_key(range(2000, 2100)), now=5.0)
    held, _ = cache.insert(ids_key(range(3000, 3100)), now=1.0)
    cache.lock(held)
    assert cache.evictable_tokens == 200  # the shared marker is on the locked path
    freed = cache.evict(50)
    assert freed == 100  # a whole leaf, the least recently used one
    assert cache.match(ids_key(range(1000, 1100))).tokens == 1
    assert cache.match(ids_key(range(2000, 2100))).tokens == 101
    assert cache.evict(10_000) == 100  # everything unlocked, nothing locked
    assert cache.match(ids_key(range(3000, 3100))).tokens == 101
    cache.unlock(held)
    assert cache.evictable_tokens == 101
    del old, new


def test_a_split_keeps_the_lock_of_the_path_below() -> None:
    cache = PrefixCache()
    node, _ = cache.insert(ids_key(range(100)), now=0.0)
    cache.lock(node)
    cache.insert(ids_key([*range(50), 7777]), now=1.0)  # splits the locked edge at 50
    cache.evict(10_000)  # only the new one-token leaf is free to go
    assert cache.match(ids_key(range(100))).tokens == 101
    cache.unlock(node)
    assert cache.evictable_tokens == cache.total_tokens == 101


def test_reset_empties_the_cache() -> None:
    cache = PrefixCache()
    cache.insert(text_key(SYSTEM), now=0.0)
    cache.reset()
    assert cache.total_tokens == 0 and cache.match(text_key(SYSTEM)).tokens == 0
