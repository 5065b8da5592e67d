"""Parse the `Serving Benchmark Result` block that `python -m sglang.bench_serving` prints.

The printed block is what people paste into chat and what survives in journald, so flagbot reads
the text rather than relying on `--output-file`. Every row is renamed to the key bench_serving
itself writes to its JSON output, so a pasted block and a JSONL line compare field by field.

Choices (also in docs/parsers/bench.md):
* `inf`/`nan` are kept as floats on the object, and `to_json()` writes them as the strings
  `"inf"`, `"-inf"`, `"nan"`: strict JSON has no infinity, and `float("inf")` reads the string back.
* A block without its closing `=====` rule (cut off, or followed by another header) is returned
  with `truncated=True` and whatever rows it had.
* A row whose label is not known is kept in `extra`, keyed by its label without the colon;
  so is a known row whose value does not parse, or a repeat of a row already seen.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

Scalar = int | float | str | None

_HEADER = re.compile(r"={3,}\s*Serving Benchmark Result\s*={3,}")
_CLOSING = re.compile(r"={10,}\s*")
_SECTION = re.compile(r"\s*-{3,}[^:]*-*\s*|\s*-+\s*")
_ROW = re.compile(r"(?P<indent>\s*)(?P<label>[^\s:][^:]*):(?:(?P<gap>\s+)(?P<value>.*?))?\s*")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LATENCY = re.compile(r"(mean|median|std|p\d{1,2}|max) (e2e latency|ttft|tpot|itl) \(ms\)")
_INT = re.compile(r"[-+]?\d{1,30}")  # bounded: int() refuses very long digit strings
_FLOAT = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|infinity|nan)", re.IGNORECASE)
_STORAGE = re.compile(r"storage(?: \((?P<backend>.*)\))?")

# Log prefixes seen in front of printed lines; each is stripped from the start of a line, in a
# loop, so stacked prefixes (docker timestamp, then journald, then `[time TP0]`) all come off.
_TS = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_PREFIXES = (
    re.compile(
        rf"(?:{_TS}|[A-Z][a-z]{{2}} [ \d]\d \d{{2}}:\d{{2}}:\d{{2}}(?:\.\d+)?) \S+ [^\s:\[\]]+(?:\[\d+\])?: ?"
    ),
    re.compile(rf"{_TS} - \S+ - [A-Z]+ - ?"),
    re.compile(rf"{_TS} ?"),
    re.compile(r"\[[^\]\n]*\] ?"),
    re.compile(r"[\w.-]+ +\| ?"),
)

REQUIRED_KEYS = (
    "backend",
    "max_concurrency",
    "completed",
    "output_throughput",
    "median_ttft_ms",
    "median_itl_ms",
    "request_throughput",
    "input_throughput",
    "total_throughput",
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "mean_itl_ms",
    "p99_itl_ms",
    "duration",
)
"""Keys `to_json()` always has (null when the block lacks them), so consumers need no `.get`."""

LABELS: dict[str, str] = {
    "backend": "backend",
    "traffic request rate": "request_rate",
    "max request concurrency": "max_concurrency",
    "max reqeuest concurrency": "max_concurrency",  # the spelling of older releases
    "maximum request concurrency": "max_concurrency",  # vLLM's benchmark_serving
    "successful requests": "completed",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total input text tokens": "total_input_text_tokens",
    "total input vision tokens": "total_input_vision_tokens",
    "total generated tokens": "total_output_tokens",
    "total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "request throughput (req/s)": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "peak concurrent requests": "max_concurrent_requests",
    "total token throughput (tok/s)": "total_throughput",
    "concurrency": "concurrency",
    "accept length": "accept_length",
    "total prompt tokens": "total_prompt_tokens",
    "total cached tokens": "total_cached_tokens",
    "cache hit rate": "cache_hit_rate_pct",
    "device": "device_cached_tokens",
    "host": "host_cached_tokens",
    "request goodput (req/s)": "request_goodput",  # 0.5.23 `--goodput` (benchmark/goodput.py)
}
"""Printed label (lower-cased, colon removed) -> bench_serving JSON key. Latency rows
(`Mean|Median|Std|P90|... E2E Latency|TTFT|TPOT|ITL (ms)`) are mapped by pattern instead."""

_INT_KEYS = frozenset(
    {
        "max_concurrency",
        "completed",
        "total_input_tokens",
        "total_input_text_tokens",
        "total_input_vision_tokens",
        "total_output_tokens",
        "total_output_tokens_retokenized",
        "max_concurrent_requests",
        "total_prompt_tokens",
        "total_cached_tokens",
        "device_cached_tokens",
        "host_cached_tokens",
        "storage_cached_tokens",
    }
)


@dataclass
class BenchResult:
    """One result block. `values` uses bench_serving's JSON key names, in printed order."""

    values: dict[str, Scalar] = field(default_factory=dict)
    extra: dict[str, Scalar] = field(default_factory=dict)
    truncated: bool = False
    line: int = 0
    """1-based line of the block's header in the parsed text, to point a user at it."""

    def get(self, key: str) -> Scalar:
        return self.values.get(key)

    def number(self, key: str) -> float | None:
        """A numeric field as float, or None when absent or not a number."""
        value = self.values.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    def to_json(self) -> dict[str, Any]:
        """bench_serving's own key names; non-finite floats become "inf"/"-inf"/"nan" strings."""
        out: dict[str, Any] = dict.fromkeys(REQUIRED_KEYS)
        for key, value in self.values.items():
            out[key] = _json_scalar(value)
        out["extra"] = {key: _json_scalar(value) for key, value in self.extra.items()}
        out["truncated"] = self.truncated
        return out

    def summary(self) -> str:
        """One line for chat: who ran, how hard, and the numbers people tune against."""

        def show(key: str, unit: str = "") -> str:
            value = self.values.get(key)
            if value is None:
                return "?"
            text = f"{value:.2f}" if isinstance(value, float) else str(value)
            return text + unit

        concurrency = self.values.get("max_concurrency")
        head = f"{show('backend')}, max concurrency {concurrency if concurrency is not None else 'not set'}"
        body = (
            f"{show('completed')} ok in {show('duration', ' s')}, out {show('output_throughput', ' tok/s')}, "
            f"TTFT p50 {show('median_ttft_ms', ' ms')}, ITL p50 {show('median_itl_ms', ' ms')}"
        )
        return f"{head}: {body}" + (" (truncated)" if self.truncated else "")


