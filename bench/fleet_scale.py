"""The drift watch and the scheduled checks over a fleet: 1, 10 and 50 targets of 2 nodes, all due
at once, twice on the same process (issue 25, "measured at fleet size").

What runs is the bot's own code, as `flagbot serve` runs it: one runtime installed
(`bot.app.runtime.installed`), one SSH connection pool around everything (`pooled()`, as serve),
and every due job started at once as a task, as APScheduler's asyncio executor does (no cap on
how many jobs run together; `max_instances=1` only stops one job overlapping itself). A job is
the call bot/schedule/jobs.py makes: `watch_drift(current(), target)` and
`run_check(current(), check_id, trigger="schedule")`; of the jobs started, `LOOKS_AT_ONCE`
(bot/app/runtime.py) look at their targets together and the others wait their turn, so a job's
time printed here includes its wait. Per size, a round runs the drift watch of
every target at once, then one check of every target at once (separately: a check holds the
target's lease, and a drift watch skips a leased target); the second round runs on the same
pool, so the connections it opens show reuse (none expected) and its memory shows growth.

The nodes are **lightweight**: in-process asyncssh servers on loopback playing systemd
(tests/support/fake_node.py, `FakeSystemd`), two per target, each with an SGLang 0.5.10 start in
its journal (tests/fixtures/sglang-releases/0.5.10.log); one aiohttp server answers every
target's /health, /server_info and /metrics on its own path (tests/support/fleet.py). They run
in a **child process**, so the CPU time, RSS and tracemalloc figures are the bot's alone (the
bench harness and the SQLite store included). Host keys are verified as the product does: the
child writes a known_hosts file naming each node's key, the targets' `ssh.known_hosts` points at it.

The checks' expectation is a **capacity** one (`max_running_requests>=48`, the concluded flags
and effective capacity) and their profile is not in `[bench]`: each check observes the running
start and runs **no load generator** ("not benchmarked"). Before the rounds, each target's start
is observed once and made known-good (what `flagbot observe` leaves), so the drift watch compares
capacity too, and two checks per target are stored (the 10-minute and the 24-hour one).

Connections and channels are counted by the nodes (SSH logins accepted and open; session channels
open at once, globally and per node: one connection per node, so per node is per connection).
Times include tracemalloc's overhead unless `--no-tracemalloc`. Prints figures; not a test (the
pass/fail guard is tests/unit/app/test_drift_fleet.py).

    .venv/bin/python bench/fleet_scale.py [--sizes 1,10,50] [--rounds 2] [--no-tracemalloc]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import multiprocessing
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.app.checks import run_check  # noqa: E402
from bot.app.drift import watch_drift  # noqa: E402
from bot.app.notify import MemoryNotifier  # noqa: E402
from bot.app.runtime import LOOKS_AT_ONCE, ScheduleRuntime, SessionFactory, current, installed  # noqa: E402
from bot.config import Settings  # noqa: E402
from bot.store import AsyncStore, Store  # noqa: E402
from bot.target.session import TargetSession  # noqa: E402
from bot.target.ssh_pool import MAX_CHANNELS, RESERVED_CHANNELS, pooled  # noqa: E402
from tests.support.fleet import (  # noqa: E402
    NO_BENCHMARK,
    NODES_PER_TARGET,
    fleet_settings,
    running_fleet,
    seed_checks,
    seed_known_good,
    target_name,
)

MIB = 1024 * 1024


# --- the nodes' process ---------------------------------------------------------------------


def serve_nodes(directory: Path, targets: int, pipe: Connection) -> None:
    """The child: the fleet's nodes and HTTP server until told to stop; counts on request."""
    asyncio.run(_serve_nodes(directory, targets, pipe))


async def _serve_nodes(directory: Path, targets: int, pipe: Connection) -> None:
    async with running_fleet(directory, targets) as fleet:
        pipe.send(
            {
                "ports": fleet.ports(),
                "key_path": str(fleet.keys.client_key),
                "known_hosts": str(fleet.known_hosts),
                "http_port": fleet.http_port,
            }
        )
        loop = asyncio.get_running_loop()
        while True:
            request = await loop.run_in_executor(None, pipe.recv)
            if request == "restart":
                fleet.restart_counts()
                pipe.send(None)
            elif request == "counts":
                pipe.send(fleet.counts())
            else:
                return


# --- the bot's side -------------------------------------------------------------------------


@dataclass
class Phase:
    targets: int
    round: int
    job: str
    wall_s: float
    cpu_s: float
    per_target_s: list[float]
    look_s: list[float]
    """How long each job's target session was open: its look, without the wait for its turn."""
    counts: dict[str, int]
    rss_mib: float
    rss_peak_mib: float
    traced_peak_mib: float | None
    results: Counter[str]
    reasons: Counter[str]
    """Why a job did not pass or found drift (its summary), and how many said it."""


