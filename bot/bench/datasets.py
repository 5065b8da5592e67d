"""What a benchmark sends: bench_serving's `random`, `generated-shared-prefix` and a user's prompt
file (ShareGPT JSON, or JSONL of `{prompt, output_len}`), with bench_serving's parameters and
sampling rules (SGLang 0.5.10 `sglang/benchmark/datasets/`).

Why more than `random`: the flags SGLang users tune most (`--disable-radix-cache`,
`--chunked-prefill-size`, `--schedule-policy`) act on shared prefixes and on mixed lengths; a
workload of unrelated fixed-length prompts cannot show their effect.

Salting (the rule `prompt_salt` follows for `random`): no prompt a measurement set sends is one
an earlier set sent to the same running server, so a prefix cache never answers a measured
prompt from another set's work. A shared system prompt is salted *once per group and set*
(`system_prompt`), so requests of one group still share it within the set, as bench_serving's do;
each question is drawn fresh from the worker's salted stream. A prompt file's prompts are sent
behind a short salt prefix drawn per run (`run_prefix`): the requests of one run still share
whatever prefixes the file's prompts share, and no run repeats a prompt another run sent.

Lengths: generated text is made of `prompts.WORDS`, one token per word as the random dataset
assumes, unless the target names a tokenizer file; then the words per token are counted with it
(`words_for`). A prompt file's lengths are counted with the tokenizer file, else approximated at
4 characters per token; `lengths` says which, and the evidence shows it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bot.bench.prompt_groups import SALT_WORDS, PromptRow, group_order, system_prompt
from bot.bench.prompts import make_prompt
from bot.bench.tokenizer import TokenCounter
from bot.config.datasets import DatasetError, DatasetKind, parse_dataset
from bot.config.schema import BenchProfile, SharedPrefixShape

__all__ = [
    "DatasetError",
    "DatasetKind",
    "DatasetSpec",
    "PromptRow",
    "dataset_spec",
    "group_order",
    "parse_dataset",
    "prompt_file_path",
    "read_prompt_file",
    "run_prefix",
    "sample_rows",
    "system_prompt",
    "words_for",
]

MAX_PROMPT_FILE_BYTES = 256 * 1024 * 1024
"""ShareGPT_V3 (the largest file people pass to bench_serving) is ~650 MB unfiltered; a file for a
benchmark of a few thousand requests needs far less, and the whole file is read into memory."""
CHARS_PER_TOKEN = 4
"""The approximation without a tokenizer file (the twin counts prompt tokens the same way)."""


@dataclass(frozen=True)
class DatasetSpec:
    """Which dataset a level sends, as resolved for the bot host (a prompt file's full path)."""

    kind: DatasetKind = "random"
    shared_prefix: SharedPrefixShape = field(default_factory=SharedPrefixShape)
    """`generated-shared-prefix`: the profile's `[bench.NAME.gsp]` (bench_serving's `--gsp-*`)."""
    prompt_file: Path | None = None
    """`sharegpt`/`jsonl`: the file, already allowed by `prompt_file_path`."""
    fixed_output_len: int | None = None
    """bench_serving's `--sharegpt-output-len`: every file prompt's output length (None: the file's)."""
    context_len: int | None = None
    """bench_serving's `--sharegpt-context-len`: prompts with prompt + output above it are skipped."""

    def describe(self) -> str:
        """The dataset in words, for the evidence: `generated-shared-prefix (64 x 16, ...)`."""
        if self.kind == "generated-shared-prefix":
            s = self.shared_prefix
            return (
                f"generated-shared-prefix ({s.num_groups} groups x {s.prompts_per_group} prompts, "
                f"system prompt {s.system_prompt_len}, question {s.question_len}, output {s.output_len})"
            )
        if self.kind in ("sharegpt", "jsonl"):
            return f"{self.kind}:{self.prompt_file.name if self.prompt_file else '?'}"
        return "random"


def prompt_file_path(directory: Path | None, name: str) -> Path:
    """The prompt file `name` names, allowed only as a relative path inside `directory` (the
    configured `bench_prompt_dir`), after symlinks, as a regular file of at most
    MAX_PROMPT_FILE_BYTES. Why a rule: the name is operator input from chat, and the bot host
    holds files no benchmark should read (keys, the database's password file)."""
    if directory is None:
        raise DatasetError("prompt files are off: set bench_prompt_dir in flagbot.toml to a directory")
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or not name.strip():
        raise DatasetError(f"prompt file {name!r}: give a path relative to bench_prompt_dir, without '..'")
    root = directory.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise DatasetError(f"prompt file {name!r}: leads outside bench_prompt_dir")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DatasetError(f"prompt file {name!r}: cannot read it ({exc.strerror or exc})") from None
    if not path.is_file():
        raise DatasetError(f"prompt file {name!r}: not a regular file")
    if size > MAX_PROMPT_FILE_BYTES:
        raise DatasetError(f"prompt file {name!r}: {size} bytes, more than {MAX_PROMPT_FILE_BYTES}")
    return path


def read_prompt_file(path: Path, kind: Literal["sharegpt", "jsonl"]) -> list[tuple[str, str | int]]:
    """The file's candidate requests: (prompt, completion text) for ShareGPT, (prompt,
    output_len) for JSONL. ShareGPT keeps conversations of at least 2 turns and their first two
    turns, as bench_serving's `sample_sharegpt_requests` does (`conversations` or
    `conversation`); a JSONL line must be an object with a string `prompt` and a positive
    integer `output_len`. DatasetError names the first thing wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"prompt file {path.name}: cannot read it ({exc})") from None
    if kind == "sharegpt":
        return _sharegpt_pairs(path.name, text)
    return _jsonl_rows(path.name, text)


def _sharegpt_pairs(name: str, text: str) -> list[tuple[str, str | int]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DatasetError(f"prompt file {name}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise DatasetError(f"prompt file {name}: a ShareGPT file is a JSON list of conversations")
    pairs: list[tuple[str, str | int]] = []
    for entry in data:
        turns = entry.get("conversations", entry.get("conversation", [])) if isinstance(entry, dict) else []
        if not isinstance(turns, list) or len(turns) < 2:
            continue  # bench_serving: conversations with fewer than 2 turns are skipped
        first, second = turns[0], turns[1]
        if not (isinstance(first, dict) and isinstance(second, dict)):
            continue
        prompt, completion = first.get("value"), second.get("value")
        if isinstance(prompt, str) and isinstance(completion, str):
            pairs.append((prompt, completion))
    if not pairs:
        raise DatasetError(f"prompt file {name}: no conversation with 2 turns of text")
    return pairs


def _jsonl_rows(name: str, text: str) -> list[tuple[str, str | int]]:
    rows: list[tuple[str, str | int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise DatasetError(f"prompt file {name} line {number}: not JSON") from None
        prompt = obj.get("prompt") if isinstance(obj, dict) else None
        output_len = obj.get("output_len") if isinstance(obj, dict) else None
        if not isinstance(prompt, str) or not prompt:
            raise DatasetError(f"prompt file {name} line {number}: no string `prompt`")
        if isinstance(output_len, bool) or not isinstance(output_len, int) or output_len < 1:
            raise DatasetError(f"prompt file {name} line {number}: `output_len` must be a positive integer")
        rows.append((prompt, output_len))
    if not rows:
        raise DatasetError(f"prompt file {name}: no request in it")
    return rows


def approximate_tokens(text: str) -> int:
    """Tokens of `text` without a tokenizer: 4 characters a token, at least 1."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def sample_rows(
    candidates: Sequence[tuple[str, str | int]],
    count: int | None,
    *,
    seed: int,
    count_tokens: TokenCounter | None,
    fixed_output_len: int | None = None,
    context_len: int | None = None,
) -> list[PromptRow]:
    """bench_serving's sampling (`sample_sharegpt_requests`): shuffle (seeded), then take rows in
    order until `count` (None: all), skipping a prompt or output under 2 tokens and, with
    `context_len`, one whose prompt + output exceeds it. A ShareGPT output length is the
    completion's token count unless `fixed_output_len` (which must be at least 4, as there)."""
    if fixed_output_len is not None and fixed_output_len < 4:
        raise DatasetError(
            "the fixed output length of a prompt file must be at least 4 (bench_serving's rule)"
        )
    count_text = count_tokens or approximate_tokens
    order = list(candidates)
    random.Random(seed).shuffle(order)  # noqa: S311 - benchmark sampling
    rows: list[PromptRow] = []
    for prompt, completion in order:
        if count is not None and len(rows) == count:
            break
        prompt_len = count_text(prompt)
        if fixed_output_len is not None:
            output_len = fixed_output_len
        else:
            output_len = completion if isinstance(completion, int) else count_text(completion)
        if prompt_len < 2 or output_len < 2:
            continue
        if context_len and prompt_len + output_len > context_len:
            continue
        rows.append(PromptRow(prompt, prompt_len, output_len))
    if not rows:
        raise DatasetError("no request of the prompt file passes the length rules (2 tokens, context_len)")
    return rows


