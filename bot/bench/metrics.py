"""bench_serving's metrics, computed from per-request timelines, under bench_serving's own names.

Definitions (SGLang `bench_serving.calculate_metrics`, python/sglang/bench_serving.py; docs/bench.md):

* per request, `send` is the client's clock just before the request is written, `chunks` the
  arrival times of the chunks carrying non-empty text, `end` the arrival of the stream's last
  line (`[DONE]` included);
* TTFT = `chunks[0] - send`; E2E = `end - send`; N = `usage.completion_tokens` (the per-chunk
  token counts summed only when the server sent no usage, and then `output_tokens_source` says
  so); TPOT = (E2E - TTFT) / (N - 1) over requests with N > 1;
* ITL is per token: the gap before a chunk of n tokens counts n times as gap / n, pooled over
  all requests. That is bench_serving's `sglang` backend always (`num_new_tokens` from
  `meta_info.completion_tokens`) and its `sglang-oai` backends when the server reports an
  accept length (retokenized chunk text); with one token per chunk it is the chunk gap, as
  every backend has it. `chunk_itl` keeps the per-chunk gaps (what a client's event loop sees);
* peaks are per one-second bucket from the level's start, as bench_serving's: output tokens
  whose chunk arrived in the bucket (bench_serving's OpenAI backends count chunks there, and
  under-count multi-token chunks), and requests in flight at any time in the bucket;
* `duration` runs from the first send to the last response end; throughputs are sums over
  completed requests divided by it; `concurrency` = sum(E2E) / duration;
* `request_rate` is the string `"inf"` for a closed loop (strict JSON has no infinity; the
  foundation's bench parser writes it the same way);
* statistics: mean, median, std (population, as numpy's default), p90, p95, p99 (numpy's
  linear interpolation) and, for ITL, max; in milliseconds, keys `<stat>_<metric>_ms`.

Goodput is vLLM's `bench serve --goodput` (vllm/benchmarks/serve.py `calculate_metrics`): the
completed requests whose TTFT, TPOT and E2E each meet its service-level objective (`<=`; a
request of one output token has TPOT 0 there), divided by `duration`; `good_requests` is their
count. Only the objectives given count; with none, both are null.

Failed requests count in `failed` (errors grouped by kind and message) and in nothing else.
flagbot's additions next to bench_serving's keys: `failed`, `errors`, `output_tokens_source`,
`total_output_chunks`, `chunk_tokens_source`, the `chunk_itl` statistics and the dispatch delay
(scheduled versus actual send, open loop). `accept_length` (the server's, from `/server_info`)
is added by the load generator after the level (`bot.bench.loadgen`).
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "STATS",
    "RequestRecord",
    "ServiceLevels",
    "good_requests",
    "group_error",
    "peak_concurrency_per_s",
    "summarize",
]

STATS = ("mean", "median", "std", "p90", "p95", "p99")
LATENCIES = ("e2e_latency", "ttft", "tpot", "itl")


@dataclass(slots=True)
class RequestRecord:
    """One request's timeline on the client's monotonic clock (seconds)."""

    scheduled: float
    send: float
    end: float = 0.0
    ok: bool = False
    chunks: array[float] = field(default_factory=lambda: array("d"))
    chunk_tokens: array[int] = field(default_factory=lambda: array("l"))
    """Tokens each content chunk carried, parallel to `chunks` (`bot.bench.worker` counts them:
    the stream's running usage, else the target's tokenizer, else 1). Empty: one token a chunk."""
    chunk_tokens_source: str = "one per chunk"
    """How `chunk_tokens` were counted: `usage`, `tokenizer` or `one per chunk`."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    """From the server's `usage`; None when the stream carried none."""
    error: str | None = None

    @property
    def output_tokens(self) -> int:
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens) if self.chunk_tokens else len(self.chunks)

    def tokens_per_chunk(self) -> np.ndarray[Any, Any]:
        """Tokens of each content chunk (1 each when nothing counted them)."""
        if len(self.chunk_tokens) == len(self.chunks):
            return np.maximum(np.asarray(self.chunk_tokens, dtype=np.int64), 1)
        return np.ones(len(self.chunks), dtype=np.int64)

    def token_itl(self) -> np.ndarray[Any, Any]:
        """Per-token ITL: the gap before a chunk of n tokens, as n gaps of gap / n (bench_serving's
        `sglang` backend, and its `sglang-oai` ones when the server reports an accept length)."""
        gaps = np.diff(np.frombuffer(self.chunks, dtype=float))
        if not len(gaps):
            return gaps
        counts = self.tokens_per_chunk()[1:]
        return np.repeat(gaps / counts, counts)

    @property
    def ttft(self) -> float:
        return self.chunks[0] - self.send

    @property
    def e2e(self) -> float:
        return self.end - self.send


