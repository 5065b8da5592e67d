"""The metric names expectations may use, so a typo is refused instead of failing forever.

Names come from what flagbot measures: the log parser's effective capacity and start status,
bench_serving's own JSON keys (bench_result.LABELS and its latency rows), and any printed
server_args field as `parsed.<field>`.
"""

from __future__ import annotations

import difflib
import re

from bot.sglang.bench_result import LABELS

CAPACITY = (
    "max_running_requests",
    "max_total_num_tokens",
    "context_len",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "available_gpu_mem_gb",
)
STATUS = ("ready", "startup_error", "startup_seconds", "nrestarts")
LATENCY = tuple(
    f"{stat}_{kind}_ms"
    for kind in ("e2e_latency", "ttft", "tpot", "itl")
    for stat in ("mean", "median", "std", "p90", "p95", "p99", "max")
)
FLAGBOT_BENCH = ("goodput", "good_requests")
"""flagbot's own benchmark figures beside bench_serving's: goodput under the profile's
service-level objectives (vLLM's `bench serve --goodput`, requests/s) and the count behind it."""
BENCH = tuple(
    sorted({key for key in LABELS.values() if key != "backend"} | set(LATENCY) | set(FLAGBOT_BENCH))
)
KNOWN = frozenset(CAPACITY + STATUS + BENCH)
_PARSED = re.compile(r"^parsed\.[a-z_][a-z0-9_]*$")


def unknown_metric_message(name: str) -> str | None:
    """None for a known metric; otherwise a message with the closest names."""
    if name in KNOWN or _PARSED.match(name):
        return None
    close = difflib.get_close_matches(name, sorted(KNOWN), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see docs/commands.md#expectations"
    return f"unknown metric {name!r}{hint}"