def rss_now_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


Outcome = tuple[str, str | None]
"""A job's result word (`no drift`, `pass`, ...) and, when it is not the good one, why."""


async def timed(call: Callable[[], Awaitable[Outcome]]) -> tuple[float, Outcome]:
    started = time.monotonic()
    result = await call()
    return time.monotonic() - started, result


LOOKS: list[float] = []
"""The target sessions' lifetimes of the phase running now (`timed_session`)."""


def timed_session(settings: Settings, store: AsyncStore) -> SessionFactory:
    """The runtime's own sessions (`TargetSession.open`), each one's lifetime kept in `LOOKS`."""

    @asynccontextmanager
    async def open_session(target: str) -> AsyncIterator[TargetSession]:
        started = time.monotonic()
        try:
            async with TargetSession.open(target, settings.targets[target], store=store) as ts:
                yield ts
        finally:
            LOOKS.append(time.monotonic() - started)

    return open_session


async def phase(
    nodes: Connection, targets: int, round_: int, job: str, calls: Sequence[Callable[[], Awaitable[Outcome]]]
) -> Phase:
    """Every call started at once; wall, CPU, memory and the nodes' counts for them."""
    LOOKS.clear()
    nodes.send("restart")
    nodes.recv()
    if tracemalloc.is_tracing():
        tracemalloc.reset_peak()
    cpu, wall = time.process_time(), time.monotonic()
    done = await asyncio.gather(*(timed(call) for call in calls))
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    nodes.send("counts")
    counts: dict[str, int] = nodes.recv()
    traced = tracemalloc.get_traced_memory()[1] / MIB if tracemalloc.is_tracing() else None
    return Phase(
        targets,
        round_,
        job,
        wall,
        cpu,
        [seconds for seconds, _ in done],
        list(LOOKS),
        counts,
        rss_now_mib(),
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        traced,
        Counter(word for _, (word, _) in done),
        Counter(why for _, (_, why) in done if why is not None),
    )


async def drift(target: str) -> Outcome:
    outcome = await watch_drift(current(), target)  # what bot.schedule.jobs.drift_job runs
    if outcome.skipped:
        return "skipped", outcome.skipped
    if outcome.findings:
        return "drift", "; ".join(str(item["what"]) for item in outcome.findings)
    return "no drift", None


async def check(check_id: int) -> Outcome:
    outcome = await run_check(current(), check_id, trigger="schedule")  # bot.schedule.jobs.check_job
    if outcome is None:
        return "gone", f"check #{check_id} is gone"
    run = outcome.recorded.run
    return run.result, None if run.result == "pass" else run.summary


async def measure(
    nodes: Connection, fleet: dict[str, Any], size: int, rounds: int, work: Path
) -> list[Phase]:
    names = [target_name(index) for index in range(size)]
    state = work / f"size-{size}"
    settings = fleet_settings(
        {name: fleet["ports"][name] for name in names},
        key_path=Path(fleet["key_path"]),
        known_hosts=Path(fleet["known_hosts"]),
        http_port=fleet["http_port"],
        state_dir=state,
    )
    opened = Store.open(None, sqlite_path=settings.database.sqlite_path)
    opened.upgrade()
    store = AsyncStore(opened)
    rt = ScheduleRuntime(
        settings,
        store,
        MemoryNotifier(),
        cache_dir=work / "cache",
        session_factory=timed_session(settings, store),
    )
    delays = [timedelta(minutes=10)] + [timedelta(days=day) for day in range(1, rounds)]
    checks: dict[str, list[int]] = {}
    for name in names:  # not measured: what `flagbot observe` and a kept try leave
        snapshot_id = await seed_known_good(settings, store, name, rt.cache())
        checks[name] = [c.id for c in await seed_checks(store, name, snapshot_id, delays) if c.id is not None]
    phases = []
    try:
        async with installed(rt), pooled():
            for round_ in range(1, rounds + 1):
                jobs = {
                    "drift": [functools.partial(drift, t) for t in names],
                    "checks": [functools.partial(check, checks[t][round_ - 1]) for t in names],
                }
                for job, calls in jobs.items():
                    phases.append(await phase(nodes, size, round_, job, calls))
                    print(row(phases[-1]), flush=True)
    finally:
        await store.aclose()
    return phases


HEADER = (
    f"{'targets':>7} {'round':>5} {'job':<6} {'wall s':>7} {'cpu s':>6} {'per-target s med/max':>21} "
    f"{'look s med/max':>15} "
    f"{'conns opened/peak':>17} {'logins/node':>11} {'chans opened/peak':>17} {'chans/conn max':>14} "
    f"{'RSS MiB now/peak':>16} {'traced MiB':>10}  results"
)


