"""Actions for revert, verify and baseline: plan the flags to go back to, observe, check, pin.

Revert is the seeds' second write-up: take a change back, then *verify* that the effective
values are the baseline's again (not merely that the flag is gone), with the numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.loop.actions import StepContext, action
from bot.loop.expectations import Measured, evaluate_all, is_server_metric, load_measured
from bot.loop.run_state import RunState
from bot.loop.steps.common import (
    canonical_of,
    expectations_of,
    flags_from_json,
    fmt,
    rests_on,
    snapshot_value,
)
from bot.loop.steps.target_steps import emit_observation
from bot.sglang.change import Change
from bot.sglang.expectation import Expectation, ExpectationResult, parse_expectation
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store.baselines import current_baseline, pin_baseline
from bot.store.experiments import get_experiment, list_experiments
from bot.store.snapshots import get_snapshot
from bot.target.evidence import ComparisonRow, MetricComparison, TextBlock, VerdictBlock
from bot.target.known_good import known_good
from bot.target.observe import observe
from bot.target.unit import read_unit

CHECKED = ("max_running_requests", "max_total_num_tokens", "parsed.max_running_requests")
TOKENS_TOLERANCE = 0.02
"""max_total_num_tokens moves a little between starts (free memory measured at each start)."""


async def reference_snapshot(ctx: StepContext) -> Any:
    """The start to compare with: the pinned baseline's snapshot, else the known-good one."""
    baseline = await ctx.store.run(current_baseline, ctx.store.store, ctx.target)
    if baseline is not None:
        ctx.state.baseline_id = baseline.id
        ctx.state.reference.set_id = baseline.set_id
        return await ctx.store.run(get_snapshot, ctx.store.store, baseline.snapshot_id)
    return await ctx.store.run(known_good, ctx.store.store, ctx.target)


def _latest_kept_try(store: Any, target: str) -> Any:
    """The newest try whose change is still on the target (kept, and not reverted since)."""
    reverted = set()
    for experiment in list_experiments(store, target, limit=200):
        if experiment.playbook == "revert" and experiment.status == "succeeded":
            reverted.add(RunState.load(experiment.state).plan.reverting_experiment)
        tried = experiment.playbook == "try" and experiment.id not in reverted
        if tried and RunState.load(experiment.state).conclusion.kept:
            return experiment
    return None


def _identity(name: str) -> str:
    return name


def _inverse(
    change: Change, before: FlagSet, current: list[FlagItem], canonical: Callable[[str], str] = _identity
) -> list[FlagItem]:
    """`current` with `change` undone; `before` holds the values it replaced. Names are compared
    canonically (`--tp` in the unit is the `--tp-size` a change names)."""
    flag = change.flag

    def same(item: FlagItem) -> bool:
        return canonical(item.flag) == flag

    present = [item for item in current if same(item)]
    old = [item for item in before.items if same(item)]
    kept = [item for item in current if not same(item)]
    if change.op == "add":
        return kept
    if change.op == "remove":
        return current if present else [*current, *old]
    if change.op == "set" and old:  # put the old value back where the flag is
        out, done = [], False
        for item in current:
            if same(item):
                if not done:
                    out.extend(old)
                    done = True
                continue
            out.append(item)
        return out if done else [*current, *old]
    return current


def _canonical_of(ctx: StepContext) -> Callable[[str], str]:
    """The target's flag names made canonical (a name SGLang does not know stays as written)."""
    return canonical_of(ctx)


