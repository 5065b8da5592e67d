"""How long the weekly digest takes for a week of 1,000, 10,000 and 100,000 experiments.

The digest reads a whole week of every target at once (bot/digest/build.py), so its cost grows
with the week's experiments; a team that runs the loop from a schedule can have thousands. Per N,
a fresh SQLite store in a temporary directory is migrated and seeded in bulk (one multi-row
INSERT per table and batch: `seed`), spread over 2026-W48 and `--targets` targets, with rows
shaped as the loop writes them: every experiment a `try`, `verify` or `revert` with a verdict,
a status and a whole schema-2 run state (preflight report, starts, restart record, conclusion
with proposals); every try with its after-start snapshot (about 180 server_args) and a
benchmark set (for the chart); one hypothesis per 10 experiments (resolved in turn), one
knowledge observation per 20. Then, `--repeats` times each: `build_digest`, `render_markdown`,
`render_blocks` (plus splitting into Slack messages) and `render_chart_png`. Prints the seeding
time, every raw wall timing, and the medians of wall and CPU time. Prints figures; not a test.

    .venv/bin/python bench/digest_scale.py [--sizes 1000,10000,100000] [--repeats 3]
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

from sqlalchemy import insert

from bot.bench.run import KEY_METRICS
from bot.config import Settings
from bot.digest.build import build_digest
from bot.digest.chart import render_chart_png
from bot.digest.markdown import render_markdown
from bot.digest.week import IsoWeek
from bot.loop.run_state import PreflightFacts, RankedProposal, RunState, flags_from_json
from bot.slack.digest_blocks import render_blocks
from bot.slack.render import messages
from bot.store import Snapshot, Store
from bot.store.loop_models import Experiment, Hypothesis, KnowledgeObservation
from bot.store.models import MeasurementSet

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
    """N experiments spread evenly over the week, with what the digest reads next to them.

    Inserted in bulk (one multi-row INSERT per table and batch, one transaction), so seeding
    100,000 takes seconds, not the minutes a repository call per row takes. The rows are shaped
    as the loop writes them: a try's state is a full schema-2 `RunState` (preflight report,
    both starts, the restart record, the conclusion with its proposals), its starts carry
    server_args, its sets a per-level summary of every key metric."""
    step = timedelta(days=7) / (n + 1)
    template = _try_state_template()
    snapshots: list[dict[str, Any]] = []
    sets: list[dict[str, Any]] = []
    experiments: list[dict[str, Any]] = []
    hypotheses: list[dict[str, Any]] = []
    observations: list[dict[str, Any]] = []
    for i in range(n):
        ident = i + 1
        at = MONDAY + step * (i + 1)
        target = f"sglang-{i % targets}"
        flag = FLAGS[i % len(FLAGS)]
        playbook = ("try", "try", "verify", "revert")[i % 4]
        params: dict[str, Any] = {"changes": [{"op": "add", "flag": flag, "value": None}], "expect": []}
        state: dict[str, Any]
        before_id = after_id = None
        if playbook == "try":
            capacity = 48 - (i % 3) * 11
            after_id = len(snapshots) + 1
            snapshots.append(_snapshot_row(after_id, target, at + timedelta(seconds=30), flag, capacity))
            set_id = len(sets) + 1
            sets.append(_set_row(set_id, target, at + timedelta(seconds=60), after_id, 900.0 + (i % 200)))
            state = _try_state(template, i, after_id, set_id, kept=i % 8 == 0)
            params["expect"] = ["max_running_requests>=48"]
        elif playbook == "revert":
            state = {
                **template,
                "plan": {"flags": None, "env": None, "reverting_experiment": max(1, ident - 3)},
            }
        else:  # a verify: the same record, nothing restarted
            state = {**template, "restart": {**template["restart"], "applied": False}}
        hypothesis_id = None
        if i % 10 == 0:
            hypothesis_id = len(hypotheses) + 1
            status = ("open", "confirmed", "refuted", "inconclusive")[(i // 10) % 4]
            hypotheses.append(
                {
                    "id": hypothesis_id,
                    "target": target,
                    "statement": f"{flag} moves capacity ({i})",
                    "expectations": ["max_running_requests>=48"],
                    "status": status,
                    "because": None if status == "open" else "measured",
                    "created_by": "slack:U0BENCH",
                    "created_at": at,
                    "resolved_at": None if status == "open" else at + timedelta(minutes=3),
                }
            )
        experiments.append(
            {
                "id": ident,
                "target": target,
                "playbook": playbook,
                "params": params,
                "status": "rolled-back" if i % 50 == 7 else "succeeded",
                "verdict": VERDICTS[i % len(VERDICTS)] if playbook == "try" else "pass",
                "cursor": 14,
                "state": state,
                "actor": "slack:U0BENCH",
                "hypothesis_id": hypothesis_id,
                "before_snapshot_id": before_id,
                "after_snapshot_id": after_id,
                "summary": f"max_running_requests 48 -> {48 - (i % 3) * 11}",
                "created_at": at,
                "started_at": at,
                "finished_at": at + timedelta(minutes=2),
            }
        )
        if i % 20 == 0:
            observations.append(
                {
                    "flag": flag,
                    "kind": "effect",
                    "text": f"{flag} lowered capacity",
                    "target": target,
                    "experiment_id": ident,
                    "detail": {},
                    "observed_at": at + timedelta(minutes=2),
                }
            )
    with store.engine.begin() as connection:
        for model, rows in (
            (Snapshot, snapshots),
            (MeasurementSet, sets),
            (Hypothesis, hypotheses),
            (Experiment, experiments),
            (KnowledgeObservation, observations),
        ):
            table = model.__table__  # type: ignore[union-attr]  # SQLModel's table, set by table=True
            for start in range(0, len(rows), BATCH):
                connection.execute(insert(table), rows[start : start + BATCH])


BATCH = 2_000
"""Rows per executemany: bounded memory for 100,000 rows."""


def _try_state_template() -> dict[str, Any]:
    """A finished try's run state as `RunState.dump` writes it; per row only ids and outcome vary."""
    state = RunState.load({"schema_version": 2})
    state.plan.flags = flags_from_json([{"flag": "--tp-size", "value": "4"}, {"flag": "--enable-metrics"}])
    state.plan.env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    state.preflight = PreflightFacts(
        gpus={
            f"node-{k}": [{"index": g, "name": "NVIDIA GB10", "memory_total_mib": 122_880} for g in range(4)]
            for k in (1, 2)
        },
        gpus_read_at=1_764_000_000.0,
        report={
            "warnings": ["--enable-metrics adds a /metrics endpoint; the server's capacity is unchanged"],
            "checks": [
                {"name": name, "ok": True, "detail": "as expected"}
                for name in ("flag-list", "unit", "gpus", "disk")
            ],
        },
    )
    state.before.flags = flags_from_json([{"flag": "--tp-size", "value": "4"}])
    state.before.env = dict(state.plan.env)
    state.after.invocation = "inv-0123456789abcdef"
    state.restart.applied = True
    state.restart.previous_invocations = {"node-1": "inv-00000000", "node-2": "inv-00000001"}
    state.conclusion.summary = (
        "max_running_requests 48 -> 26 (-45.8 %); output_throughput -3.1 % [-5.0 %, -1.2 %]"
    )
    state.conclusion.failed_metrics = ["max_running_requests"]
    state.conclusion.expectations = [
        {"metric": "max_running_requests", "op": ">=", "value": 48, "passed": False}
    ]
    state.conclusion.proposals = [
        RankedProposal(
            variable="--enable-metrics",
            kind="flag",
            statement="--enable-metrics lowers max_running_requests",
            why=["capacity fell on the start after the change", "no other flag changed"],
            score=0.8,
            experiment={"playbook": "isolate", "params": {"what": "last"}},
        )
    ]
    return state.dump()