@dataclass(frozen=True)
class ServiceLevels:
    """Service-level objectives in milliseconds (None: not an objective), vLLM's `--goodput`
    keys `ttft`, `tpot`, `e2el`."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms))

    @classmethod
    def parse(cls, text: str) -> ServiceLevels:
        """`ttft_ms:500,tpot_ms:50,e2e_ms:8000` (a command's `slo=`; any subset, each once)
        -> ServiceLevels; ValueError naming what is wrong."""
        values: dict[str, float] = {}
        for part in text.split(","):
            name, colon, number = part.strip().partition(":")
            if name not in ("ttft_ms", "tpot_ms", "e2e_ms") or not colon:
                raise ValueError(
                    f"slo {part.strip()!r}: write ttft_ms:N, tpot_ms:N or e2e_ms:N, comma-separated"
                )
            if name in values:
                raise ValueError(f"slo {name} given twice")
            try:
                value = float(number)
            except ValueError:
                raise ValueError(f"slo {name}: {number!r} is not a number of milliseconds") from None
            if not 0 < value < float("inf"):
                raise ValueError(f"slo {name}: must be a positive number of milliseconds")
            values[name] = value
        return cls(values.get("ttft_ms"), values.get("tpot_ms"), values.get("e2e_ms"))

    def describe(self) -> str:
        """`ttft_ms<=500, tpot_ms<=50` (what the evidence prints beside goodput)."""
        parts = [
            (n, v) for n, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms))
        ]
        return ", ".join(f"{name}<={value:g}" for name, value in parts if value is not None)


def good_requests(records: Sequence[RequestRecord], slo: ServiceLevels) -> int:
    """Completed requests meeting every objective of `slo`, as vLLM counts them for goodput."""
    good = 0
    for r in records:
        if not r.ok:
            continue
        tpot = (r.e2e - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0
        measured = ((slo.ttft_ms, r.ttft), (slo.tpot_ms, tpot), (slo.e2e_ms, r.e2e))
        if all(limit is None or value * 1000.0 <= limit for limit, value in measured):
            good += 1
    return good


_VOLATILE = re.compile(r"0x[0-9a-f]+|[0-9a-f]{16,}|\d+\.\d+|\d{4,}", re.IGNORECASE)
"""Ids, addresses, timings and long counts; short numbers (an HTTP status) stay."""


def group_error(error: str) -> str:
    """An error's group: its first line (a traceback's last), numbers and ids replaced, so alike
    errors count together."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return "unknown error"
    line = lines[-1] if lines[0].startswith("Traceback") else lines[0]
    return _VOLATILE.sub("N", line.strip())[:200]


def _stats(
    values: Sequence[float] | np.ndarray[Any, Any], name: str, *, with_max: bool = False
) -> dict[str, float | None]:
    keys = [*STATS, "max"] if with_max else list(STATS)
    if len(values) == 0:
        return {f"{stat}_{name}_ms": None for stat in keys}
    ms = np.asarray(values, dtype=float) * 1000.0
    p90, p95, p99 = np.percentile(ms, [90, 95, 99])
    out: dict[str, float | None] = {
        f"mean_{name}_ms": float(ms.mean()),
        f"median_{name}_ms": float(np.median(ms)),
        f"std_{name}_ms": float(ms.std()),
        f"p90_{name}_ms": float(p90),
        f"p95_{name}_ms": float(p95),
        f"p99_{name}_ms": float(p99),
    }
    if with_max:
        out[f"max_{name}_ms"] = float(ms.max())
    return out