@action(
    "plan_revert",
    summary="Work out the flags to go back to: an experiment's change undone, flags removed, or the baseline",
)
async def plan_revert(
    ctx: StepContext, *, what: str | None = None, flags: str | None = None
) -> dict[str, Any]:
    ts = ctx.session()
    names = [name for name in (flags or "").replace(",", " ").split() if name]
    view = await read_unit(ts.node0)
    current = list(view.flags.items)
    env = dict(view.env)
    reference = await reference_snapshot(ctx)
    ctx.state.reference.snapshot_id = reference.id if reference is not None else None
    canonical = _canonical_of(ctx)
    if names:
        names = [canonical(name) for name in names]
        unknown = [flag for flag in names if flag not in {canonical(item.flag) for item in current}]
        if unknown:
            raise ValueError(f"not in the current flags: {', '.join(unknown)}")
        base = flags_from_json(reference.requested_flags) if reference is not None else FlagSet(())
        for flag in names:
            current = _inverse(Change("add", flag), FlagSet(()), current, canonical)
            current += [item for item in base.items if canonical(item.flag) == flag]
        described = "remove " + ", ".join(names)
    elif what == "baseline":
        if reference is None:
            raise LookupError("no baseline pinned and no known-good start yet: `baseline pin` first")
        current = list(flags_from_json(reference.requested_flags).items)
        env = dict(reference.environment)
        described = f"the baseline's flags (snapshot #{reference.id})"
    else:
        experiment = (
            await ctx.store.run(get_experiment, ctx.store.store, int(what))
            if what
            else await ctx.store.run(_latest_kept_try, ctx.store.store, ctx.target)
        )
        if experiment is None or experiment.playbook != "try":
            raise LookupError(f"no try experiment {'#' + what if what else 'on ' + ctx.target} to revert")
        if experiment.target != ctx.target:  # its flags are another target's: never written here
            raise ValueError(
                f"experiment #{experiment.id} ran on target {experiment.target}, not {ctx.target}: a revert "
                f"acts only on the experiment's own target (`revert {experiment.id} target={experiment.target}`)"
            )
        tried = RunState.load(experiment.state)
        undecided = tried.conclusion.kept is None and tried.restart.applied  # asked, or never decided
        if not tried.conclusion.kept and not undecided:
            raise ValueError(f"experiment #{experiment.id}'s change was not kept; nothing to revert")
        before = tried.before.flags or FlagSet(())
        old_env = tried.before.env or {}
        for raw in reversed(experiment.params.get("changes") or []):
            change = Change.from_json(raw)
            if change.op == "env-set" and change.env_name:
                if change.env_name in old_env:
                    env[change.env_name] = old_env[change.env_name]
                else:
                    env.pop(change.env_name, None)
            elif change.op == "env-unset" and change.env_name:
                env[change.env_name] = old_env.get(change.env_name, "")
            else:
                current = _inverse(change, before, current, canonical)
        described = f"experiment #{experiment.id}'s change undone"
        ctx.state.plan.reverting_experiment = experiment.id
    new = FlagSet(tuple(current))
    if new == view.flags and env == dict(view.env):
        raise ValueError("the target already runs these flags; nothing to revert")
    ctx.state.plan.flags = new
    ctx.state.plan.env = env
    ctx.state.before.flags = view.flags
    ctx.state.before.env = dict(view.env)
    await ctx.emit(TextBlock(f"revert to {described}:\n{' '.join(new.argv())}", "Revert plan"))
    return {"flags": new.argv(), "what": described}


