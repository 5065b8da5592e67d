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
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from bot.app.context import AppContext
from bot.app.decisions import rerun_of
from bot.app.errors import AppError
from bot.app.leased import leased, lost_reason
from bot.app.progress import Progress
from bot.bench.chart import render_chart
from bot.bench.compare_sets import Compared, compare_by_id
from bot.bench.metrics import ServiceLevels
from bot.bench.planning import UnknownProfileError, plan_for, profile_name
from bot.bench.run import BenchPlan, BenchRun, run_plan
from bot.bench.verdict import VerdictSettings
from bot.commands import CommandError, Invocation
from bot.config import Settings
from bot.config.section_base import parse_duration
from bot.loop.steps.measure_steps import routed
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
    rerun: int | None = None
    """`rerun=ID`: re-run experiment ID's benchmark (`with_rerun` fills in its set's profile,
    levels and backend, and compares with that after-set)."""
    compared_with: str | None = None
    """How the set compared with is named in the result (default `set #N`)."""
    dataset: str | None = None
    """`dataset=`: the profile's dataset replaced (`bot.bench.datasets`)."""
    slo: str | None = None
    """`slo=ttft_ms:500,...`: the profile's goodput objectives replaced."""

    @classmethod
    def of(
        cls, settings: Settings, invocation: Invocation, *, base_url: str | None = None, label: str = ""
    ) -> BenchRequest:
        """The request the words make. Without `--base-url` the target is `target=` or the
        default one; with it, only `target=` (some other server is never filed under the default)."""
        options = invocation.options
        delay = parse_duration(options.get("wait", "0"))  # the grammar checked it: a timedelta
        return cls(
            target=options.get("target")
            or (None if base_url or "rerun" in options else settings.default_target),
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
            rerun=int(options["rerun"]) if "rerun" in options else None,
            dataset=options.get("dataset"),
            slo=options.get("slo"),
        )

    def reference_name(self) -> str:
        """The stored set compared with, in words (the re-run of an experiment names it)."""
        return self.compared_with or f"set #{self.compare_to}"


@dataclass(frozen=True)
class BenchSetup:
    """The plan, and whether it needs the target's lease."""

    plan: BenchPlan
    leased: bool

    def steps(self, compare_to: int | None, compared_with: str | None = None) -> list[str]:
        """The steps the benchmark reports, in order (a status card shows them up front)."""
        measure = f"benchmark (profile {self.plan.profile_name}, {self.plan.backend})"
        compare = f"compare with {compared_with or f'set #{compare_to}'}"
        return [LEASE_STEP, measure, *([compare] if compare_to is not None else [])]


BENCH_DATA_USAGE = (
    "bench [dataset=random|generated-shared-prefix|sharegpt:FILE|jsonl:FILE] "
    "[slo=ttft_ms:N,tpot_ms:N,e2e_ms:N]"
)

RERUN_TAKES = ("profile", "concurrency", "backend", "compare_to", "base_url", "dataset")
"""What `rerun=ID` sets itself: asked for beside it, the words contradict each other."""


def check_rerun(request: BenchRequest) -> None:
    """CommandError when `rerun=ID` comes with what it takes from the experiment's set."""
    if request.rerun is None or request.compared_with is not None:  # none, or resolved (`with_rerun`)
        return
    given = [name for name in RERUN_TAKES if getattr(request, name) is not None]
    if given:
        words = ", ".join("--base-url" if n == "base_url" else n.replace("_", "-") + "=" for n in given)
        raise CommandError(
            f"rerun= re-runs the experiment's own benchmark (its set's profile, levels and backend, "
            f"compared with its after-set): drop {words}",
            usage="bench rerun=ID [repeats=N] [wait=DURATION] [target=NAME]",
        )


async def with_rerun(ctx: AppContext, request: BenchRequest) -> BenchRequest:
    """The request a `rerun=ID` makes: experiment ID's after-set's profile, levels and backend,
    compared with that set, on the experiment's target (AppError when it has no such set)."""
    if request.rerun is None:
        return request
    check_rerun(request)
    found = await rerun_of(ctx, request.rerun, request.target)
    stored = found.after.set
    return replace(
        request,
        target=found.experiment.target,
        profile=stored.profile or None,
        concurrency=found.concurrency,
        backend=stored.backend or None,
        compare_to=found.set_id,
        compared_with=found.describe(),
        label="; ".join(x for x in (request.label, f"re-run of experiment #{request.rerun}") if x),
    )


def plan_bench(settings: Settings, request: BenchRequest) -> BenchSetup:
    """The plan; CommandError for what the words got wrong (checked before anything runs)."""
    check_rerun(request)
    configured = settings.targets.get(request.target) if request.target else None
    if configured is None and request.base_url is None:
        raise CommandError("bench needs a target (target=NAME or default_target) or --base-url URL")
    try:
        name = profile_name(settings, request.target if configured else None, request.profile)
    except UnknownProfileError as exc:
        raise CommandError(str(exc), usage="bench [profile=NAME]") from None
    profile = settings.bench[name]
    backend = request.backend or profile.backend
    if backend == "bench_serving" and configured is None:
        raise CommandError("backend=bench_serving runs on a target's node 0: name a configured target")
    if request.concurrency is not None and profile.request_rates is not None:
        raise CommandError(
            f"profile {name} sweeps request rates (request_rates): its levels are rates, not concurrency=",
            usage="bench [profile=NAME] [repeats=N]",
        )
    try:
        slo = ServiceLevels.parse(request.slo) if request.slo is not None else None
        plan = plan_for(
            settings,
            request.target or "adhoc",
            profile=name,
            concurrency=request.concurrency,
            repeats=request.repeats,
            backend="bench_serving" if backend == "bench_serving" else "builtin",
            label=request.label,
            base_url=request.base_url,
            dataset=request.dataset,
            slo=slo,
        )
    except ValueError as exc:  # DatasetError, NotForBenchServingError, a bad slo=
        raise CommandError(str(exc), usage=BENCH_DATA_USAGE) from None
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


def check_same_workload(reference: LoadedSet, plan: BenchPlan) -> None:
    """AppError when the set compared with was measured sending another dataset: a shared-prefix
    workload against random prompts would read as the server's change. A set stored before
    datasets existed sent `random`."""
    stored = (reference.set.params or {}).get("dataset") or "random"
    sending = plan.dataset_sent().describe()
    if stored != sending:
        raise AppError(
            f"compare-to={reference.set.id}: that set was measured with dataset {stored}, this "
            f"benchmark sends {sending}; only sets of the same dataset are compared",
            usage=True,
        )


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
    if reference is not None:
        check_same_workload(reference, plan)
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
        if plan.target in ctx.settings.targets:  # a configured server: reached by the session's route
            session = await stack.enter_async_context(
                TargetSession.open(plan.target, ctx.settings.targets[plan.target], store=ctx.store)
            )
            plan = await routed(plan, session)
            node = session.node0 if plan.backend == "bench_serving" else None
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
        compare_step = f"compare with {request.reference_name()}"
        await progress.step(2, compare_step, "running")
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
        await progress.step(2, compare_step, "ok" if error is None else "failed")
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
