"""Actions that measure and judge: benchmark a start, compare with the reference, keep or revert.

The verdict comes from `bot.bench.verdict.compare`: capacity exactly (the effective
`max_running_requests` of both starts), throughput and latency with statistics, so a capacity
cut is a regression even when throughput is within noise (the seeds' case).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from bot.bench.chart import render_chart
from bot.bench.compare_sets import Compared, compare_by_id, save_comparison, side_of
from bot.bench.planning import UnknownProfileError, plan_for
from bot.bench.power import Sizing, size_reference
from bot.bench.run import BenchPlan, BenchRun, run_plan
from bot.bench.samples import level_of
from bot.bench.verdict import ComparisonResult, VerdictSettings
from bot.loop.actions import StepContext, action
from bot.loop.expectations import evaluate_all, load_measured, results_table
from bot.loop.steps.common import (
    expectations_of,
    fmt,
    is_server_metric,
    rests_on,
    snapshot_value,
    target_of,
)
from bot.loop.steps.schedule_steps import run_thread
from bot.loop.steps.target_steps import back_to_before
from bot.sglang.expectation import ExpectationResult
from bot.store.bench_repo import LoadedSet
from bot.store.models import MeasurementSet, utcnow
from bot.store.snapshots import get_snapshot
from bot.target.evidence import ChartBlock, ComparisonRow, MetricComparison, TableBlock, VerdictBlock
from bot.target.known_good import set_known_good
from bot.target.session import TargetSession

VERDICTS = {
    "improved": "improved",
    "regressed": "regressed",
    "no effect": "no-effect",
    "undecided": "inconclusive",
}


async def routed(plan: BenchPlan, ts: TargetSession) -> BenchPlan:
    """`plan` sent the way the session reaches node 0's HTTP server (direct, or an SSH forward)."""
    route = await ts.http_route()
    return plan.reached_through(ts.target.http_base(), route.base_url, route.on_node, route.described)


async def bench_plan(ctx: StepContext, label: str, snapshot_id: int | None, profile: str | None) -> BenchPlan:
    """The plan of the experiment's target, sent by the session's HTTP route."""
    target_of(ctx)  # a configured target, or the step fails naming it
    try:
        plan = plan_for(
            ctx.settings,
            ctx.target,
            profile=profile,
            label=f"experiment #{ctx.experiment_id} {label}",
            snapshot_id=snapshot_id,
        )
    except UnknownProfileError as exc:
        raise ValueError(str(exc)) from None
    return await routed(plan, ctx.session())


@action(
    "measure",
    summary="Benchmark the running start with the profile; store the measurement set",
    mutating=True,
)
async def measure(
    ctx: StepContext,
    *,
    label: str = "after",
    profile: str | None = None,
    only_if_needed: bool = False,
    size: bool = False,
) -> dict[str, Any]:
    """`size=True` (a try's before side): after the profile's repeats, add as many as its own
    noise asks for (`bot.bench.power.size_reference`), while this start still runs."""
    if ctx.state.restart.start_failed:
        return {"skipped": "the start failed"}
    if only_if_needed and all(is_server_metric(e.metric) for e in expectations_of(ctx)):
        return {"skipped": "every expectation is read from the start itself; no benchmark needed"}
    start = ctx.state.start(label)  # before, after, reference; another label has a set only
    measured = start.set_id if start is not None else ctx.state.other_set_ids.get(label)
    if measured is not None:
        return {"set_id": measured, "reused": True}
    snapshot_id = start.snapshot_id if start is not None else None
    plan = await bench_plan(ctx, label, snapshot_id, profile)
    node = ctx.session().node0 if plan.backend == "bench_serving" else None
    run = await run_plan(plan, store=ctx.store, node=node)
    if start is not None:
        start.set_id = run.set.id
    elif run.set.id is not None:
        ctx.state.other_set_ids[label] = run.set.id
    result: dict[str, Any] = {"set_id": run.set.id}
    note = "means over repeats"
    if size and run.set.id is not None:
        sizing = _size(ctx, run)
        result["sizing"] = sizing.to_json()
        note = f"sized for power: {sizing.reason}"
        if sizing.more:
            more = replace(plan, repeats=sizing.more)
            run = await run_plan(
                more, store=ctx.store, node=node, extend=run.set.id, first_repeat=sizing.measured
            )
            note += f"; {sizing.more} more repeats run"
    await _emit_set(ctx, label, run.set, plan, f"{note}; {run.workload()}")
    result["client_bound"] = run.set.client_bound
    return result