def _peak_output_per_s(records: Sequence[RequestRecord], start: float) -> float:
    """Most output tokens in one one-second bucket since the start, each chunk's tokens counted
    in the bucket its chunk arrived in (bench_serving buckets the same way but counts a chunk as
    one token on its OpenAI backends, so it under-counts multi-token chunks)."""
    times = [np.frombuffer(r.chunks, dtype=float) for r in records if r.chunks]
    if not times:
        return 0.0
    bins = np.floor(np.concatenate(times) - start).astype(np.int64)
    weights = np.concatenate([r.tokens_per_chunk() for r in records if r.chunks])
    return float(np.bincount(bins - bins.min(), weights=weights).max())


def peak_concurrency_per_s(records: Sequence[RequestRecord], start: float) -> int:
    """Most requests in flight during one one-second bucket since the start: a request counts
    in every bucket from the one it was sent in to the one it ended in (bench_serving's
    `max_concurrent_requests`, over completed requests as there)."""
    spans = [(int(np.floor(r.send - start)), int(np.floor(r.end - start))) for r in records]
    if not spans:
        return 0
    first = min(lo for lo, _ in spans)
    steps = np.zeros(max(hi for _, hi in spans) - first + 2, dtype=np.int64)
    for lo, hi in spans:
        steps[lo - first] += 1
        steps[hi - first + 1] -= 1
    return int(np.cumsum(steps).max())


def summarize(
    records: Sequence[RequestRecord],
    *,
    start: float,
    end: float | None = None,
    requested_input_len: int,
    request_rate: float | None,
    max_concurrency: int | None,
    slo: ServiceLevels | None = None,
) -> dict[str, Any]:
    """The result of one benchmark level, as bench_serving would write it (plus flagbot's keys)."""
    ok = [r for r in records if r.ok]
    failed = [r for r in records if not r.ok]
    last = end if end is not None else max((r.end for r in records), default=start)
    duration = max(last - start, 1e-9)
    input_tokens = sum(r.prompt_tokens if r.prompt_tokens is not None else requested_input_len for r in ok)
    output_tokens = sum(r.output_tokens for r in ok)
    from_usage = sum(1 for r in ok if r.completion_tokens is not None)
    source = "usage" if from_usage == len(ok) else ("chunks" if from_usage == 0 else "mixed")
    e2e = [r.e2e for r in ok]
    ttft = [r.ttft for r in ok]
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itl: Sequence[float] | np.ndarray[Any, Any] = np.concatenate([r.token_itl() for r in ok]) if ok else []
    chunk_itl: Sequence[float] | np.ndarray[Any, Any] = (
        np.concatenate([np.diff(np.frombuffer(r.chunks, dtype=float)) for r in ok]) if ok else []
    )
    counted = {r.chunk_tokens_source for r in ok}
    delays = [r.send - r.scheduled for r in records]
    metrics: dict[str, Any] = {
        "request_rate": "inf" if request_rate is None else request_rate,
        "max_concurrency": max_concurrency,
        "duration": duration,
        "completed": len(ok),
        "failed": len(failed),
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "total_output_chunks": sum(len(r.chunks) for r in ok),
        "output_tokens_source": source if ok else None,
        "chunk_tokens_source": (counted.pop() if len(counted) == 1 else "mixed") if ok else None,
        "request_throughput": len(ok) / duration,
        "input_throughput": input_tokens / duration,
        "output_throughput": output_tokens / duration,
        "total_throughput": (input_tokens + output_tokens) / duration,
        **_stats(e2e, "e2e_latency"),
        **_stats(ttft, "ttft"),
        **_stats(tpot, "tpot"),
        **_stats(itl, "itl", with_max=True),
        **_stats(chunk_itl, "chunk_itl"),
        "concurrency": sum(e2e) / duration,
        "max_output_tokens_per_s": _peak_output_per_s(ok, start),
        "max_concurrent_requests": peak_concurrency_per_s(ok, start),
        "mean_dispatch_delay_ms": float(np.mean(delays)) * 1000.0 if delays else None,
        "p90_dispatch_delay_ms": float(np.percentile(delays, 90)) * 1000.0 if delays else None,
        "p99_dispatch_delay_ms": float(np.percentile(delays, 99)) * 1000.0 if delays else None,
        "errors": dict(Counter(group_error(r.error or "unknown error") for r in failed).most_common()),
        "slo": slo.describe() if slo else None,
        "good_requests": good_requests(ok, slo) if slo else None,
        "goodput": good_requests(ok, slo) / duration if slo else None,
    }
    return metrics
