"""Counting a chunk's tokens with the tokenizer file a target names (built here, never fetched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.bench import tokenizer as tokenizer_module
from bot.bench.loadgen import LoadError, LoadSpec, LoadWorkers
from bot.bench.tokenizer import TokenizerError, load_token_counter, word_level_count
from tests.support.wordlevel_tokenizer import write_wordlevel_tokenizer

WORDS = ("abc", "def", "ghi", "jkl")


def test_a_word_level_file_counts_the_words_of_a_chunk(tmp_path: Path) -> None:
    count = load_token_counter(write_wordlevel_tokenizer(tmp_path / "tokenizer.json", WORDS))
    assert count(" abc") == 1
    assert count(" abc def ghi") == 3  # a speculative step's three accepted tokens in one chunk
    assert count("abc, def!") == 4  # punctuation runs are pieces of their own (`Whitespace`)


def test_the_fallback_splits_as_the_whitespace_pre_tokenizer() -> None:
    assert word_level_count("") == 0
    assert word_level_count("  one two\nthree ") == 3
    assert word_level_count("it's") == 3


def test_without_the_tokenizers_package_another_model_type_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tokenizer_module, "_HFTokenizer", None)
    path = write_wordlevel_tokenizer(tmp_path / "bpe.json", WORDS, model_type="BPE")
    with pytest.raises(TokenizerError, match=r"a BPE model needs the `tokenizers` package"):
        load_token_counter(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it"),
        ("{not json", "not a JSON tokenizer file"),
        ('{"model": {}}', "no model type"),
        ("[1, 2]", "no model type"),
    ],
)
def test_an_unusable_file_gets_an_error_naming_it(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "tokenizer.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(TokenizerError, match=message) as caught:
        load_token_counter(path)
    assert str(path) in str(caught.value)


def test_a_directory_is_not_a_tokenizer_file(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError, match="not a regular file"):
        load_token_counter(tmp_path)


def test_a_level_with_a_bad_tokenizer_fails_before_any_load(tmp_path: Path) -> None:
    spec = LoadSpec(base_url="http://127.0.0.1:9", model="m", tokenizer=str(tmp_path / "missing.json"))
    with LoadWorkers() as workers, pytest.raises(LoadError, match=r"missing\.json: cannot read it"):
        workers.run(spec)
    assert workers.pids == []  # no worker was started
