"""How long after the server turns ready does flagbot notice? (aim: <= 0.5 s median)

Per round on a two-node testbed running the twin (instance 212 by default, its own temporary
base dir): note each node's InvocationID, restart both ranks together (`restart_target`), run
`wait_ready` (journal follow + `/health` with backoff) and compare the moment it reported
ready with the twin's ready moment from its ground-truth file. The truth file of this twin has
no `ready` record, so the ready moment is the end of the twin's warmup request (`POST
/generate`), right after which it sets its status to up and prints the ready line; a `ready`
moment recorded by a later twin is used instead when present. Also printed: the lag to the
ready line's journal timestamp and which signal came first. Needs root and the testbed's Debian
packages. Prints figures; not a test.

    .venv/bin/python bench/readiness_lag.py [--rounds 10] [--instance 212]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.config import load_settings
from bot.target.nodestate import Backoff, node_state
from bot.target.readiness import wait_ready
from bot.target.readiness_result import Readiness
from bot.target.restart import restart_target
from bot.target.session import TargetSession
from flagbot_lab.testbed import Testbed, TestbedError, unavailable_reason

TRUTH = "var/lib/sglang-twin/truth.jsonl"


def truth_ready(bed: Testbed, pid: int) -> float | None:
    path = bed.layout.root(0) / TRUTH
    records: list[dict[str, Any]] = [
        json.loads(line) for line in path.read_text().splitlines() if line.strip()
    ]
    mine = [record for record in records if record.get("pid") == pid]
    for record in mine:
        for key in ("ready_unix", "ready_at", "ready"):
            if record.get("kind") in ("start", "ready") and isinstance(record.get(key), int | float):
                return float(record[key])
    warmups = [r for r in mine if r.get("kind") == "request" and r.get("endpoint") == "/generate"]
    if not warmups:
        return None
    first = min(warmups, key=lambda r: r["arrival_unix"])
    return float(first["arrival_unix"] + first.get("last_actual_s", 0.0))


async def one_round(bed: Testbed, ts: TargetSession) -> tuple[float, float, str, Readiness]:
    previous = {node.name: (await node_state(node)).invocation for node in ts.nodes}
    await restart_target(ts)
    result = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=300, previous=previous)
    if not result.ready or result.noticed_at is None:
        raise RuntimeError(f"not ready: {result.to_json()}")
    pid = next(entry.pid for entry in result.lines if entry.pid and not entry.systemd)
    backoff, deadline = Backoff(0.1, 1.5, 0.5), time.monotonic() + 10
    while (truth := truth_ready(bed, pid)) is None:  # the twin flushes its truth once a second
        if time.monotonic() > deadline:
            raise RuntimeError(f"no ready moment for pid {pid} in the truth file")
        await backoff.sleep()
    first = "/health" if result.health_ready_at == result.noticed_at else "ready line"
    line_lag = result.noticed_at - result.ready_line_at if result.ready_line_at else float("nan")
    return result.noticed_at - truth, line_lag, first, result


async def run(args: argparse.Namespace, base: Path) -> int:
    bed = Testbed(args.instance, base, 2, args.scenario)
    bed.up(replace=True)
    try:
        bed.wait_healthy(300)
        target = load_settings(bed.config_path, required=True).targets["twin"]
        lags: list[float] = []
        async with TargetSession.open("twin", target) as ts:
            for number in range(1, args.rounds + 1):
                lag, line_lag, first, result = await one_round(bed, ts)
                lags.append(lag)
                timings = result.timings
                print(
                    f"round {number:2d}: lag {lag * 1000:6.0f} ms (first: {first:10s}) | after the ready line's "
                    f"journal time {line_lag * 1000:6.0f} ms | loading {timings.get('loading_s', 0):5.2f} s, "
                    f"warming {timings.get('warming_s', 0):4.2f} s"
                )
        median = statistics.median(lags)
        print(
            f"readiness lag over {len(lags)} restarts: median {median * 1000:.0f} ms, "
            f"p90 {sorted(lags)[int(0.9 * (len(lags) - 1))] * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
            f"(aim: median <= 500 ms) -> {'OK' if median <= 0.5 else 'ABOVE AIM'}"
        )
        return 0 if median <= 0.5 else 1
    finally:
        bed.down()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--instance", type=int, default=212)
    parser.add_argument("--scenario", default="seed-gb10")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"error: {reason}", file=sys.stderr)
        return 2
    print(
        f"2 nodes, scenario {args.scenario} (the SGLang twin), instance {args.instance}, {args.rounds} restarts"
    )
    with tempfile.TemporaryDirectory(prefix="flagbot-bench-readiness-") as base:
        try:
            return asyncio.run(run(args, Path(base)))
        except (TestbedError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
