"""`flagbot bench`: run a benchmark profile against a target, store it, show it, compare it.

The chat words (`profile=`, `concurrency=`, `repeats=`, `backend=`, `compare-to=`, `target=`)
go through the shared grammar, exactly as `/flagbot bench ...` in Slack. Three options belong to
the console only and are taken off first: `--json` (one JSON object on stdout), `--chart PATH`
(a PNG of throughput and latency percentiles against concurrency) and `--base-url URL` (measure
a server that is not a configured target, e.g. a local twin; the set is stored under
`target=` or `adhoc`). Progress goes to stderr, one line per level and repeat.

The target's lease (docs/loop.md, Leases): a benchmark puts load on the server, so it runs under
the target's lease like a mutating playbook (holder `cli:USER@HOST:XXXXXXXX`, purpose `bench`,
ttl `FLAGBOT_LEASE_TTL_S`, renewed every ttl/3, released at the end however the run ends). When
someone else holds it, `wait=DURATION` waits for it (default 0: refuse at once); then bench exits
1 with the holder named, before anything is contacted. bench always opens the store (every run
is stored as a measurement set), so the lease is always available; it is taken whenever the load
reaches a configured target: no `--base-url` (the target's own URL), `--base-url` equal to the
target's URL, or `backend=bench_serving` (its client runs on the target's node 0). Only a
`--base-url` server that is no configured target (stored under `target=` or `adhoc`) is measured
without a lease: there is no target to lock.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import math
import socket
import statistics
import sys
from contextlib import AsyncExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from bot.commands import CommandError, help_text, parse_command

__all__ = ["register_bench"]

CONSOLE_ONLY = (
    "console only: --json (JSON on stdout), --chart PATH (PNG), --base-url URL (an unconfigured server)"
)


def register_bench(app: typer.Typer) -> None:
    """Register `bench` on the CLI, replacing the registry's placeholder of the same name."""
    app.command(
        "bench",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    )(bench)


