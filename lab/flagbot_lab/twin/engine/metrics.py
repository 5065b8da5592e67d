"""`/metrics` in Prometheus text format, as SGLang 0.5.10 exposes it with `--enable-metrics`.

Names, HELP texts, label sets and number formatting follow what 0.5.10's collectors print
through prometheus_client in multiprocess mode (reference Appendix B): scheduler gauges carry
`engine_type, model_name, moe_ep_rank, pp_rank, tp_rank` (plus `pid` for the two gauges without
a multiprocess mode), tokenizer counters and histograms carry `model_name`, labels are sorted,
histograms print `_sum`, the buckets, then `_count`, and there are no `_created` samples.
Values use prometheus_client's Go-style float formatting (`1.234567e+06`).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["Histogram", "MetricsState", "go_float", "render"]

TTFT_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS: tuple[float, ...] = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
)
ITL_BUCKETS += (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8)
E2E_BUCKETS: tuple[float, ...] = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
    600,
    1200,
)
E2E_BUCKETS += (1800, 2400)


def go_float(value: float) -> str:
    """prometheus_client's floatToGoString: Python repr, switching to an exponent sooner."""
    d = float(value)
    if d == float("inf"):
        return "+Inf"
    if d == float("-inf"):
        return "-Inf"
    if d != d:
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        if times <= 0:
            return
        self.counts[bisect_left(self.buckets, value)] += times
        self.total += value * times
        self.count += times


@dataclass
class MetricsState:
    """What the gauges read at scrape time; the runtime keeps it current."""

    model_name: str
    max_total_num_tokens: int = 0
    num_running_reqs: int = 0
    num_queue_reqs: int = 0
    num_used_tokens: int = 0
    gen_throughput: float = 0.0
    is_cuda_graph: bool = True
    spec_accept_length: float | None = None
    engine_startup_time: float = 0.0
    engine_load_weights_time: float = 0.0
    prompt_tokens_total: int = 0
    generation_tokens_total: int = 0
    num_requests_total: int = 0
    num_aborted_requests_total: int = 0
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))
    return "{" + inner + "}"


def _metric(
    out: list[str], name: str, kind: str, help_text: str, samples: list[tuple[str, str, float]]
) -> None:
    out.append(f"# HELP {name} {help_text}")
    out.append(f"# TYPE {name} {kind}")
    out.extend(f"{sample}{labels} {go_float(value)}" for sample, labels, value in samples)


def _histogram(out: list[str], name: str, help_text: str, hist: Histogram, base: dict[str, str]) -> None:
    samples: list[tuple[str, str, float]] = [(f"{name}_sum", _labels(base), hist.total)]
    running = 0
    for bound, n in zip((*hist.buckets, float("inf")), hist.counts, strict=True):
        running += n
        samples.append((f"{name}_bucket", _labels({**base, "le": go_float(bound)}), float(running)))
    samples.append((f"{name}_count", _labels(base), float(hist.count)))
    _metric(out, name, "histogram", help_text, samples)


def render(state: MetricsState) -> str:
    model = {"model_name": state.model_name}
    sched = {"engine_type": "unified", "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0", **model}
    sched_pid = {**sched, "pid": str(os.getpid())}
    usage = state.num_used_tokens / state.max_total_num_tokens if state.max_total_num_tokens else 0.0
    out: list[str] = []
    gauges: list[tuple[str, str, float, dict[str, str]]] = [
        ("num_running_reqs", "The number of running requests.", state.num_running_reqs, sched),
        ("num_used_tokens", "The number of used tokens.", state.num_used_tokens, sched),
        ("token_usage", "The token usage.", round(usage, 2), sched),
        ("gen_throughput", "The generation throughput (token/s).", state.gen_throughput, sched),
        ("num_queue_reqs", "The number of requests in the waiting queue.", state.num_queue_reqs, sched),
        ("num_grammar_queue_reqs", "The number of requests in the grammar waiting queue.", 0, sched),
        ("cache_hit_rate", "The prefix cache hit rate.", 0.0, sched),
        (
            "max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            state.max_total_num_tokens,
            sched,
        ),
        ("num_retracted_reqs", "The number of retracted requests.", 0, sched_pid),
        ("num_paused_reqs", "The number of paused requests by async weight sync.", 0, sched_pid),
        (
            "is_cuda_graph",
            "Whether the batch is using CUDA graph.",
            1.0 if state.is_cuda_graph else 0.0,
            sched,
        ),
        (
            "engine_startup_time",
            "The time taken for the engine to start up.",
            state.engine_startup_time,
            sched,
        ),
        (
            "engine_load_weights_time",
            "The time taken for the engine to load weights.",
            state.engine_load_weights_time,
            sched,
        ),
    ]
    if state.spec_accept_length is not None:
        gauges.append(("spec_accept_length", "The average acceptance length of speculative decoding.",
                       state.spec_accept_length, sched))  # fmt: skip
    for name, help_text, value, labels in gauges:
        _metric(
            out, f"sglang:{name}", "gauge", help_text, [(f"sglang:{name}", _labels(labels), float(value))]
        )
    counters = [
        ("prompt_tokens_total", "Number of prefill tokens processed.", state.prompt_tokens_total),
        ("generation_tokens_total", "Number of generation tokens processed.", state.generation_tokens_total),
        ("num_requests_total", "Number of requests processed.", state.num_requests_total),
        ("num_aborted_requests_total", "Number of requests aborted.", state.num_aborted_requests_total),
    ]
    for name, help_text, value in counters:
        metric = f"sglang:{name}"
        _metric(out, metric, "counter", help_text, [(metric, _labels(model), float(value))])
    _histogram(out, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
               state.ttft, model)  # fmt: skip
    _histogram(out, "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
               state.itl, model)  # fmt: skip
    _histogram(out, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
               state.e2e, model)  # fmt: skip
    return "\n".join(out) + "\n"
