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

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from bot.app.bench import BenchRequest, BenchResult, check_rerun, plan_bench, run_bench, with_rerun
from bot.app.context import AppContext, console_actor
from bot.bench.compare_sets import Compared
from bot.bench.loadgen import LoadError
from bot.bench.run import BenchRun, jsonable
from bot.bench.samples import level_of
from bot.cli.common import (
    CHAT_CONTEXT,
    catalog_for,
    fail,
    run_in_context,
    set_json_mode,
    settings,
    usage_errors,
)
from bot.cli.progress import ConsoleProgress, number
from bot.commands import CommandError, help_text, parse_command
from bot.loop.console import print_table
from bot.store.bench_repo import UnknownMeasurementSetError
from bot.store.leases import LeaseHeld, WaitCancelled
from bot.store.models import Measurement
from bot.target.errors import TargetError

__all__ = ["register_bench"]

CONSOLE_ONLY = (
    "console only: --json (JSON on stdout), --chart PATH (PNG), --base-url URL (an unconfigured server)"
)


def register_bench(app: typer.Typer) -> None:
    """Register `bench` on the CLI, replacing the registry's placeholder of the same name."""
    app.command("bench", context_settings=CHAT_CONTEXT)(bench)


def _console_options(words: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Take `--json`, `--chart PATH` and `--base-url URL` off the words; the rest is chat grammar."""
    found: dict[str, Any] = {"json": False, "chart": None, "base_url": None}
    rest: list[str] = []
    items = iter(words)
    for word in items:
        name, has_value, value = word.partition("=")
        if word == "--json":
            found["json"] = True
            set_json_mode(True)
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
    if ctx.args in (["--help"], ["-h"]):
        typer.echo(help_text("bench") + "\n" + CONSOLE_ONLY)
        return
    config = settings()
    try:
        local, words = _console_options(list(ctx.args))
        invocation = parse_command(["bench", *words], catalog=catalog_for(config, words, "bench"))
    except CommandError as exc:
        raise fail(exc.render()) from None
    request = BenchRequest.of(config, invocation, base_url=local["base_url"])
    with usage_errors():
        check_rerun(request)
        setup = plan_bench(config, request) if request.rerun is None else None
    chart = Path(local["chart"]) if local["chart"] else None
    progress = ConsoleProgress(sys.stderr)

    async def work(app_ctx: AppContext) -> tuple[BenchRequest, BenchResult]:
        final, planned = request, setup
        if planned is None:  # `rerun=ID`: the experiment's stored after-set decides the plan
            final = await with_rerun(app_ctx, request)
            planned = plan_bench(config, final)
            typer.echo(
                f"re-running the benchmark of experiment #{request.rerun}: "
                f"compared with {final.compared_with}",
                err=True,
            )
        return final, await run_bench(
            app_ctx,
            planned,
            final,
            actor=console_actor(),
            progress=progress,
            chart_path=(lambda _set_id: chart) if chart is not None else None,
        )

    try:
        with usage_errors():
            request, result = run_in_context(config, work)
    except WaitCancelled as exc:  # `cancel waiter=ID` while it waited: nothing ran
        raise fail(f"error: {exc}", code=1) from None
    except LeaseHeld as exc:
        wait = invocation.options.get("wait", "0")
        hint = f" (waited {wait})" if request.wait_s > 0 else "; bench wait=DURATION waits for it"
        raise fail(f"error: {exc}{hint}", code=1) from None
    except LoadError as exc:
        raise fail(f"error: benchmark failed: {exc}".splitlines()[0]) from None
    except (TargetError, UnknownMeasurementSetError) as exc:  # one line, not a traceback
        raise fail(f"error: {exc}") from None
    except Exception as exc:  # any other target error (SSH, unreachable node) is one line too
        if type(exc).__module__.startswith("bot.target"):
            raise fail(f"error: {exc}") from None
        raise
    if result.lease_lost:
        typer.echo(f"warning: {result.lease_lost} during the run: its figures may be disturbed", err=True)
    comparison: Compared | str | None = result.comparison
    if result.comparison_error is not None:
        assert result.reference is not None
        comparison = f"comparison with set #{result.reference.set.id} failed: {result.comparison_error}"
    chart_text = str(result.chart) if result.chart is not None else None
    if local["json"]:
        typer.echo(json.dumps(_as_json(result.run, comparison, chart_text), indent=2, allow_nan=False))
    else:
        _print(result.run, comparison, chart_text)
    if isinstance(comparison, str):
        message = f"error: {comparison} (set #{result.set_id} is stored)"
        if local["json"]:  # the document above already says `"ok": false` and why
            typer.echo(message, err=True)
            raise typer.Exit(1)
        raise fail(message, code=1)


def _levels(run: BenchRun) -> dict[str, list[Measurement]]:
    """Measurements by level name (`64` for a concurrency, `rate=8` for a rate sweep's level)."""
    levels: dict[str, list[Measurement]] = {}
    for row in run.measurements:
        name = str(row.concurrency) if row.concurrency is not None else level_of(None, row.request_rate)
        levels.setdefault(name, []).append(row)
    return levels


def _mean(rows: list[Measurement], key: str) -> float | None:
    values = [r.metrics[key] for r in rows if isinstance(r.metrics.get(key), int | float)]
    return statistics.fmean(values) if values else None


def print_levels(console: Console, run: BenchRun) -> None:
    """The measurement set as one row per concurrency: means over its repeats."""
    s = run.set
    columns: tuple[str, ...] = ("conc", "reps", "ok/failed", "out tok/s", "cv", "req/s", "TTFT p50", "TTFT p99",
               "TPOT mean", "ITL p50", "ITL p99", "E2E p50", "client")  # fmt: skip
    goodput = any(isinstance(r.metrics.get("goodput"), int | float) for r in run.measurements)
    if goodput:  # a column only when the profile or command set service-level objectives
        columns = (*columns[:-1], "goodput", columns[-1])
    rows: list[tuple[str | Text, ...]] = []
    for level, level_rows in _levels(run).items():
        out = [r.metrics.get("output_throughput") for r in level_rows]
        numbers = [v for v in out if isinstance(v, int | float)]
        cv = (
            statistics.stdev(numbers) / statistics.fmean(numbers)
            if len(numbers) > 1 and statistics.fmean(numbers)
            else None
        )
        bound = sum(1 for r in level_rows if r.client_bound)
        completed = sum(int(r.metrics.get("completed") or 0) for r in level_rows)
        failed = sum(int(r.metrics.get("failed") or 0) for r in level_rows)
        rows.append(
            (
                str(level),
                str(len(level_rows)),
                f"{completed}/{failed}",
                number(_mean(level_rows, "output_throughput")),
                f"{cv:.1%}" if cv is not None else "-",
                number(_mean(level_rows, "request_throughput"), 2),
                number(_mean(level_rows, "median_ttft_ms")),
                number(_mean(level_rows, "p99_ttft_ms")),
                number(_mean(level_rows, "mean_tpot_ms"), 2),
                number(_mean(level_rows, "median_itl_ms"), 2),
                number(_mean(level_rows, "p99_itl_ms"), 2),
                number(_mean(level_rows, "median_e2e_latency_ms")),
                *((number(_mean(level_rows, "goodput"), 2),) if goodput else ()),
                Text(f"CLIENT-BOUND {bound}/{len(level_rows)}", "red") if bound else "ok",
            )
        )
    title = f"measurement set #{s.id}: {s.target}, profile {s.profile}, backend {s.backend}"
    print_table(console, title, columns, rows, right=range(len(columns) - 1))
    console.print(run.workload())


def _print(run: BenchRun, comparison: Compared | str | None, chart: str | None) -> None:
    console = Console(width=None if sys.stdout.isatty() else 150)
    print_levels(console, run)
    console.print("latencies in ms; means over repeats; cv = run-to-run variation of output tok/s")
    if run.set.params.get("http_way"):
        console.print(f"HTTP endpoint: {run.set.params['http_way']}", markup=False)
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
    console.print(f"stored as measurement set #{run.set.id}")


def _as_json(run: BenchRun, comparison: Compared | str | None, chart: str | None) -> Any:
    s = run.set
    return jsonable(
        {
            "ok": not isinstance(comparison, str),
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
