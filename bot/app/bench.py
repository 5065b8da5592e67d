"""`bench`: benchmark a target (or, from a terminal, any server) under its lease, store the set,
compare it with a stored one, draw the chart.

Why the lease: a benchmark puts load on the server, so it never measures a server a `try` is
restarting, and a `try` never judges figures it disturbed (docs/loop.md, Leases). The lease is
taken whenever the load reaches a configured target: always from Slack; from a terminal unless
`--base-url` names a server that is no configured target (there is nothing to lock then).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.app.leased import leased, lost_reason
from bot.app.progress import Progress
from bot.bench.chart import render_chart
from bot.bench.compare_sets import Compared, compare_by_id
from bot.bench.planning import UnknownProfileError, plan_for, profile_name
from bot.bench.run import BenchPlan, BenchRun, run_plan
from bot.bench.verdict import VerdictSettings
from bot.commands import CommandError, Invocation
from bot.config import Settings
from bot.config.schema import parse_duration
from bot.store.bench_repo import LoadedSet, load_set
from bot.target.session import TargetSession

LEASE_STEP = "take the target's lease"


@dataclass(frozen=True)
class BenchRequest:
    """A benchmark as asked for: the chat words' options, and from a terminal `--base-url`."""

    target: str | None
    """A configured target, or with `base_url` the name the set is stored under (None: adhoc)."""
    profile: str | None = None
    concurrency: tuple[int, ...] | None = None
    repeats: int | None = None
    backend: str | None = None
    wait_s: float = 0.0
    compare_to: int | None = None
    base_url: str | None = None
    label: str = ""

    @classmethod
    def of(
        cls, settings: Settings, invocation: Invocation, *, base_url: str | None = None, label: str = ""
    ) -> BenchRequest:
        """The request the words make. Without `--base-url` the target is `target=` or the
        default one; with it, only `target=` (some other server is never filed under the default)."""
        options = invocation.options
        delay = parse_duration(options.get("wait", "0"))  # the grammar checked it: a timedelta
        return cls(
            target=options.get("target") or (None if base_url else settings.default_target),
            profile=options.get("profile"),
            concurrency=tuple(int(c) for c in options["concurrency"].split(","))
            if "concurrency" in options
            else None,
            repeats=int(options["repeats"]) if "repeats" in options else None,
            backend=options.get("backend"),
            wait_s=delay.total_seconds() if isinstance(delay, timedelta) else 0.0,
            compare_to=int(options["compare-to"]) if "compare-to" in options else None,
            base_url=base_url,
            label=label,
        )


@dataclass(frozen=True)
class BenchSetup:
    """The plan, and whether it needs the target's lease."""

    plan: BenchPlan
    leased: bool

    def steps(self, compare_to: int | None) -> list[str]:
        """The steps the benchmark reports, in order (a status card shows them up front)."""
        measure = f"benchmark (profile {self.plan.profile_name}, {self.plan.backend})"
        return [LEASE_STEP, measure, *([f"compare with set #{compare_to}"] if compare_to is not None else [])]


def plan_bench(settings: Settings, request: BenchRequest) -> BenchSetup:
    """The plan; CommandError for what the words got wrong (checked before anything runs)."""
    configured = settings.targets.get(request.target) if request.target else None
    if configured is None and request.base_url is None:
        raise CommandError("bench needs a target (target=NAME or default_target) or --base-url URL")
    try:
        name = profile_name(settings, request.target if configured else None, request.profile)
    except UnknownProfileError as exc:
        raise CommandError(str(exc), usage="bench [profile=NAME]") from None
    backend = request.backend or settings.bench[name].backend
    if backend == "bench_serving" and configured is None:
        raise CommandError("backend=bench_serving runs on a target's node 0: name a configured target")
    plan = plan_for(
        settings,
        request.target or "adhoc",
        profile=name,
        concurrency=request.concurrency,
        repeats=request.repeats,
        backend="bench_serving" if backend == "bench_serving" else "builtin",
        label=request.label,
        base_url=request.base_url,
    )
    needs_lease = configured is not None and (
        request.base_url is None
        or plan.backend == "bench_serving"
        or request.base_url.rstrip("/") == configured.http_base().rstrip("/")
    )
    return BenchSetup(plan, needs_lease)