def _size(ctx: StepContext, run: BenchRun) -> Sizing:
    """The before side's repeats, sized from the set `run` just measured and stored.

    Why from the run rather than the store: the run of a new set holds its final row and every
    measurement it stored, as stored (metrics made JSON before the insert), in the order
    `load_set` reads a level's (by repeat); the sizing reads only their metrics and client
    flags, not the start's snapshot. Reading the set, its measurements and the snapshot back
    was three statements for the same answer."""
    loaded = LoadedSet(run.set, tuple(run.measurements))
    return size_reference(side_of(loaded), VerdictSettings.from_config(ctx.settings.verdicts))


async def _emit_set(ctx: StepContext, label: str, mset: MeasurementSet, plan: BenchPlan, note: str) -> None:
    rows = []
    levels = mset.summary.get("levels", [])
    goodput = any(isinstance(level.get("goodput"), int | float) for level in levels)
    for level in levels:
        rows.append(
            (
                level_of(level["concurrency"], level.get("request_rate")),
                str(level["repeats"]),
                fmt(level.get("output_throughput")),
                fmt(level.get("median_ttft_ms")),
                fmt(level.get("mean_tpot_ms")),
                *((fmt(level.get("goodput")),) if goodput else ()),
                f"{level['completed']}/{level['failed']}",
                "CLIENT-BOUND" if level.get("client_bound") else "ok",
            )
        )
    accepted = [
        f"{level_of(level['concurrency'], level.get('request_rate'))}: {level['accept_length']:.2f}"
        for level in mset.summary.get("levels", [])
        if isinstance(level.get("accept_length"), int | float)
    ]
    if accepted:  # ITL is per token; under speculation a chunk carries about this many
        note += f"; server's speculative accept length {', '.join(accepted)}"
    await ctx.emit(
        TableBlock(
            f"Benchmark ({label}): set #{mset.id}, profile {plan.profile_name}, backend {plan.backend}",
            (
                "level",
                "repeats",
                "out tok/s",
                "TTFT p50 ms",
                "TPOT ms",
                *(("goodput req/s",) if goodput else ()),
                "ok/failed",
                "client",
            ),
            tuple(rows),
            note,
        )
    )


def _capacity_rows(before: Any, after: Any) -> list[ComparisonRow]:
    rows = []
    for metric, shown in (
        ("parsed.max_running_requests", "max_running_requests (parsed, server_args)"),
        ("max_running_requests", "max_running_requests (effective)"),
        ("max_running_requests_per_dp", "max_running_requests per DP rank (effective, DP attention)"),
        ("max_total_num_tokens", "max_total_num_tokens"),
        ("available_gpu_mem_gb", "available_gpu_mem_gb"),
    ):
        a, b = snapshot_value(before, metric), snapshot_value(after, metric)
        if a is None and b is None:
            continue
        change = f"{b - a:+g}" if isinstance(a, int | float) and isinstance(b, int | float) else ""
        rows.append(ComparisonRow(shown, fmt(a), fmt(b), change, "same" if a == b else "changed"))
    return rows