@action(
    "verify_back",
    summary="Check that the effective values are the baseline's again (pass/fail/not measured with the numbers)",
)
async def verify_back(ctx: StepContext) -> dict[str, Any]:
    if ctx.state.restart.start_failed:
        ctx.state.conclusion.verdict = "fail"
        ctx.state.conclusion.summary = "the start failed: nothing to verify"
        return {"verdict": "fail"}
    reference = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.reference.snapshot_id)
    after = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.after.snapshot_id)
    conclusion = ctx.state.conclusion
    conclusion.cite(snapshots=(ctx.state.reference.snapshot_id, ctx.state.after.snapshot_id))
    rows, failed, unmeasured = [], [], []
    for metric in CHECKED:
        want, got = snapshot_value(reference, metric), snapshot_value(after, metric)
        if want is None and got is None:
            continue
        if want is None or got is None:
            side = "the baseline" if want is None else "this start"
            unmeasured.append(f"{metric} (no value on {side})")
            rows.append(ComparisonRow(metric, fmt(want), fmt(got), f"no value on {side}", "not measured"))
            continue
        same = want == got
        if (
            metric == "max_total_num_tokens"
            and isinstance(want, int | float)
            and isinstance(got, int | float)
        ):
            same = abs(got - want) <= TOKENS_TOLERANCE * max(1.0, abs(want))
        if not same:
            failed.append(metric)
        rows.append(
            ComparisonRow(metric, fmt(want), fmt(got), "" if same else "differs", "pass" if same else "fail")
        )
    results = await _evaluate_expectations(ctx, after_name="the reverted start")
    failed += [str(r.expectation) for r in results if r.failed]
    unmeasured += [str(r.expectation) for r in results if r.outcome == "not measured"]
    a, b = snapshot_value(reference, "max_running_requests"), snapshot_value(after, "max_running_requests")
    if reference is None:
        verdict = "not-measured"
        summary = "not measured: no baseline and no known-good start to compare with (`baseline pin` first)"
    elif failed:
        verdict = "fail"
        summary = f"effective max_running_requests {fmt(b)} (baseline {fmt(a)}): fail ({', '.join(failed)})"
    elif not any(row.verdict == "pass" for row in rows) and not any(r.passed for r in results):
        verdict = "not-measured"  # nothing was compared: never a pass by default
        summary = f"not measured: {', '.join(unmeasured) or 'no effective value on either side'}"
    else:
        verdict = "pass"
        summary = f"effective max_running_requests {fmt(b)} (baseline {fmt(a)}): pass"
        if unmeasured:
            summary += f"; not measured: {', '.join(unmeasured)}"
    conclusion.verdict = verdict
    conclusion.failed_metrics = failed
    conclusion.summary = summary
    await ctx.emit(MetricComparison("Back to the baseline? (baseline vs now)", tuple(rows)))
    await ctx.emit(VerdictBlock(verdict, summary, (rests_on(ctx),)))
    return {"verdict": verdict}


async def reference_measured(ctx: StepContext) -> Measured:
    """The reference of verify, revert and the checks: the pinned baseline (its snapshot and set),
    else the known-good start (a snapshot, no set); `reference_snapshot` must have run."""
    if ctx.state.baseline_id is not None:
        name = f"baseline #{ctx.state.baseline_id}"
    elif ctx.state.reference.snapshot_id is not None:
        name = "the known-good start (no baseline pinned)"
    else:
        return Measured("no reference", missing="no baseline pinned and no known-good start")
    return await load_measured(
        ctx.store,
        name,
        ctx.state.reference.snapshot_id,
        ctx.state.reference.set_id,
    )


async def _evaluate_expectations(
    ctx: StepContext, *, after_name: str, expectations: list[Expectation] | None = None
) -> list[ExpectationResult]:
    """The command's expectations on the start it judged, relative ones against the baseline; the
    table (with the reference column) is emitted and the results kept in the conclusion."""
    expectations = expectations_of(ctx) if expectations is None else expectations
    if not expectations:
        return []
    now = await load_measured(ctx.store, after_name, ctx.state.after.snapshot_id, ctx.state.after.set_id)
    reference = await reference_measured(ctx)
    results = evaluate_all(expectations, now, reference)
    ctx.state.conclusion.expectations = [r.to_json() for r in results]
    ctx.state.conclusion.cite(
        snapshots=(now.snapshot_id, reference.snapshot_id), sets=(now.set_id, reference.set_id)
    )
    rows = []
    for result in results:
        metric = result.expectation.metric
        parsed = (
            snapshot_value(now.snapshot, f"parsed.{metric}")
            if is_server_metric(metric) and not metric.startswith("parsed.")
            else None
        )
        rows.append(
            ComparisonRow(
                f"{result.expectation}" + (f" (parsed {fmt(parsed)})" if parsed is not None else ""),
                fmt(reference.value(metric)),
                fmt(result.actual),
                f"{result.why}" if result.source else f"absolute; {result.why}",
                result.outcome,
            )
        )
    await ctx.emit(
        MetricComparison(
            f"Expectations: {reference.label} vs now",
            tuple(rows),
            f"now = {now.label} (effective values); a relative expectation (%) is judged against "
            f"{reference.name}",
        )
    )
    return results