def _console_options(words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Take `--json`, `--chart PATH` and `--base-url URL` off the words; the rest is chat grammar."""
    found: dict[str, Any] = {"json": False, "chart": None, "base_url": None}
    rest: list[str] = []
    items = iter(words)
    for word in items:
        name, has_value, value = word.partition("=")
        if word == "--json":
            found["json"] = True
        elif name in ("--chart", "--base-url"):
            if not has_value:
                value = next(items, "")
            if not value:
                raise CommandError(f"{name} needs a value", usage="bench ... " + name + " VALUE")
            found[name[2:].replace("-", "_")] = value
        else:
            rest.append(word)
    return found, rest


def bench(ctx: typer.Context) -> None:
    """Benchmark the running server with a profile; compare with a stored measurement set."""
    from bot import cli

    if ctx.args in (["--help"], ["-h"]):
        typer.echo(help_text("bench") + "\n" + CONSOLE_ONLY)
        return
    config = cli.settings()
    try:
        local, words = _console_options(list(ctx.args))
        invocation = parse_command(["bench", *words], catalog=cli.catalog_for(config, words))
    except CommandError as exc:
        raise cli.fail(exc.render()) from None
    options = invocation.options
    # --base-url without target= measures some other server: never file it under the default target
    name = options.get("target") or (None if local["base_url"] else config.default_target)
    target = config.targets.get(name) if name else None
    if target is None and local["base_url"] is None:
        raise cli.fail("error: bench needs a target (target=NAME or default_target) or --base-url URL")
    profile_name = options.get("profile") or (target.benchmark_profile if target else "quick")
    if profile_name not in config.bench:
        raise cli.fail(f"error: no benchmark profile {profile_name!r}; profiles: {', '.join(config.bench)}")
    backend = options.get("backend") or config.bench[profile_name].backend
    if backend == "bench_serving" and target is None:
        raise cli.fail("error: backend=bench_serving runs on a target's node 0: name a configured target")
    from bot.config.schema import parse_duration

    wait = options.get("wait", "0")
    delay = parse_duration(wait)  # the grammar checked it: a timedelta
    wait_s = delay.total_seconds() if isinstance(delay, timedelta) else 0.0
    leased = target is not None and (
        local["base_url"] is None
        or backend == "bench_serving"
        or local["base_url"].rstrip("/") == target.http_base().rstrip("/")
    )

    from bot.bench.loadgen import LoadError
    from bot.bench.run import BenchPlan
    from bot.cli_playbooks import lease_ttl_s
    from bot.store import AsyncStore, StoreNotReadyError
    from bot.store.bench_repo import UnknownMeasurementSetError, load_set
    from bot.store.leases import LeaseHeld

    store = cli._store()
    astore = AsyncStore(store)  # the lease and the run's writes, off the event loop
    try:
        try:
            store.check_ready()
        except StoreNotReadyError as exc:
            raise cli.fail(f"error: {exc}") from None
        reference = None
        if "compare-to" in options:
            reference = load_set(store, int(options["compare-to"]))
            if reference is None:
                raise cli.fail(f"error: compare-to={options['compare-to']}: no measurement set with that id")
        plan = BenchPlan.build(
            target=name or "adhoc",
            base_url=local["base_url"] or (target.http_base() if target else ""),
            profile_name=profile_name,
            profile=config.bench[profile_name],
            concurrency=[int(c) for c in options["concurrency"].split(",")]
            if "concurrency" in options
            else None,
            repeats=int(options["repeats"]) if "repeats" in options else None,
            backend="bench_serving" if backend == "bench_serving" else "builtin",
            **({"bench_serving": target.bench_serving} if target else {}),
        )
        lease = {"target": name, "ttl_s": lease_ttl_s(), "wait_s": wait_s, "wait": wait} if leased else None
        try:
            run, lost = asyncio.run(_run(plan, astore, name, target, lease))
        except LeaseHeld as exc:
            hint = f" (waited {wait})" if wait_s > 0 else "; bench wait=DURATION waits for it"
            raise cli.fail(f"error: {exc}{hint}", code=1) from None
        except LoadError as exc:
            raise cli.fail(f"error: benchmark failed: {exc}".splitlines()[0]) from None
        except Exception as exc:  # a target error (SSH, unreachable node) is one line, not a traceback
            if type(exc).__module__.startswith("bot.target"):
                raise cli.fail(f"error: {exc}") from None
            raise
        if lost:
            typer.echo(f"warning: {lost} during the run: its figures may be disturbed", err=True)
        comparison: Any = None
        if reference is not None:
            from bot.bench.compare_sets import compare_by_id
            from bot.bench.verdict import VerdictSettings

            assert reference.set.id is not None
            assert run.set.id is not None
            try:
                comparison = compare_by_id(
                    store, reference.set.id, run.set.id, VerdictSettings.from_config(config.verdicts)
                )
            except UnknownMeasurementSetError as exc:
                raise cli.fail(f"error: {exc}") from None
            except (ArithmeticError, ValueError) as exc:  # the measurements stay stored and shown
                comparison = f"comparison with set #{reference.set.id} failed: {type(exc).__name__}: {exc}"
        if local["chart"]:
            from bot.bench.chart import render_chart

            render_chart(
                run.measurements,
                Path(local["chart"]),
                title=f"{plan.target} · profile {plan.profile_name} · set #{run.set.id} ({plan.backend})",
                reference=reference.measurements if reference else (),
                reference_title=f"set #{reference.set.id}" if reference else None,
            )
        if local["json"]:
            typer.echo(json.dumps(_as_json(run, comparison, local["chart"]), indent=2, allow_nan=False))
        else:
            _print(run, comparison, local["chart"])
        if isinstance(comparison, str):
            raise cli.fail(f"error: {comparison} (set #{run.set.id} is stored)", code=1)
    finally:
        asyncio.run(astore.aclose())  # stops its worker thread and closes the store


async def _run(
    plan: Any, astore: Any, name: str | None, target: Any, lease: dict[str, Any] | None
) -> tuple[Any, str | None]:
    """Run the plan under the target's lease (when `lease` names one); the set, and why the lease
    was lost during the run (None when it was held throughout or not needed)."""
    from bot.bench.run import run_plan
    from bot.loop.lease_guard import hold_lease, holder_id

    def progress(repeat: int, result: Any) -> None:
        m = result.metrics
        bound = "  CLIENT-BOUND" if result.client_bound else ""
        print(
            f"c={result.spec.concurrency} repeat {repeat + 1}/{plan.repeats}: "
            f"{_num(m.get('output_throughput'))} tok/s, TTFT p50 {_num(m.get('median_ttft_ms'))} ms, "
            f"{m.get('completed')} ok, {m.get('failed')} failed{bound}",
            file=sys.stderr,
            flush=True,
        )

    def waiting(busy: Any, remaining_s: float) -> None:
        assert lease is not None
        print(
            f"waiting (up to {remaining_s:.0f} s more) for the lease of {busy.lease.target}: "
            f"{busy.lease.describe()}",
            file=sys.stderr,
            flush=True,
        )

    async with AsyncExitStack() as stack:
        held = None
        if lease is not None:  # first: a busy target is refused before anything is contacted
            held = await stack.enter_async_context(
                hold_lease(
                    astore,
                    lease["target"],
                    purpose="bench",
                    holder=holder_id(f"cli:{getpass.getuser()}@{socket.gethostname()}"),
                    ttl_s=lease["ttl_s"],
                    wait_s=lease["wait_s"],
                    on_wait=waiting,
                )
            )
            if held.taken_over is not None:
                print(
                    f"note: took over an expired lease of {lease['target']} "
                    f"({held.taken_over.describe()}); `flagbot reconcile` settles what it left",
                    file=sys.stderr,
                    flush=True,
                )
        node = None
        if plan.backend == "bench_serving":
            from bot.target.session import TargetSession

            session = await stack.enter_async_context(TargetSession.open(name or "target", target))
            node = session.node0
        run = await run_plan(plan, store=astore, node=node, on_level=progress)
        return run, (held.lost_reason if held is not None and held.lost.is_set() else None)


def _num(value: Any, digits: int = 1) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}"


def _levels(run: Any) -> dict[int, list[Any]]:
    levels: dict[int, list[Any]] = {}
    for row in run.measurements:
        levels.setdefault(row.concurrency, []).append(row)
    return levels


def _mean(rows: list[Any], key: str) -> float | None:
    values = [r.metrics[key] for r in rows if isinstance(r.metrics.get(key), int | float)]
    return statistics.fmean(values) if values else None


def _print(run: Any, comparison: Any, chart: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    s = run.set
    table = Table(title=f"measurement set #{s.id}: {s.target}, profile {s.profile}, backend {s.backend}")
    for column in ("conc", "reps", "ok/failed", "out tok/s", "cv", "req/s", "TTFT p50", "TTFT p99",
                   "TPOT mean", "ITL p50", "ITL p99", "E2E p50", "client"):  # fmt: skip
        table.add_column(column, justify="right" if column != "client" else "left")
    for level, rows in _levels(run).items():
        out = [r.metrics.get("output_throughput") for r in rows]
        numbers = [v for v in out if isinstance(v, int | float)]
        cv = (
            statistics.stdev(numbers) / statistics.fmean(numbers)
            if len(numbers) > 1 and statistics.fmean(numbers)
            else None
        )
        bound = sum(1 for r in rows if r.client_bound)
        table.add_row(
            str(level),
            str(len(rows)),
            f"{sum(int(r.metrics.get('completed') or 0) for r in rows)}/{sum(int(r.metrics.get('failed') or 0) for r in rows)}",
            _num(_mean(rows, "output_throughput")),
            f"{cv:.1%}" if cv is not None else "-",
            _num(_mean(rows, "request_throughput"), 2),
            _num(_mean(rows, "median_ttft_ms")),
            _num(_mean(rows, "p99_ttft_ms")),
            _num(_mean(rows, "mean_tpot_ms"), 2),
            _num(_mean(rows, "median_itl_ms"), 2),
            _num(_mean(rows, "p99_itl_ms"), 2),
            _num(_mean(rows, "median_e2e_latency_ms")),
            f"[red]CLIENT-BOUND {bound}/{len(rows)}[/red]" if bound else "ok",
        )
    console.print(table)
    console.print("latencies in ms; means over repeats; cv = run-to-run variation of output tok/s")
    for row in run.measurements:
        client = row.metrics.get("client") or {}
        if row.client_bound:
            console.print(
                f"[red]c={row.concurrency} repeat {row.repeat + 1}: client-bound ({'; '.join(client.get('reasons', []))}):"
                " these figures are the load generator's limit, not the server's[/red]"
            )
        for group, count in (row.metrics.get("errors") or {}).items():
            console.print(f"c={row.concurrency} repeat {row.repeat + 1}: {count} failed: {group}")
    warnings = sorted(
        {w for r in run.measurements for w in (r.metrics.get("client") or {}).get("warnings", [])}
    )
    for warning in warnings:
        console.print(f"note: {warning}")
    if comparison is not None and not isinstance(comparison, str):
        for line in comparison.result.lines():
            console.print(line)
        if comparison.row is not None:
            console.print(f"comparison #{comparison.row.id} stored")
    if chart:
        console.print(f"chart: {chart}")
    console.print(f"stored as measurement set #{s.id}")


def _as_json(run: Any, comparison: Any, chart: str | None) -> Any:
    from bot.bench.run import jsonable

    s = run.set
    return jsonable(
        {
            "set_id": s.id,
            "target": s.target,
            "profile": s.profile,
            "backend": s.backend,
            "client_bound": s.client_bound,
            "params": s.params,
            "summary": s.summary,
            "client": s.client,
            "measurements": [
                {
                    "id": m.id,
                    "concurrency": m.concurrency,
                    "request_rate": m.request_rate,
                    "repeat": m.repeat,
                    "source": m.source,
                    "client_bound": m.client_bound,
                    "metrics": m.metrics,
                }
                for m in run.measurements
            ],
            "comparison": (
                {"error": comparison}
                if isinstance(comparison, str)
                else {"id": comparison.row.id if comparison.row else None, **comparison.result.to_json()}
                if comparison is not None
                else None
            ),
            "chart": chart,
        }
    )