@action(
    "compare",
    summary="Judge the start and its benchmark against the reference (capacity exactly, throughput with statistics)",
)
async def compare(ctx: StepContext, *, profile: str | None = None) -> dict[str, Any]:
    """The after side is extended look by look (`_sequential`); the evidence states the power reached."""
    if ctx.state.restart.start_failed:
        return {"skipped": "the start failed", "verdict": "failed-to-start"}
    before = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.before.snapshot_id)
    after = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.after.snapshot_id)
    await ctx.emit(
        MetricComparison(
            "Capacity: before vs after, parsed vs effective side by side",
            tuple(_capacity_rows(before, after)),
            "parsed = what server_args printed; effective = the capacity line and /server_info",
        )
    )
    reference, candidate = ctx.state.before.set_id, ctx.state.after.set_id
    verdict = "inconclusive"
    lines: list[str] = []
    decided_by = "no benchmark on both sides: the statistics did not run"
    if reference is not None and candidate is not None:
        settings = VerdictSettings.from_config(ctx.settings.verdicts)
        compared = await _sequential(ctx, reference, candidate, settings, profile)
        verdict = VERDICTS[compared.result.verdict]
        lines = compared.result.lines()
        ctx.state.conclusion.comparison_id = compared.row.id if compared.row else None
        decided_by = _decided_by(compared.result, ctx.settings.verdicts.capacity)
        if compared.sets is not None:
            await _chart(ctx, *compared.sets)
    conclusion = ctx.state.conclusion
    conclusion.cite(
        snapshots=(ctx.state.before.snapshot_id, ctx.state.after.snapshot_id), sets=(reference, candidate)
    )
    results = await _expectations(ctx)
    failed = [r for r in results if r.failed]
    unmeasured = [r for r in results if r.outcome == "not measured"]
    if failed:
        lines.append("an expectation of the command failed: " + "; ".join(r.describe() for r in failed))
        if verdict in ("improved", "no-effect", "inconclusive"):
            decided_by = failed[0].describe() + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")
            verdict = "regressed"
    if unmeasured:
        lines.append("not measured: " + "; ".join(r.describe() for r in unmeasured))
    lines.append(rests_on(ctx))
    conclusion.verdict = verdict
    headline = _headline(verdict, decided_by, before, after)
    conclusion.summary = headline
    await ctx.emit(VerdictBlock(verdict, headline, tuple(lines)))
    return {"verdict": verdict, "comparison_id": conclusion.comparison_id, "decided_by": decided_by}


async def _sequential(
    ctx: StepContext, reference: int, candidate: int, settings: VerdictSettings, profile: str | None
) -> Compared:
    """Compare; while the verdict asks for more repeats of the after side (the looks of
    `settings.plan()` counted on it; the before side was sized before the restart and is gone),
    run them on the running start into the same set and compare again. The last comparison is
    stored, with the power it reached in its notes."""
    while True:
        compared = await ctx.store.run(
            compare_by_id, ctx.store.store, reference, candidate, settings, save=False, looks_on="candidate"
        )
        more = compared.result.more_repeats
        if more is None or compared.sides is None:
            break
        have = compared.sides[1].repeats()
        plan = replace(await bench_plan(ctx, "after", ctx.state.after.snapshot_id, profile), repeats=more)
        node = ctx.session().node0 if plan.backend == "bench_serving" else None
        extended = await run_plan(plan, store=ctx.store, node=node, extend=candidate, first_repeat=have)
        await _emit_set(
            ctx,
            "after",
            extended.set,
            plan,
            f"undecided at {have} repeats of the after side: {more} more, then look again",
        )
    row = await ctx.store.run(
        save_comparison,
        ctx.store.store,
        compared.result,
        reference_id=reference,
        candidate_id=candidate,
        settings=settings,
    )
    return Compared(compared.result, row, compared.power, compared.sides, compared.sets)


async def _chart(ctx: StepContext, before: LoadedSet, after: LoadedSet) -> None:
    """Before (dashed grey) and after, per concurrency: the picture a reader checks the verdict by,
    drawn from the sets as the verdict read them (its last look)."""
    reference, candidate = before.set.id, after.set.id
    path = ctx.cache_dir.parent / "evidence" / f"experiment-{ctx.experiment_id}-bench.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(
        render_chart,
        after.measurements,
        path,
        title=f"experiment #{ctx.experiment_id}: after (set #{candidate})",
        reference=before.measurements,
        reference_title=f"before (set #{reference})",
    )
    await ctx.emit(
        ChartBlock(
            "Benchmark: before vs after",
            str(path),
            "output tok/s and TTFT/ITL percentiles per concurrency; before dashed",
        )
    )


def _decided_by(result: ComparisonResult, capacity_metrics: Mapping[str, str]) -> str:
    """What decided the statistics' verdict, in words: the capacity guard or the statistics, naming
    the cell that carries it ("the capacity guard decided (max_running_requests: 48 -> 26 ...)")."""
    word = result.verdict
    guard = getattr(result, "guarded_by", None)
    capacity = {c.metric: c for c in getattr(result, "capacity", ())}
    if word == "undecided":
        return "the statistics did not decide" + (f" ({guard} undecided)" if guard else "")
    if guard in capacity or (guard is not None and guard in capacity_metrics):
        cell = capacity.get(guard)
        return "the capacity guard decided" + (f" ({cell.describe()})" if cell is not None else f" ({guard})")
    return "the statistics decided" + (f" ({guard})" if guard else "")