@action("observe_now", summary="Re-read the running start without restarting it")
async def observe_now(ctx: StepContext) -> dict[str, Any]:
    obs = await observe(ctx.session(), cache_dir=ctx.cache_dir)
    await emit_observation(ctx, obs)
    ctx.state.after.snapshot_id = obs.snapshot_id
    if ctx.state.before.snapshot_id is None:
        ctx.state.before.snapshot_id = obs.snapshot_id
    return {"snapshot_id": obs.snapshot_id, "healthy": obs.healthy}


@action(
    "check_expectations",
    summary="Each expectation against the current start, relative ones against the baseline (or the baseline's capacity)",
)
async def check_expectations(ctx: StepContext) -> dict[str, Any]:
    reference = await reference_snapshot(ctx)
    if reference is not None:
        ctx.state.reference.snapshot_id = reference.id
    expectations = expectations_of(ctx)
    if not expectations:
        want = snapshot_value(reference, "max_running_requests")
        if want is None:
            raise LookupError("no expectation given and no baseline to compare with: `baseline pin` first")
        expectations = [parse_expectation(f"max_running_requests>={want}")]
    results = await _evaluate_expectations(ctx, after_name="the running start", expectations=expectations)
    failed = [r.expectation.metric for r in results if r.failed]
    unmeasured = [r for r in results if r.outcome == "not measured"]
    passed = [r for r in results if r.passed]
    if failed:
        verdict = "fail"
    elif unmeasured and not passed:
        verdict = "not-measured"
    else:
        verdict = "pass"
    conclusion = ctx.state.conclusion
    conclusion.verdict = verdict
    conclusion.failed_metrics = failed
    held = f"{len(passed)}/{len(results)} expectations hold"
    if failed:
        held += "; failed: " + "; ".join(r.describe() for r in results if r.failed)
    if unmeasured:
        held += "; not measured: " + "; ".join(str(r.expectation) for r in unmeasured)
    conclusion.summary = held
    details = [r.describe() for r in results] + [rests_on(ctx)]
    await ctx.emit(VerdictBlock(verdict, held, tuple(details)))
    return {"verdict": verdict, "failed": failed}


@action("pin", summary="Pin the current start and its measurement as the target's baseline")
async def pin(ctx: StepContext, *, note: str = "") -> dict[str, Any]:
    snapshot_id = ctx.state.after.snapshot_id
    if snapshot_id is None:
        raise RuntimeError("nothing observed to pin")
    row = await ctx.store.run(
        pin_baseline,
        ctx.store.store,
        target=ctx.target,
        snapshot_id=snapshot_id,
        set_id=ctx.state.after.set_id,
        note=note,
        pinned_by=ctx.actor,
    )
    snap = await ctx.store.run(get_snapshot, ctx.store.store, snapshot_id)
    capacity = snapshot_value(snap, "max_running_requests")
    ctx.state.conclusion.verdict = "pinned"
    ctx.state.conclusion.cite(snapshots=(snapshot_id,), sets=(row.set_id,))
    summary = ctx.state.conclusion.summary = (
        f"baseline #{row.id}: snapshot #{snapshot_id}, set #{row.set_id}, max_running_requests {fmt(capacity)}"
    )
    await ctx.emit(TextBlock(f"{summary} ({rests_on(ctx)})", "Baseline pinned"))
    return {"baseline_id": row.id}
