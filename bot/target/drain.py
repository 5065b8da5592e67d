"""Wait until a server has no running requests before it is restarted (optional, bounded).

Why: a restart kills in-flight requests; on a shared server an operator may prefer to wait for
a quiet moment. Two signals, best first: node 0's Prometheus `/metrics`
(`sglang:num_running_reqs`, only with `--enable-metrics`), else the scheduler's batch lines in
the journal (`#running-req: N`; no batch line for a few seconds means idle). Polled with a
growing interval up to the limit; never a fixed sleep. A server that is down has nothing to
drain.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import httpx

from bot.http import async_client

if TYPE_CHECKING:
    from bot.target.session import TargetSession

_METRIC = re.compile(r"^sglang:num_running_reqs(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.MULTILINE)
_RUNNING = re.compile(r"#running-req: (\d+)")
Source = Literal["metrics", "journal", "down"]


@dataclass(frozen=True)
class DrainSettings:
    """`limit_s`: longest wait; `quiet_s`: journal window without batch lines that counts as idle."""

    limit_s: float = 120.0
    quiet_s: float = 5.0
    first_poll_s: float = 0.2
    max_poll_s: float = 2.0


@dataclass(frozen=True)
class DrainReport:
    drained: bool
    waited_s: float
    source: Source
    last_running: int | None


def running_from_metrics(text: str) -> int | None:
    """Sum of `sglang:num_running_reqs` over its series (one per DP rank); None when absent."""
    values = [float(match) for match in _METRIC.findall(text)]
    return int(sum(values)) if values else None


def running_from_journal(text: str) -> int:
    """The `#running-req` of the newest batch line; 0 when the window has none (idle)."""
    found = _RUNNING.findall(text)
    return int(found[-1]) if found else 0


async def _probe(ts: TargetSession, client: httpx.AsyncClient, settings: DrainSettings) -> tuple[Source, int]:
    try:
        response = await client.get(f"{ts.target.http_base()}/metrics")
        if response.status_code == 200:
            running = running_from_metrics(response.text)
            if running is not None:
                return "metrics", running
    except httpx.ConnectError:
        return "down", 0
    except httpx.HTTPError:
        pass
    since = f"-{max(1, round(settings.quiet_s))}s"
    result = await ts.node0.run("journal", output="cat", since=since, lines=200)
    return "journal", running_from_journal(result.text)


async def drain(ts: TargetSession, settings: DrainSettings) -> DrainReport:
    """Poll until node 0 runs no request or `settings.limit_s` passes; says which signal it used."""
    started = time.monotonic()
    deadline = started + settings.limit_s
    interval = settings.first_poll_s
    async with async_client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
        while True:
            source, running = await _probe(ts, client, settings)
            waited = round(time.monotonic() - started, 3)
            if running == 0:
                return DrainReport(True, waited, source, running)
            if time.monotonic() + interval > deadline:
                return DrainReport(False, waited, source, running)
            await asyncio.sleep(interval)  # a poll interval with backoff, bounded by the deadline
            interval = min(settings.max_poll_s, interval * 1.6)
