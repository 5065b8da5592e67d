"""The benchmark's datasets (bot/bench/datasets.py): the dataset word, the prompt file rule,
bench_serving's ShareGPT sampling rules, and the shared-prefix dataset's structure and salting."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from bot.bench import datasets
from bot.bench.datasets import (
    DatasetError,
    approximate_tokens,
    group_order,
    parse_dataset,
    prompt_file_path,
    read_prompt_file,
    run_prefix,
    sample_rows,
    system_prompt,
    words_for,
)
from bot.bench.tokenizer import word_level_count
from bot.config.schema import SharedPrefixShape


def test_the_dataset_word() -> None:
    assert parse_dataset("random") == ("random", None)
    assert parse_dataset("generated-shared-prefix") == ("generated-shared-prefix", None)
    assert parse_dataset("sharegpt:chats/a.json") == ("sharegpt", "chats/a.json")
    assert parse_dataset("jsonl:p.jsonl") == ("jsonl", "p.jsonl")
    for bad, says in (
        ("sharegpt", "needs a file"),
        ("jsonl:", "needs a file"),
        ("random:x", "takes no file"),
        ("mooncake", "unknown dataset"),
    ):
        with pytest.raises(DatasetError, match=says):
            parse_dataset(bad)


def test_a_prompt_file_is_read_only_inside_the_configured_directory(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    (root / "sub").mkdir(parents=True)
    inside = root / "sub" / "a.jsonl"
    inside.write_text('{"prompt": "hi there", "output_len": 8}\n')
    secret = tmp_path / "secret.json"
    secret.write_text("[]")
    (root / "escape.json").symlink_to(secret)
    assert prompt_file_path(root, "sub/a.jsonl") == inside.resolve()
    for name, says in (
        ("../secret.json", "without '..'"),
        (str(secret), "relative to bench_prompt_dir"),
        ("escape.json", "outside bench_prompt_dir"),
        ("missing.json", "cannot read it"),
        ("sub", "not a regular file"),
    ):
        with pytest.raises(DatasetError, match=says):
            prompt_file_path(root, name)
    with pytest.raises(DatasetError, match="prompt files are off"):
        prompt_file_path(None, "sub/a.jsonl")


def test_a_prompt_file_over_the_size_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.jsonl").write_text("x" * 101)
    monkeypatch.setattr(datasets, "MAX_PROMPT_FILE_BYTES", 100)
    with pytest.raises(DatasetError, match="101 bytes"):
        prompt_file_path(tmp_path, "big.jsonl")


def sharegpt(tmp_path: Path, entries: list[object]) -> Path:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(entries))
    return path


def turn(text: str) -> dict[str, str]:
    return {"from": "human", "value": text}


def test_sharegpt_keeps_conversations_of_two_turns_and_their_first_two(tmp_path: Path) -> None:
    path = sharegpt(
        tmp_path,
        [
            {"conversations": [turn("only one turn here")]},
            {"conversations": [turn("first question"), turn("first answer"), turn("ignored")]},
            {"conversation": [turn("second question"), turn("second answer")]},
            {"id": "no turns"},
        ],
    )
    assert read_prompt_file(path, "sharegpt") == [
        ("first question", "first answer"),
        ("second question", "second answer"),
    ]


def test_bad_prompt_files_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not JSON"):
        read_prompt_file(_write(tmp_path, "{"), "sharegpt")
    with pytest.raises(DatasetError, match="no conversation with 2 turns"):
        read_prompt_file(sharegpt(tmp_path, [{"conversations": [turn("a")]}]), "sharegpt")
    with pytest.raises(DatasetError, match="line 2: `output_len` must be a positive integer"):
        read_prompt_file(
            _write(tmp_path, '{"prompt": "a b", "output_len": 4}\n{"prompt": "c", "output_len": 0}'), "jsonl"
        )
    with pytest.raises(DatasetError, match="line 1: no string `prompt`"):
        read_prompt_file(_write(tmp_path, '{"text": "a"}'), "jsonl")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "file.txt"
    path.write_text(text)
    return path


def test_sampling_follows_bench_serving_rules() -> None:
    candidates: list[tuple[str, str | int]] = [
        ("one", "a long enough answer"),  # prompt of 1 token: pruned
        ("two words", "x"),  # output of 1 token: pruned
        ("a fine prompt here", "and a fine answer"),
        ("another fine prompt", "another answer here"),
        ("far too long a prompt for the context", "with its answer"),
    ]
    rows = sample_rows(candidates, None, seed=1, count_tokens=word_level_count, context_len=8)
    assert sorted(row.prompt for row in rows) == ["a fine prompt here", "another fine prompt"]
    assert {(row.prompt_len, row.output_len) for row in rows} == {(4, 4), (3, 3)}
    fixed = sample_rows(candidates, 1, seed=1, count_tokens=word_level_count, fixed_output_len=16)
    assert len(fixed) == 1 and fixed[0].output_len == 16
    with pytest.raises(DatasetError, match="at least 4"):
        sample_rows(candidates, 1, seed=1, count_tokens=None, fixed_output_len=3)


def test_sampling_is_a_seeded_shuffle_and_a_jsonl_output_len_is_kept() -> None:
    candidates: list[tuple[str, str | int]] = [(f"prompt number {i}", 10 + i) for i in range(50)]
    first = sample_rows(candidates, 10, seed=4, count_tokens=None)
    assert first == sample_rows(candidates, 10, seed=4, count_tokens=None)
    assert first != sample_rows(candidates, 10, seed=5, count_tokens=None)
    assert [row.prompt for row in first] != [p for p, _ in candidates[:10]]  # shuffled
    assert all(row.output_len == 10 + int(row.prompt.rsplit(" ", 1)[1]) for row in first)
    assert all(row.prompt_len == approximate_tokens(row.prompt) for row in first)


def test_shared_prefix_groups_have_bench_serving_structure() -> None:
    shape = SharedPrefixShape(num_groups=4, prompts_per_group=3)
    order = group_order(1, 9, shape)
    assert Counter(order) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert order != sorted(order)  # shuffled, as bench_serving without --gsp-ordered
    assert order == group_order(1, 9, shape)


def test_a_shared_prefix_is_salted_once_per_group_and_set() -> None:
    same_set = system_prompt(1, 9, 0, 200)
    assert same_set == system_prompt(1, 9, 0, 200)  # every worker and run of the set shares it
    assert len(same_set.split()) == 200
    assert system_prompt(1, 9, 1, 200) != same_set  # another group
    assert system_prompt(1, 10, 0, 200) != same_set  # another set
    assert run_prefix(9, 0) != run_prefix(9, 1) != run_prefix(10, 1)


def test_words_for_a_length_use_the_tokenizer_when_there_is_one() -> None:
    assert words_for(300, None) == 300
    assert words_for(300, word_level_count) == 300  # one word, one token under a word-level model
    assert words_for(300, lambda text: 2 * word_level_count(text)) == 150


def test_the_file_rule_reads_no_file_outside_even_through_a_directory_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "p.jsonl").write_text('{"prompt": "a b", "output_len": 4}\n')
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "linked")
    with pytest.raises(DatasetError, match="outside bench_prompt_dir"):
        prompt_file_path(root, "linked/p.jsonl")