def _headline(verdict: str, decided_by: str, before: Any, after: Any) -> str:
    """The verdict, what decided it, then the capacity of both starts as context: the headline
    never says regressed unless the capacity guard, the statistics or a failed expectation did."""
    a = snapshot_value(before, "max_running_requests")
    b = snapshot_value(after, "max_running_requests")
    return f"{verdict}: {decided_by}; effective max_running_requests {fmt(a)} -> {fmt(b)}"


async def _expectations(ctx: StepContext) -> list[ExpectationResult]:
    """The command's own expectations on the new start, relative ones against the start before the
    restart (docs/commands.md); the table names the reference each used, the state keeps them."""
    expectations = expectations_of(ctx)
    if not expectations:
        return []
    now = await load_measured(
        ctx.store, "the start after this try", ctx.state.after.snapshot_id, ctx.state.after.set_id
    )
    before = await load_measured(
        ctx.store, "the start before this try", ctx.state.before.snapshot_id, ctx.state.before.set_id
    )
    results = evaluate_all(expectations, now, before)
    ctx.state.conclusion.expectations = [r.to_json() for r in results]
    await ctx.emit(results_table(results, now))
    return results


async def _ask(ctx: StepContext, verdict: str) -> dict[str, Any]:
    """`policy.on_regression = "ask"`: leave the change applied and the decision pending (kept
    unset), with the deadline and the default action that `bot.app.ask` applies if nobody answers."""
    policy = target_of(ctx).policy
    deadline = utcnow() + policy.ask_timeout
    ctx.state.conclusion.kept = None
    ctx.state.conclusion.ask_deadline = deadline.isoformat()
    ctx.state.conclusion.ask_default = policy.ask_default
    ctx.state.conclusion.ask_channel, ctx.state.conclusion.ask_thread = await run_thread(ctx)
    question = f"Keep or revert? If nobody answers by {deadline:%H:%M} UTC, flagbot will {policy.ask_default}"
    await ctx.emit(VerdictBlock(verdict, f"the change is still applied; {question}", ()))
    return {
        "kept": None,
        "why": "regressed; the target's policy on regression is 'ask': waiting for Keep or Revert",
        "ask_deadline": deadline.isoformat(),
        "ask_default": policy.ask_default,
    }


@action("decide", summary="Keep or revert by the verdict and the target's policy", mutating=True)
async def decide(ctx: StepContext, *, keep: str = "auto") -> dict[str, Any]:
    verdict = ctx.state.conclusion.verdict
    if verdict is None:
        verdict = "inconclusive"
    if ctx.state.restart.start_failed:
        return {"kept": False, "why": "the start failed (already rolled back per policy)"}
    policy = target_of(ctx).policy.on_regression
    if keep == "always":
        kept, why = True, "keep=always"
    elif keep == "never":
        kept, why = False, "keep=never"
    elif verdict == "regressed" and policy == "ask":
        return await _ask(ctx, verdict)
    elif verdict == "regressed":
        kept, why = policy == "keep", f"regressed; the target's policy on regression is {policy!r}"
    else:
        kept, why = True, f"{verdict}: kept"
    ctx.state.conclusion.kept = kept
    if kept:
        snapshot_id = ctx.state.after.snapshot_id
        if snapshot_id is not None:
            await ctx.store.run(set_known_good, ctx.store.store, ctx.target, snapshot_id)
        await ctx.emit(VerdictBlock(verdict, f"kept the change ({why})", ()))
        return {"kept": True, "why": why}
    ok, capacity = await back_to_before(ctx, reason=f"revert ({why})")
    await ctx.emit(
        VerdictBlock(
            verdict,
            f"reverted the change ({why}); "
            + (
                f"back to the flags from before, healthy (max_running_requests {capacity})"
                if ok
                else "the server did not come back"
            ),
            (),
        )
    )
    if not ok:
        raise RuntimeError("the revert did not bring the server back healthy")
    return {"kept": False, "why": why, "max_running_requests": capacity}