def _json_scalar(value: Scalar) -> Scalar:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "inf", "-inf", "nan"
    return value


def _clean(raw: str) -> str:
    """What a terminal would show: colours gone, CR of CRLF gone, a `\\r`-overwritten bar gone."""
    line = _ANSI.sub("", raw).rstrip("\r")
    return line.rsplit("\r", 1)[-1]


def _strip_prefixes(line: str) -> str:
    for _ in range(8):
        for pattern in _PREFIXES:
            match = pattern.match(line)
            if match and match.end() > 0:
                line = line[match.end() :]
                break
        else:
            return line
    return line


def _candidates(line: str, column: int) -> Iterator[str]:
    """The line with known prefixes removed, then the line cut at the header's column.

    The second catches prefixes no pattern knows, as long as they are as wide as the header's.
    """
    yield _strip_prefixes(line)
    if 0 < column < len(line):
        yield line[column:]


def _number(key: str, text: str) -> int | float | str | None:
    """The typed value for `key`, or None when `text` is not what that row prints."""
    if key == "backend":
        return text or None
    if key == "request_rate" and not _FLOAT.fullmatch(text):
        return text or None  # "trace" when replaying timestamps
    if key == "max_concurrency" and text == "not set":
        return None
    if key == "cache_hit_rate_pct":
        text = text.removesuffix("%")
    if key in _INT_KEYS:
        if _INT.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text) and math.isfinite(float(text)) and float(text).is_integer():
            return int(float(text))
        return None
    if _FLOAT.fullmatch(text):
        return float(text)
    return None


@dataclass
class _Block:
    line: int
    column: int
    result: BenchResult = field(init=False)
    after_hit_rate: bool = False

    def __post_init__(self) -> None:
        self.result = BenchResult(line=self.line)

    def closes(self, line: str) -> bool:
        return any(_CLOSING.fullmatch(text) for text in _candidates(line, self.column))

    def feed(self, line: str) -> None:
        for text in _candidates(line, self.column):
            if not text.strip() or _SECTION.fullmatch(text):
                return
            match = _ROW.fullmatch(text)
            if match and self._take(match):
                return

    def _take(self, match: re.Match[str]) -> bool:
        label = " ".join(match["label"].split())
        value = match["value"] or ""
        key = self._key(label.lower())
        if key is None:
            return self._take_unknown(match, label, value)
        if key == "cache_hit_rate_pct":
            self.after_hit_rate = True
        parsed = _number(key, value)
        values = self.result.values
        if key in values or (parsed is None and value not in ("", "not set")):
            self.result.extra[label] = value
        else:
            values[key] = parsed
            storage = _STORAGE.fullmatch(label.lower())
            if key == "storage_cached_tokens" and storage and storage["backend"]:
                values["storage_backend"] = label[label.index("(") + 1 : label.rindex(")")]
        return True

    def _key(self, label: str) -> str | None:
        latency = _LATENCY.fullmatch(label)
        if latency:
            return f"{latency[1]}_{latency[2].replace(' latency', '_latency')}_ms"
        if label in ("device", "host") or _STORAGE.fullmatch(label):
            if self.after_hit_rate:
                return None  # the per-tier percentages after the hit rate: kept in `extra`
            return "storage_cached_tokens" if label.startswith("storage") else LABELS[label]
        return LABELS.get(label)

    def _take_unknown(self, match: re.Match[str], label: str, value: str) -> bool:
        """Keep an unknown row only if it has bench_serving's `{:<40} {:<10}` layout.

        The layout test keeps stray `Something: text` log lines out of `extra`.
        """
        if not value:
            return False
        width = len(match["indent"]) + len(match["label"]) + 1
        gap = match["gap"] or ""
        if width + len(gap) != 41 and not (width >= 40 and gap == " "):
            return False
        tier = label.lower() in ("device", "host") or _STORAGE.fullmatch(label.lower())
        name = f"Cache hit rate: {label}" if self.after_hit_rate and tier else label
        self.result.extra[name] = _auto(value)
        return True


def _auto(text: str) -> int | float | str:
    """An unknown row's value: int or float when it reads as one (a trailing % dropped), else text."""
    bare = text.removesuffix("%")
    if _INT.fullmatch(bare):
        return int(bare)
    if _FLOAT.fullmatch(bare):
        return float(bare)
    return text


def parse_bench_text(text: str) -> list[BenchResult]:
    """Every `Serving Benchmark Result` block in `text`, in order. Never raises on odd input."""
    results: list[BenchResult] = []
    block: _Block | None = None
    for number, raw in enumerate(text.split("\n"), start=1):
        line = _clean(raw)
        header = _HEADER.search(line)
        if header:
            if block is not None:
                block.result.truncated = True
                results.append(block.result)
            block = _Block(line=number, column=header.start())
        elif block is not None:
            if block.closes(line):
                results.append(block.result)
                block = None
            else:
                block.feed(line)
    if block is not None:
        block.result.truncated = True
        results.append(block.result)
    return results
