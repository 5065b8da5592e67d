"""What a load worker needs of the datasets (`bot.bench.datasets`) to make its prompts, apart.

Why apart: `bot.bench.datasets` builds on flagbot's configuration models (`bot.config`, pydantic),
and the worker imported it, so every worker process carried those models: ~20,000 more objects
(60,849 against bec5ac4's 40,863 for the worker and its HTTP clients). A worker collects its
whole heap after every run (`bot.bench.worker.worker_main`), while the parent stores the result
and sends the next run, so a bigger heap delayed the next run's start: 16.5 ms against 8.3 ms
a collection (median of 7, loaded machine). This module imports no configuration; the shared
prefix's shape reaches the worker as a plain `GroupShape`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from bot.bench.prompts import make_prompt

__all__ = ["SALT_WORDS", "GroupShape", "PromptRow", "SharedPrefixGroups", "group_order", "system_prompt"]

SALT_WORDS = 4
"""Words of a prompt file's per-run salt prefix: a few tokens, unlikely to collide between runs."""


@dataclass(frozen=True)
class PromptRow:
    """One request of a prompt file: its text, its length as counted, the output it asks for."""

    prompt: str
    prompt_len: int
    output_len: int


class SharedPrefixGroups(Protocol):
    """What the request order and a request's output length read of a shared-prefix shape
    (`bot.config.schema.SharedPrefixShape` and `GroupShape` both have it)."""

    @property
    def num_groups(self) -> int: ...
    @property
    def prompts_per_group(self) -> int: ...
    @property
    def output_len(self) -> int: ...


@dataclass(frozen=True)
class GroupShape:
    """A `generated-shared-prefix` dataset's groups as a worker plan carries them: plain values,
    so a plan unpickles in a worker without the configuration models."""

    num_groups: int
    prompts_per_group: int
    output_len: int

    @classmethod
    def of(cls, shape: SharedPrefixGroups) -> GroupShape:
        return cls(shape.num_groups, shape.prompts_per_group, shape.output_len)


def system_prompt(seed: int, salt: int, group: int, words: int) -> str:
    """Group `group`'s shared system prompt in the set salted `salt`: the same for every worker
    and run of the set (sharing within the set), different in any other set."""
    rng = random.Random(f"gsp:{seed}:{salt}:{group}")  # noqa: S311 - benchmark data
    return make_prompt(rng, words)


def group_order(seed: int, salt: int, shape: SharedPrefixGroups) -> list[int]:
    """The group of each request of the num_groups x prompts_per_group plan, shuffled as
    bench_serving shuffles its requests (`--gsp-ordered` off); a level with more requests goes
    round it again (every question is fresh, so no prompt repeats)."""
    plan = [group for group in range(shape.num_groups) for _ in range(shape.prompts_per_group)]
    random.Random(f"gsp-order:{seed}:{salt}").shuffle(plan)  # noqa: S311 - benchmark schedule
    return plan
