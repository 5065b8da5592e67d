"""Was the client the limit? The rule that marks a run *client-bound*, and the figures behind it.

A load generator that runs out of CPU does not fail: it reads every token late, so TTFT and ITL
grow and throughput falls, and the numbers look like a slow server. Each worker therefore
measures, over the measured phase only:

* `busy`: the share of wall time its event loop was not waiting for the network (running
  callbacks, or runnable but descheduled by the OS). Data that arrives while the loop is busy
  waits, and its timestamp is late by that wait;
* `cpu_util`: its own CPU time (user + system) / wall time; one asyncio loop cannot use more
  than one core;
* loop lag: how late a 5 ms timer fires (`p50`, `p90`, `p99`, `max`), the error bound of a
  timestamp taken at that moment. On an idle loop it is up to a millisecond (epoll's timeout
  granularity), so small values mean nothing;
* dispatch delay (open loop): how late requests were sent against their Poisson schedule
  (including any wait for a concurrency cap, which bench_serving's semaphore hides);
* `us_per_event`: CPU per streamed SSE event, to compare with the capacity benchmark.

The rule (docs/bench.md): a level is **client-bound** when any of

1. `busy >= 0.85` or `cpu_util >= 0.85`: the loop is nearly always occupied, reads queue up;
2. loop-lag p90 above `max(5 ms, 25 % of the measured median ITL)`: one timestamp in ten is off
   by a quarter of the quantity being measured (the load generator passes the per-chunk median:
   the gap between the events the loop reads, longer than the per-token one under speculation);
3. open loop without a cap: dispatch-delay p90 above `max(10 ms, 25 % of the mean arrival gap)`:
   the arrivals are no longer the Poisson process asked for.

It **warns** (figures kept, not flagged) at `busy` or `cpu_util >= 0.70` (the peers' advice) or
loop-lag p90 above `max(2 ms, 10 % of the median ITL)`: tails (p99 ITL) may carry client delay,
means and medians do not yet. A client-bound level keeps its figures (they bound the server
from below) but is flagged in the store, the table and the JSON, and the verdicts do not read
it as the server's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ClientHealth", "WorkerStats", "judge"]

CPU_BOUND = 0.85
CPU_WARN = 0.70
LAG_FLOOR_MS = 5.0
LAG_SHARE_OF_ITL = 0.25
LAG_WARN_FLOOR_MS = 2.0
LAG_WARN_SHARE_OF_ITL = 0.10
DISPATCH_FLOOR_MS = 10.0
DISPATCH_SHARE_OF_GAP = 0.25


@dataclass(frozen=True)
class WorkerStats:
    """What one worker measured about itself."""

    cpu_s: float
    wall_s: float
    events: int
    lag_s: Sequence[float]
    idle_s: float | None = None


@dataclass
class ClientHealth:
    client_bound: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "client_bound": self.client_bound,
            "reasons": self.reasons,
            "warnings": self.warnings,
            **self.figures,
        }


def judge(
    workers: Sequence[WorkerStats],
    *,
    median_itl_ms: float | None,
    open_loop: bool,
    capped: bool,
    request_rate: float | None,
    p90_dispatch_delay_ms: float | None,
) -> ClientHealth:
    """Apply the rule above to one level's workers and metrics."""
    utils = [w.cpu_s / w.wall_s if w.wall_s > 0 else 0.0 for w in workers]
    busy = [1.0 - w.idle_s / w.wall_s for w in workers if w.idle_s is not None and w.wall_s > 0]
    lags = np.concatenate([np.asarray(w.lag_s, dtype=float) for w in workers]) * 1000.0 if workers else None
    events = sum(w.events for w in workers)
    cpu = sum(w.cpu_s for w in workers)
    figures: dict[str, Any] = {
        "workers": len(workers),
        "cpu_util": round(max(utils, default=0.0), 4),
        "busy": round(max(busy), 4) if busy else None,
        "cpu_s": round(cpu, 4),
        "wall_s": round(max((w.wall_s for w in workers), default=0.0), 4),
        "events": events,
        "us_per_event": round(cpu / events * 1e6, 2) if events else None,
    }
    if lags is not None and lags.size:
        p50, p90, p99 = np.percentile(lags, [50, 90, 99])
        figures |= {
            "loop_lag_p50_ms": round(float(p50), 3),
            "loop_lag_p90_ms": round(float(p90), 3),
            "loop_lag_p99_ms": round(float(p99), 3),
            "loop_lag_max_ms": round(float(lags.max()), 3),
        }
    health = ClientHealth(False, figures=figures)
    load = max(figures["cpu_util"], figures["busy"] or 0.0)
    what = "event loop busy" if (figures["busy"] or 0.0) > figures["cpu_util"] else "client CPU"
    if load >= CPU_BOUND:
        health.reasons.append(f"{what} {load:.0%} of the time (limit {CPU_BOUND:.0%})")
    elif load >= CPU_WARN:
        health.warnings.append(f"{what} {load:.0%} of the time (warn at {CPU_WARN:.0%})")
    itl = median_itl_ms or 0.0
    lag_limit = max(LAG_FLOOR_MS, LAG_SHARE_OF_ITL * itl)
    lag_warn = max(LAG_WARN_FLOOR_MS, LAG_WARN_SHARE_OF_ITL * itl)
    figures["loop_lag_limit_ms"] = round(lag_limit, 3)
    lag_p90 = figures.get("loop_lag_p90_ms")
    if lag_p90 is not None and lag_p90 > lag_limit:
        health.reasons.append(f"event-loop lag p90 {lag_p90:.1f} ms > {lag_limit:.1f} ms")
    elif lag_p90 is not None and lag_p90 > lag_warn:
        health.warnings.append(
            f"event-loop lag p90 {lag_p90:.1f} ms > {lag_warn:.1f} ms: tail latencies carry client delay"
        )
    if open_loop and not capped and request_rate and p90_dispatch_delay_ms is not None:
        limit = max(DISPATCH_FLOOR_MS, DISPATCH_SHARE_OF_GAP * 1000.0 / request_rate)
        figures["dispatch_delay_limit_ms"] = round(limit, 3)
        if p90_dispatch_delay_ms > limit:
            health.reasons.append(
                f"requests sent late: dispatch delay p90 {p90_dispatch_delay_ms:.1f} ms > {limit:.1f} ms"
            )
    health.client_bound = bool(health.reasons)
    return health
