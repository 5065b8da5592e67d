"""The bot's own overhead per experiment: a `try`'s wall time minus what the server and benchmark take.

An experiment's wall time is mostly not flagbot's: the server loading after the restart and the
benchmark's requests are what the user asked for. What is left is the bot's cost (SSH round
trips, journal reads, store writes, starting load-generator workers, the verdict, the chart),
which should stay small next to them (aim: <= 2 s per experiment).

Boots a two-node testbed running the twin (instance 202 by default, its own temporary base dir),
writes a config with a small benchmark profile (`--concurrency`, `--repeats`, short requests)
and a fresh SQLite store, then measures two ways:

1. `flagbot try <flag> keep=always --json` as a user runs it from a shell: one process per
   experiment, so interpreter start, imports, SSH logins and the load generator's fork server
   are paid every time (the process wall time is measured too); `--cli-tries N` runs N of them
   in turn in the same base dir, so the later ones read the target's flag list from its cache as
   a user's second command does, the first from the host (issue 19);
2. `--long-running N` experiments (default 3) in one process, as `flagbot serve` runs them for
   Slack: the application layer's `run_playbook` in this script's own process, SSH connections pooled
   (`bot.target.ssh_pool`, as serve does), the same store; the flag is removed and added in
   turn. The first pays the cold costs; the later ones are what each Slack experiment costs.
   (Slack's own posting is not included: docs/performance.md measures the ack separately.)

Per step of each experiment, from the store:

* the step's wall time (`started_at` -> `finished_at`);
* for `measure` steps, the benchmark's own duration: the sum of every stored measurement's
  `duration` (first request sent -> last response, bench_serving's definition), and its warmup
  requests' time (each run's `warmup_s`: the profile's `warmup_requests` before the measured
  ones, server time that bench_serving also spends but does not count in its duration);
* for `await_start`, the twin's load: readiness `total_s` (restart noticed -> ready), which
  includes flagbot's readiness lag (measured on its own by bench/readiness_lag.py).

overhead = step wall - benchmark duration - load, printed with the warmups counted as overhead
and without them. The restart inside `apply` (systemd stopping and starting the twin) is counted
as overhead. Needs root and the testbed's Debian packages. Prints figures; not a test.

    .venv/bin/python bench/experiment_overhead.py [--instance 202] [--flag --enable-metrics] [--long-running 3]
        [--cli-tries 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.store import Store
from bot.store.bench_repo import load_set
from bot.store.experiments import get_experiment, list_steps
from flagbot_lab.testbed import Testbed, TestbedError, unavailable_reason

AIM_S = 2.0
FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


@dataclass(frozen=True)
class Phase:
    """One step of the experiment with the parts of its wall time that are not flagbot's."""

    name: str
    wall_s: float
    bench_s: float
    load_s: float
    warmup_s: float = 0.0

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.bench_s - self.load_s


def write_config(bed: Testbed, base: Path, args: argparse.Namespace) -> Path:
    levels = ", ".join(str(int(c)) for c in args.concurrency.split(","))
    profile = (
        f"\n[bench.overhead]\nconcurrency = [{levels}]\nrepeats = {args.repeats}\ninput_len = 128\n"
        f"output_len = 32\nnum_requests = {args.requests}\nwarmup_requests = 1\n"
    )
    text = bed.config_path.read_text().replace(
        'sglang_version = "0.5.10"', 'sglang_version = "0.5.10"\nbenchmark_profile = "overhead"', 1
    )
    path = base / "flagbot.toml"
    path.write_text(text + profile + f'\n[database]\nsqlite_path = "{base / "flagbot.db"}"\n')
    return path