def _try_state(template: dict[str, Any], i: int, after_id: int, set_id: int, *, kept: bool) -> dict[str, Any]:
    conclusion = {**template["conclusion"], "kept": kept, "verdict": VERDICTS[i % len(VERDICTS)]}
    conclusion["snapshot_ids"], conclusion["set_ids"] = [after_id], [set_id]
    restart = {**template["restart"], "restored": not kept}
    after = {**template["after"], "snapshot_id": after_id, "set_id": set_id}
    return {**template, "after": after, "restart": restart, "conclusion": conclusion, "hypothesis_id": None}


SERVER_ARGS = {f"arg_{k}": (k if k % 3 else f"value-{k}") for k in range(180)}
"""A start's `/server_info` arguments are about 180 keys; the digest must not pay for reading them."""


def _snapshot_row(ident: int, target: str, at: datetime, flag: str, capacity: int) -> dict[str, Any]:
    return {
        "id": ident,
        "target": target,
        "node": "node-1",
        "captured_at": at,
        "sglang_version": "0.5.10",
        "requested_flags": [{"flag": "--tp-size", "value": "4"}, {"flag": flag, "value": None}],
        "environment": {},
        "server_args": SERVER_ARGS,
        "implied": {},
        "effective": {"max_running_requests": capacity, "max_total_num_tokens": capacity * 4096},
        "ready": True,
    }


def _set_row(ident: int, target: str, at: datetime, snapshot_id: int, throughput: float) -> dict[str, Any]:
    levels = [
        {"concurrency": c, "repeats": 3, "completed": 96, "failed": 0, "client_bound": 0}
        | {key: throughput * c / 64 if key.endswith("throughput") else 12.5 + c for key in KEY_METRICS}
        for c in (1, 8, 64)
    ]
    return {
        "id": ident,
        "target": target,
        "created_at": at,
        "snapshot_id": snapshot_id,
        "profile": "default",
        "params": {},
        "client": {},
        "summary": {"levels": levels},
    }


def timed(fn: Callable[[], Any], repeats: int) -> tuple[list[tuple[float, float]], Any]:
    """(wall, CPU) seconds per repeat, and the last value. CPU time (this process's) is printed
    too because wall time on a shared machine mostly measures the other work."""
    times, value = [], None
    for _ in range(repeats):
        started, cpu = time.perf_counter(), time.process_time()
        value = fn()
        times.append((time.perf_counter() - started, time.process_time() - cpu))
    return times, value


def fmt(times: list[tuple[float, float]]) -> str:
    walls, cpus = [w for w, _ in times], [c for _, c in times]
    raw = " ".join(f"{w * 1000:.0f}" for w in walls)
    return (
        f"{statistics.median(walls) * 1000:8.0f} ms wall, {statistics.median(cpus) * 1000:6.0f} ms CPU"
        f"  (raw wall ms: {raw})"
    )


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
        total = [
            (sum(w for w, _ in parts), sum(c for _, c in parts))
            for parts in zip(build_times, md_times, blocks_times, chart_times, strict=True)
        ]
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
    parser.add_argument(
        "--sizes", default="1000,10000,100000", help="experiments in the week, comma-separated"
    )
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