def words_for(tokens: int, count_tokens: TokenCounter | None, rng_seed: int = 0) -> int:
    """Words of `prompts.WORDS` that make about `tokens` tokens: one a token without a tokenizer
    file; with one, scaled by what it counts for a sample of the same words."""
    if count_tokens is None:
        return max(1, tokens)
    sample_words = 512
    counted = count_tokens(make_prompt(random.Random(rng_seed), sample_words))  # noqa: S311
    return max(1, round(tokens * sample_words / max(1, counted)))


def run_prefix(salt: int, run: int) -> str:
    """The salt words in front of every file prompt of one run of a set."""
    return make_prompt(random.Random(f"file:{salt}:{run}"), SALT_WORDS)  # noqa: S311 - benchmark data


def dataset_spec(
    profile: BenchProfile, word: str | None = None, prompt_dir: Path | None = None
) -> DatasetSpec:
    """The dataset a plan sends: `word` (a command's `dataset=`) else the profile's, with a
    prompt file resolved under `prompt_dir` by `prompt_file_path`'s rule (DatasetError). Only
    the path and size are checked here (cheap enough for Slack's acknowledgement); the file's
    format is checked when the run starts, before it stores anything (`run.run_plan`)."""
    kind, name = parse_dataset(word if word is not None else profile.dataset)
    path = prompt_file_path(prompt_dir, name) if name is not None else None
    return DatasetSpec(
        kind=kind,
        shared_prefix=profile.gsp,
        prompt_file=path,
        fixed_output_len=profile.sharegpt_output_len,
        context_len=profile.sharegpt_context_len,
    )