def row(p: Phase) -> str:
    c = p.counts
    traced = "-" if p.traced_peak_mib is None else f"{p.traced_peak_mib:.1f}"
    return (
        f"{p.targets:>7} {p.round:>5} {p.job:<6} {p.wall_s:>7.2f} {p.cpu_s:>6.2f} "
        f"{statistics.median(p.per_target_s):>10.2f}/{max(p.per_target_s):<10.2f} "
        f"{statistics.median(p.look_s):>7.2f}/{max(p.look_s):<7.2f} "
        f"{c['connections_opened']:>8}/{c['connections_peak']:<8} {c['most_logins_per_node']:>11} "
        f"{c['channels_opened']:>8}/{c['channels_peak']:<8} {c['channels_peak_per_node']:>14} "
        f"{p.rss_mib:>7.0f}/{p.rss_peak_mib:<8.0f} {traced:>10}  "
        + ", ".join(f"{n} {word}" for word, n in sorted(p.results.items()))
    )


def bounds(phases: list[Phase]) -> list[str]:
    """Per phase: connections reused (opened only by the first job of a size), channels per
    connection within the read slots, the global channel peak against its ceiling."""
    read_limit = MAX_CHANNELS - RESERVED_CHANNELS
    lines = []
    for p in phases:
        nodes = p.targets * NODES_PER_TARGET
        ceiling = min(p.targets, LOOKS_AT_ONCE) * NODES_PER_TARGET * read_limit
        c = p.counts
        first = p.round == 1 and p.job == "drift"
        reused = c["connections_opened"] == (nodes if first else 0) and c["connections_peak"] == nodes
        within = c["channels_peak_per_node"] <= read_limit and c["most_logins_per_node"] <= 1
        bounded = c["channels_peak"] <= ceiling
        lines.append(
            f"{p.targets} targets, round {p.round}, {p.job}: "
            + (
                f"{nodes} connections, " + ("opened now" if first else "reused")
                if reused
                else "CONNECTIONS NOT REUSED"
            )
            + f"; channels per connection {c['channels_peak_per_node']} <= {read_limit} read slots: "
            + ("yes" if within else "NO")
            + f"; global channel peak {c['channels_peak']} <= {ceiling}: {'yes' if bounded else 'NO'} "
            f"({min(p.targets, LOOKS_AT_ONCE)} targets looked at together x {NODES_PER_TARGET} nodes x {read_limit})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,50", help="numbers of targets, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="rounds on the same process and pool")
    parser.add_argument(
        "--no-tracemalloc", action="store_true", help="leave tracemalloc off (times without its cost)"
    )
    args = parser.parse_args()
    sizes = sorted(int(word) for word in args.sizes.split(","))
    with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
        work = Path(tmp)
        ours, theirs = multiprocessing.Pipe()
        child = multiprocessing.get_context("fork").Process(
            target=serve_nodes, args=(work / "nodes", max(sizes), theirs), daemon=True
        )
        child.start()  # before tracemalloc and any event loop: the nodes' process is not measured
        try:
            fleet: dict[str, Any] = ours.recv()
            load = os.getloadavg()
            print(
                f"fleet: {max(sizes)} targets x {NODES_PER_TARGET} nodes (in-process asyncssh servers in a "
                f"child process, pid {child.pid}); checks: capacity expectation, profile {NO_BENCHMARK!r} "
                f"not in [bench], no load generator"
            )
            print(
                f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
                f"at start; python {sys.version.split()[0]}; tracemalloc "
                + ("off" if args.no_tracemalloc else "on (times include its cost)")
            )
            print(
                f"channel slots per connection: {MAX_CHANNELS}, {RESERVED_CHANNELS} kept for privileged commands; "
                f"targets looked at together by the scheduled jobs: {LOOKS_AT_ONCE} (the others wait their turn: "
                "'per-target' is a job's time with its wait, 'look' its target session's alone)"
            )
            print()
            if not args.no_tracemalloc:
                tracemalloc.start()
            print(HEADER, flush=True)
            phases: list[Phase] = []
            for size in sizes:
                phases += asyncio.run(measure(ours, fleet, size, args.rounds, work))
            print()
            print("\n".join(bounds(phases)))
            for p in phases:
                for why, n in p.reasons.most_common():
                    print(f"{p.targets} targets, round {p.round}, {p.job}: {n} x {why}")
        finally:
            ours.send("stop")
            child.join(30)
            if child.is_alive():
                child.terminate()


if __name__ == "__main__":
    main()
