"""How long the weekly digest takes for a week of 100, 1,000 and 10,000 experiments.

The digest reads a whole week of every target at once (bot/digest/build.py), so its cost grows
with the week's experiments; a team that runs the loop from a schedule can have thousands. Per N,
a fresh SQLite store in a temporary directory is migrated and seeded with the store's own
repositories (`create_experiment`, `save_set`, `add_hypothesis`, `add_observation`, snapshots
through `Store.add`), spread over 2026-W48 and `--targets` targets: every experiment a `try`,
`verify` or `revert` with a verdict and status; every try with its after-start snapshot and a
benchmark set (for the chart); one hypothesis per 10 experiments (resolved in turn), one
knowledge observation per 20. Then, `--repeats` times each: `build_digest`, `render_markdown`,
`render_blocks` (plus splitting into Slack messages) and `render_chart_png`. Prints the seeding
time, every raw timing and the median. Prints figures; not a test.

    .venv/bin/python bench/digest_scale.py [--sizes 100,1000,10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.digest import IsoWeek, build_digest, render_chart_png, render_markdown
from bot.slack.digest_blocks import render_blocks
from bot.slack.render import messages
from bot.store import Snapshot, Store
from bot.store.bench_repo import save_set
from bot.store.experiments import create_experiment
from bot.store.hypotheses import add_hypothesis, resolve_hypothesis
from bot.store.models import MeasurementSet
from bot.store.observations import add_observation

WEEK = IsoWeek(2026, 48)
MONDAY = datetime(2026, 11, 23, tzinfo=UTC)
FLAGS = (
    "--enable-metrics",
    "--chunked-prefill-size",
    "--enable-fused-moe-sum-all-reduce",
    "--cuda-graph-max-bs",
)
VERDICTS = ("improved", "regressed", "no-change", "undecided")


def seed(store: Store, n: int, targets: int) -> None:
    """N experiments spread evenly over the week, with what the digest reads next to them."""
    step = timedelta(days=7) / (n + 1)
    for i in range(n):
        at = MONDAY + step * (i + 1)
        target = f"sglang-{i % targets}"
        flag = FLAGS[i % len(FLAGS)]
        playbook = ("try", "try", "verify", "revert")[i % 4]
        params: dict[str, Any] = {"changes": [{"op": "add", "flag": flag, "value": None}], "expect": []}
        state: dict[str, Any] = {}
        if playbook == "try":
            capacity = 48 - (i % 3) * 11
            snap = store.add(
                Snapshot(
                    target=target,
                    captured_at=at + timedelta(seconds=30),
                    requested_flags=[{"flag": flag}],
                    effective={"max_running_requests": capacity},
                    ready=True,
                )
            )
            levels = [{"concurrency": 64, "output_throughput": 900.0 + (i % 200)}]
            save_set(
                store,
                MeasurementSet(
                    target=target,
                    created_at=at + timedelta(seconds=60),
                    snapshot_id=snap.id,
                    summary={"levels": levels},
                ),
            )
            state = {"after_snapshot_id": snap.id, "kept": i % 8 == 0, "restored": i % 8 != 0}
        row = create_experiment(store, target=target, playbook=playbook, params=params, actor="slack:U0BENCH")
        row.created_at, row.started_at, row.finished_at = at, at, at + timedelta(minutes=2)
        row.status = "rolled-back" if i % 50 == 7 else "succeeded"
        row.verdict = VERDICTS[i % len(VERDICTS)] if playbook == "try" else "pass"
        row.summary = f"max_running_requests 48 -> {48 - (i % 3) * 11}"
        row.state = state
        store.add(row)
        if i % 10 == 0:
            hyp = add_hypothesis(
                store, target=target, statement=f"{flag} moves capacity ({i})", created_by="slack:U0BENCH"
            )
            assert hyp.id is not None
            status = ("open", "confirmed", "refuted", "inconclusive")[(i // 10) % 4]
            if status != "open":
                hyp = resolve_hypothesis(store, hyp.id, status=status, because="measured")
            hyp.created_at = at
            if hyp.resolved_at is not None:
                hyp.resolved_at = at + timedelta(minutes=3)
            store.add(hyp)
        if i % 20 == 0:
            obs = add_observation(
                store,
                flag=flag,
                kind="effect",
                text=f"{flag} lowered capacity",
                target=target,
                experiment_id=row.id,
            )
            obs.observed_at = at + timedelta(minutes=2)
            store.add(obs)


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], Any]:
    times, value = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - started)
    return times, value


def fmt(times: list[float]) -> str:
    raw = " ".join(f"{t * 1000:.0f}" for t in times)
    return f"{statistics.median(times) * 1000:8.0f} ms  (raw ms: {raw})"


def one_size(n: int, args: argparse.Namespace, base: Path) -> None:
    store = Store.open(f"sqlite:///{base / f'digest-{n}.db'}")
    try:
        store.upgrade()
        started = time.perf_counter()
        seed(store, n, args.targets)
        seeded = time.perf_counter() - started
        settings = Settings(schedules={"timezone": "UTC", "digest_channel": "#flagbot-ops"})
        build_times, digest = timed(lambda: build_digest(store, settings, WEEK), args.repeats)
        md_times, text = timed(lambda: render_markdown(digest), args.repeats)
        blocks_times, rendered = timed(lambda: render_blocks(digest), args.repeats)
        split = list(messages(rendered.blocks, rendered.text))
        chart_times, png = timed(lambda: render_chart_png(digest), args.repeats)
        total = [sum(parts) for parts in zip(build_times, md_times, blocks_times, chart_times, strict=True)]
        print(
            f"\nN = {n:,} experiments (seeded in {seeded:.1f} s; digest lists {len(digest.experiments):,}, "
            f"markdown {len(text):,} chars, {len(rendered.blocks)} blocks in {len(split)} Slack message(s), "
            f"chart {len(png or b''):,} bytes)"
        )
        print(f"  build_digest     {fmt(build_times)}")
        print(f"  render_markdown  {fmt(md_times)}")
        print(f"  render_blocks    {fmt(blocks_times)}")
        print(f"  render_chart_png {fmt(chart_times)}")
        print(f"  all four         {fmt(total)}")
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="experiments in the week, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="timings per step and size")
    parser.add_argument("--targets", type=int, default=4, help="targets the experiments are spread over")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if any(n < 1 for n in sizes) or args.repeats < 1 or args.targets < 1:
        print("error: sizes, --repeats and --targets must be positive", file=sys.stderr)
        return 2
    print(
        f"machine: {os.cpu_count()} cores (shared with other work); SQLite in a temp dir; week {WEEK}, "
        f"{args.targets} targets, {args.repeats} timings each"
    )
    with tempfile.TemporaryDirectory(prefix="flagbot-bench-digest-") as base:
        for n in sizes:
            one_size(n, args, Path(base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
