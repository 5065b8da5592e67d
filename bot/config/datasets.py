"""The dataset word of a benchmark profile and of `bench dataset=…`: which prompts a benchmark
sends (`bot.bench.datasets` makes them).

Why here: the config validates a profile's `dataset` when flagbot.toml loads, and the chat
command's word must mean exactly the same, so both read it with this one parser.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DATASET_KINDS", "DatasetError", "DatasetKind", "parse_dataset"]

DatasetKind = Literal["random", "generated-shared-prefix", "sharegpt", "jsonl"]
DATASET_KINDS: tuple[DatasetKind, ...] = ("random", "generated-shared-prefix", "sharegpt", "jsonl")


class DatasetError(ValueError):
    """A dataset that cannot be used (unknown name, a prompt file outside the rule, a bad file);
    the message names the problem."""


def parse_dataset(word: str) -> tuple[DatasetKind, str | None]:
    """`random`, `generated-shared-prefix`, `sharegpt:FILE` or `jsonl:FILE` -> (kind, FILE or None)."""
    name, colon, file = word.strip().partition(":")
    if name not in DATASET_KINDS:
        raise DatasetError(
            f"unknown dataset {word!r}: random, generated-shared-prefix, sharegpt:FILE or jsonl:FILE"
        )
    kind: DatasetKind = name  # narrowed by the membership test above
    if kind in ("sharegpt", "jsonl"):
        if not colon or not file.strip():
            raise DatasetError(f"dataset {kind} needs a file: {kind}:FILE (under bench_prompt_dir)")
        return kind, file.strip()
    if colon:
        raise DatasetError(f"dataset {kind} takes no file")
    return kind, None