def flagbot(config: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    return subprocess.run(
        [FLAGBOT, "--config", str(config), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def phases_of(store: Store, experiment_id: int) -> list[Phase]:
    phases = []
    for step in list_steps(store, experiment_id):
        if step.started_at is None or step.finished_at is None:
            continue
        result: dict[str, Any] = step.result or {}
        bench = warmup = 0.0
        if isinstance(result.get("set_id"), int) and not result.get("reused"):
            loaded = load_set(store, result["set_id"])
            if loaded is not None:
                bench = sum(float(m.metrics.get("duration") or 0.0) for m in loaded.measurements)
                warmup = sum(
                    float((m.metrics.get("client") or {}).get("warmup_s") or 0.0) for m in loaded.measurements
                )
        load = (
            float((result.get("timings") or {}).get("total_s") or 0.0)
            if step.action == "await_start"
            else 0.0
        )
        wall = (step.finished_at - step.started_at).total_seconds()
        phases.append(Phase(f"{step.index:2d} {step.name}", wall, bench, load, warmup))
    return phases


def report(phases: list[Phase], process_s: float | None, experiment_s: float) -> tuple[float, float]:
    """Print the step table; return (overhead inside the experiment, the same without warmups)."""
    print(
        f"\n{'step':28s} {'wall s':>8s} {'bench s':>8s} {'warmup s':>8s} {'load s':>8s} {'overhead s':>10s}"
    )
    for phase in phases:
        print(
            f"{phase.name:28s} {phase.wall_s:8.3f} {phase.bench_s:8.3f} {phase.warmup_s:8.3f} "
            f"{phase.load_s:8.3f} {phase.overhead_s:10.3f}"
        )
    bench = sum(p.bench_s for p in phases)
    warmup = sum(p.warmup_s for p in phases)
    load = sum(p.load_s for p in phases)
    steps = sum(p.wall_s for p in phases)
    print(
        f"{'sum of steps':28s} {steps:8.3f} {bench:8.3f} {warmup:8.3f} {load:8.3f} {steps - bench - load:10.3f}"
    )
    inside = experiment_s - bench - load
    print(
        f"\nexperiment row started -> finished: {experiment_s:.3f} s (between steps: {experiment_s - steps:.3f} s)"
    )
    print(
        f"overhead inside the experiment = {experiment_s:.3f} - benchmark {bench:.3f} - load {load:.3f} "
        f"= {inside:.3f} s; without the warmups ({warmup:.3f} s): {inside - warmup:.3f} s"
    )
    if process_s is not None:
        print(
            f"`flagbot try` process wall time {process_s:.3f} s (outside the experiment: "
            f"{process_s - experiment_s:.3f} s): overhead of the command = {process_s - bench - load:.3f} s"
        )
    return inside, inside - warmup


def experiment_seconds(store: Store, experiment_id: int) -> float:
    row = get_experiment(store, experiment_id)
    if row is None or row.started_at is None or row.finished_at is None:
        raise RuntimeError("the experiment row has no start or finish time")
    return (row.finished_at - row.started_at).total_seconds()


async def long_running(config: Path, flag: str, count: int, added: bool) -> list[tuple[int, str, str]]:
    """`count` tries in this process as `flagbot serve` runs them: the application layer's
    `run_playbook` (which builds the engine and settles what a dead run left), pooled SSH; the
    first removes the flag when the shell tries left it `added`, else adds it."""
    from bot.app.context import AppContext
    from bot.app.playbooks import resolve_playbook
    from bot.app.runs import run_playbook
    from bot.commands.grammar import parse_command
    from bot.config import load_settings
    from bot.loop.report import MemoryReporter
    from bot.store import AsyncStore
    from bot.target.ssh_pool import pooled

    settings = load_settings(config, required=True)
    store = AsyncStore(Store.open(f"sqlite:///{config.parent / 'flagbot.db'}"))
    ctx = AppContext(settings, store)
    done = []
    try:
        async with pooled():
            for k in range(count):
                op = "remove" if (k % 2 == 0) == added else "add"
                call = resolve_playbook(settings, parse_command(f"try {op} {flag} keep=always target=twin"))
                run = await run_playbook(
                    ctx, call, MemoryReporter(), actor="bench:overhead", admin=True, restart_approved=True
                )  # as the CLI runs it: its user is an admin, and the try's own restart is what it asked for
                outcome = run.outcome
                done.append((int(outcome.experiment_id), outcome.status, f"try {op} {flag}"))
    finally:
        await store.aclose()
    return done


def run(args: argparse.Namespace, base: Path) -> int:
    bed = Testbed(args.instance, base, 2, args.scenario)
    bed.up(replace=True)
    try:
        bed.wait_healthy(300)
        config = write_config(bed, base, args)
        upgraded = flagbot(config, "db", "upgrade")
        if upgraded.returncode != 0:
            raise RuntimeError(f"db upgrade failed: {upgraded.stderr.strip()}")
        print("\n== 1. one `flagbot try` process per experiment (a shell user)")
        for k in range(args.cli_tries):
            words = ["try", args.flag] if k % 2 == 0 else ["try", "remove", args.flag]
            started = time.monotonic()
            tried = flagbot(config, *words, "keep=always", "--json")
            process_s = time.monotonic() - started
            if tried.returncode != 0 or not tried.stdout.strip():
                raise RuntimeError(f"try failed ({tried.returncode}): {tried.stderr.strip()[-2000:]}")
            outcome = json.loads(tried.stdout)
            print(
                f"\nprocess {k + 1} ({' '.join(words)}; flag-list cache {'cold' if k == 0 else 'warm'}): "
                f"experiment #{outcome['experiment_id']}: status {outcome.get('status')}, "
                f"verdict {outcome.get('verdict')}"
            )
            store = Store.open(f"sqlite:///{base / 'flagbot.db'}")
            try:
                eid = outcome["experiment_id"]
                report(phases_of(store, eid), process_s, experiment_seconds(store, eid))
            finally:
                store.close()
        if args.long_running < 1:
            return 0
        print(f"\n== 2. {args.long_running} experiments in one long-running process (as `flagbot serve`)")
        runs = asyncio.run(long_running(config, args.flag, args.long_running, args.cli_tries % 2 == 1))
        figures = []
        store = Store.open(f"sqlite:///{base / 'flagbot.db'}")
        try:
            for eid, status, what in runs:
                print(f"\nexperiment #{eid} ({what}): status {status}")
                if status != "succeeded":
                    raise RuntimeError(f"experiment #{eid} ended {status}")
                figures.append(report(phases_of(store, eid), None, experiment_seconds(store, eid)))
        finally:
            store.close()
        steady = figures[1:] or figures
        worst, worst_bare = max(f[0] for f in steady), max(f[1] for f in steady)
        print(
            f"\nlong-running, experiments 2..{len(figures)}: overhead per experiment at most {worst:.3f} s "
            f"({worst_bare:.3f} s without the warmups); first experiment {figures[0][0]:.3f} s; "
            f"aim <= {AIM_S:.0f} s -> {'OK' if worst <= AIM_S else 'ABOVE AIM'}"
            + (
                ""
                if worst <= AIM_S
                else f" (within it only if the warmups counted as benchmark: {worst_bare <= AIM_S})"
            )
        )
        return 0 if worst <= AIM_S else 1
    finally:
        bed.down()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flag", default="--enable-metrics", help="the flag the try adds")
    parser.add_argument("--concurrency", default="1,8", help="the small profile's levels")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=8, help="requests per level and repeat")
    parser.add_argument("--instance", type=int, default=202, help="the testbed instance to boot")
    parser.add_argument("--scenario", default="seed-gb10")
    parser.add_argument(
        "--long-running", type=int, default=3, help="experiments in one process afterwards (0: none)"
    )
    parser.add_argument(
        "--cli-tries",
        type=int,
        default=1,
        help="one-process tries in turn (add, remove, ...); the first reads the host's flag list "
        "cold, the later ones from its cache in the same base dir",
    )
    args = parser.parse_args()
    if args.cli_tries < 1:
        parser.error("--cli-tries must be at least 1")
    if reason := unavailable_reason():
        print(f"error: {reason}", file=sys.stderr)
        return 2
    print(
        f"machine: {os.cpu_count()} cores; 2 nodes, scenario {args.scenario} "
        f"(the SGLang twin), instance {args.instance}"
    )
    print(
        f"try {args.flag} keep=always; profile: concurrency {args.concurrency}, {args.repeats} repeats, "
        f"{args.requests} requests of 128 in / 32 out, 1 warmup"
    )
    with tempfile.TemporaryDirectory(prefix="flagbot-bench-overhead-") as base:
        try:
            return run(args, Path(base))
        except (TestbedError, RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1


if __name__ == "__main__":
    sys.exit(main())
