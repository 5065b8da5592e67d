"""Ground truth: what the twin meant to do, appended as JSON lines for tests and benchmarks.

flagbot must never see this (it would make every check self-fulfilling), so it goes to a file on
the node (`/var/lib/sglang-twin/truth.jsonl`, dir overridable by `SGLANG_TWIN_TRUTH_DIR`) and
never to an HTTP endpoint. Records:

* `{"kind": "start", ...}` once per process start: argv, pid, node rank, start seed, memory
  figures, effective values, implied flags, throughput factor and the per-start noise draw.
* `{"kind": "request", ...}` once per finished, failed or aborted request: tokens, queue wait,
  scheduled and actual TTFT, first/last token times, mean gaps and lateness. All times are
  seconds from the request's arrival; `cached_tokens` is what the prefix cache served and
  `retractions` how often the request was retracted for KV space. With `SGLANG_TWIN_TRUTH_TRACE=1` each record also carries
  every token's scheduled time and lateness in microseconds (`trace`), which the capacity
  benchmark uses for its pacing-error percentiles.
* `{"kind": "exit", ...}` when the process ends on its own terms.

Writes are buffered and flushed by a one-second timer and at exit; each flush is one `write`
on an O_APPEND descriptor, so two twins sharing the file (two nodes in one test) never
interleave within a line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import time
from typing import Any

from .sched import Job

__all__ = ["TRUTH_FILE", "TruthWriter", "jsonable", "request_record", "truth_path"]

TRUTH_FILE = "truth.jsonl"
DEFAULT_DIR = "/var/lib/sglang-twin"
FLUSH_INTERVAL = 1.0


def truth_path() -> str:
    return os.path.join(os.environ.get("SGLANG_TWIN_TRUTH_DIR") or DEFAULT_DIR, TRUTH_FILE)


def trace_enabled() -> bool:
    return os.environ.get("SGLANG_TWIN_TRUTH_TRACE", "") not in ("", "0", "false")


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples, sets and other odd values as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class TruthWriter:
    """Buffered appender; failing to write truth never takes the twin down."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or truth_path()
        self._buf: list[str] = []
        self._fd: int | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.broken = False

    def write(self, record: dict[str, Any]) -> None:
        self._buf.append(json.dumps(record, separators=(",", ":"), allow_nan=False))

    def flush(self) -> None:
        if not self._buf or self.broken:
            self._buf.clear()
            return
        data = ("\n".join(self._buf) + "\n").encode()
        self._buf.clear()
        try:
            if self._fd is None:
                os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(self._fd, data)
        except OSError:
            self.broken = True

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Flush once a second from now on."""

        def tick() -> None:
            self.flush()
            self._timer = loop.call_later(FLUSH_INTERVAL, tick)

        self._timer = loop.call_later(FLUSH_INTERVAL, tick)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _r(value: float) -> float:
    return round(value, 6)


def request_record(
    job: Job,
    *,
    endpoint: str,
    stream: bool,
    outcome: str,
    wall_offset: float,
    node_rank: int = 0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One request's truth. `wall_offset` turns the loop clock into Unix time."""
    arrival = job.arrival
    n = job.emitted
    admitted = job.admitted if job.admitted is not None else arrival
    record: dict[str, Any] = {
        "kind": "request",
        "pid": os.getpid(),
        "node_rank": node_rank,
        "id": job.rid,
        "endpoint": endpoint,
        "stream": stream,
        "arrival_unix": round(arrival + wall_offset, 6),
        "prompt_tokens": job.prompt_tokens,
        "target_tokens": job.target_tokens,
        "completion_tokens": n,
        "outcome": outcome,
        "failed": outcome == "failed",
        "queue_wait_s": _r(admitted - arrival),
        "cached_tokens": job.cached_tokens,
        "retractions": job.retractions,
        "noise": _r(job.noise),
    }
    if n > 0 or outcome == "failed":
        record["ttft_sched_s"] = _r(job.sched_first - arrival)
        record["ttft_actual_s"] = _r(job.act_first - arrival)
        record["last_sched_s"] = _r(job.sched_last - arrival)
        record["last_actual_s"] = _r(job.act_last - arrival)
        events = n + (1 if outcome == "failed" else 0)
        record["late_mean_s"] = _r(job.late_sum / max(1, events))
        record["late_max_s"] = _r(job.late_max)
    if n > 1:
        record["gap_sched_mean_s"] = _r((job.sched_last - job.sched_first) / (n - 1))
        record["gap_actual_mean_s"] = _r((job.act_last - job.act_first) / (n - 1))
    if job.trace is not None:
        dues, acts = job.trace
        record["trace"] = {
            "sched_us": [round((due - arrival) * 1e6) for due in dues],
            "late_us": [round((act - due) * 1e6) for due, act in zip(dues, acts, strict=True)],
        }
    if extra:
        record.update(extra)
    return record


def now_unix() -> float:
    return round(time.time(), 6)