@dataclass(frozen=True)
class BenchResult:
    """A stored benchmark: the set, the reference it was compared with, the comparison (or why
    it failed), the chart, and why the lease was lost during the run (None: held throughout)."""

    plan: BenchPlan
    run: BenchRun
    reference: LoadedSet | None
    comparison: Compared | None
    comparison_error: str | None
    """`Type: message` of a comparison that could not be made (the sets stay stored)."""
    chart: Path | None
    lease_lost: str | None

    @property
    def set_id(self) -> int:
        assert self.run.set.id is not None  # a benchmark of the app layer is always stored
        return self.run.set.id


async def reference_set(ctx: AppContext, set_id: int | None) -> LoadedSet | None:
    """The set to compare with; AppError when there is none with that id."""
    if set_id is None:
        return None
    found = await ctx.store.run(load_set, ctx.store.store, set_id)
    if found is None:
        raise AppError(f"compare-to={set_id}: no measurement set with that id", usage=True)
    return found


async def run_bench(
    ctx: AppContext,
    setup: BenchSetup,
    request: BenchRequest,
    *,
    actor: str,
    progress: Progress,
    chart_path: Callable[[int], Path] | None = None,
) -> BenchResult:
    """Measure (under the target's lease when the setup needs it: refused at once, or after
    `wait_s`, with LeaseHeld), store the set, compare it, draw the chart to `chart_path(set id)`."""
    plan = setup.plan
    reference = await reference_set(ctx, request.compare_to)
    async with AsyncExitStack() as stack:
        held = None
        if setup.leased:  # first: a busy target is refused before anything is contacted
            await progress.step(0, LEASE_STEP, "running")
            held = await stack.enter_async_context(
                leased(
                    ctx, plan.target, purpose="bench", actor=actor, wait_s=request.wait_s, progress=progress
                )
            )
            await progress.step(0, LEASE_STEP, "ok")
        measure = setup.steps(None)[1]
        await progress.step(1, measure, "running")
        node = None
        if plan.backend == "bench_serving":
            session = await stack.enter_async_context(
                TargetSession.open(plan.target, ctx.settings.targets[plan.target], store=ctx.store)
            )
            node = session.node0
        run = await run_plan(
            plan,
            store=ctx.store,
            node=node,
            on_level=lambda repeat, result: progress.level_done(repeat, plan.repeats, result),
        )
        await progress.step(1, measure, "ok")
        lost = lost_reason(held) if held is not None else None
    comparison, error = None, None
    if reference is not None:
        assert reference.set.id is not None
        assert run.set.id is not None
        await progress.step(2, f"compare with set #{request.compare_to}", "running")
        try:
            comparison = await ctx.store.run(
                compare_by_id,
                ctx.store.store,
                reference.set.id,
                run.set.id,
                VerdictSettings.from_config(ctx.settings.verdicts),
            )
        except (ArithmeticError, ValueError) as exc:  # the measurements stay stored and shown
            error = f"{type(exc).__name__}: {exc}"
        await progress.step(2, f"compare with set #{request.compare_to}", "ok" if error is None else "failed")
    chart = None
    if chart_path is not None and run.set.id is not None:
        chart = chart_path(run.set.id)
        chart.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(
            render_chart,
            run.measurements,
            chart,
            title=f"{plan.target} · profile {plan.profile_name} · set #{run.set.id} ({plan.backend})",
            reference=reference.measurements if reference is not None else (),
            reference_title=f"set #{reference.set.id}" if reference is not None else None,
        )
    return BenchResult(plan, run, reference, comparison, error, chart, lost)
