"""Actions that think before and after a restart: preflight, ranked hypotheses, isolate.

Preflight runs before anything changes (a refused change costs no restart); `propose` turns a
regression into ranked hypotheses, each with the experiment that would test it; `isolate`
finds the culprit among the flags changed since a good reference with as few restarts as
delta debugging allows, ordered by that ranking.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.bench.run import run_plan
from bot.loop.actions import StepContext, StopPlaybook, action
from bot.loop.capacity import gpu_facts
from bot.loop.expectations import Measured
from bot.loop.isolate import Premise, ProbeAnswer, ProbeRecord, isolate, restart_bound
from bot.loop.knowledge import KnowledgeBase, knowledge_files
from bot.loop.preflight import preflight as run_preflight
from bot.loop.rank import rank_hypotheses, rank_order
from bot.loop.restart_budget import check_restarts
from bot.loop.run_state import IsolateOutcome, PreflightFacts, ProbeOutcome, RankedProposal, RunState
from bot.loop.steps.common import (
    bench_value,
    changes_of,
    check_changes,
    check_flags,
    expectations_of,
    flags_from_json,
    fmt,
    is_server_metric,
    rests_on,
    snapshot_value,
)
from bot.loop.steps.learn_steps import record_observation
from bot.loop.steps.measure_steps import bench_plan
from bot.loop.steps.predict_steps import predict_before_restart
from bot.loop.steps.state_steps import reference_snapshot
from bot.sglang.change import apply_changes, diff_flagsets
from bot.sglang.expectation import evaluate
from bot.sglang.flagset import FlagSet
from bot.store import Experiment, Snapshot
from bot.store.bench_repo import load_set
from bot.store.experiments import get_experiment, list_experiments
from bot.store.observations import list_observations
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TableBlock, TextBlock, VerdictBlock
from bot.target.known_good import set_known_good
from bot.target.observe import observe
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.rollback import ensure_ready
from bot.target.unit import read_unit


def knowledge_base(ctx: StepContext) -> Any:
    return KnowledgeBase.load(knowledge_files(ctx.settings.playbook_dirs))


@action(
    "preflight",
    summary="Check the change before any restart: flag known, hardware gating, implied flags, downtime, "
    "drop-in diff, predicted capacity (an expectation predicted to fail stops the try unless force=yes)",
)
async def preflight(ctx: StepContext, *, dry_run: bool = False, force: bool = False) -> dict[str, Any]:
    check_changes(ctx, changes_of(ctx))  # before the dry run executes anything on node 0
    observations = await ctx.store.run(list_observations, ctx.store.store)
    report = await run_preflight(
        ctx.session(),
        changes=changes_of(ctx),
        kb=knowledge_base(ctx),
        observations=observations,
        cache_dir=ctx.cache_dir,
        dry_run=True,
    )
    for block in report.evidence():
        await ctx.emit(block)
    if report.refused or report.new_flags is None:
        raise ValueError(report.refused or "preflight could not work out the new flags")
    ctx.state.plan.flags = report.new_flags
    ctx.state.plan.env = dict(report.env)
    ctx.state.preflight = PreflightFacts(
        gpus=report.gpus, gpus_read_at=report.gpus_read_at, report=report.to_json()
    )
    predicted = await predict_before_restart(ctx, force=force, dry_run=dry_run)
    if dry_run:
        ctx.state.conclusion.verdict = "dry-run"
        raise StopPlaybook("dry run: preflight done, nothing changed on the target")
    return {"warnings": len(report.warnings), **predicted}


async def _rank(ctx: StepContext, before: Any, after: Any, metrics: list[str]) -> list[Any]:
    """Ranked hypotheses for a regression ([] without both starts)."""
    observations = await ctx.store.run(list_observations, ctx.store.store)
    if before is None or after is None:
        return []
    proposals: list[Any] = rank_hypotheses(
        before, after, regressed=metrics, kb=knowledge_base(ctx), observations=observations
    )
    return proposals


def test_command(experiment: dict[str, Any], expect: str) -> str:
    """The command that would test a proposed hypothesis, as the user would type it."""
    if experiment.get("playbook") == "try":
        return "try " + " ".join(experiment.get("changes") or []) + (f" {expect}" if expect else "")
    return f"isolate {expect or experiment.get('metric', '')}".rstrip()


@action(
    "propose",
    summary="On a regression: ranked hypotheses (which variable, why), each with the experiment that tests it",
)
async def propose(ctx: StepContext) -> dict[str, Any]:
    verdict = ctx.state.conclusion.verdict
    if verdict not in ("regressed", "fail"):
        return {"skipped": f"verdict {verdict}: nothing to explain"}

    before = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.before.snapshot_id)
    if ctx.playbook == "verify":
        before = await reference_snapshot(ctx)
    after = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.after.snapshot_id)
    metrics = list(ctx.state.conclusion.failed_metrics or ["max_running_requests"])
    expect = " ".join(ctx.params.get("expect") or []) or _capacity_expectation(before)
    proposals = await _rank(ctx, before, after, metrics)
    ctx.state.conclusion.proposals = [RankedProposal.model_validate(p.to_json()) for p in proposals]
    if not proposals:
        return {"proposals": 0}
    rows = tuple(
        (str(k), p.variable, p.statement, "; ".join(p.why)[:400], test_command(p.experiment, expect))
        for k, p in enumerate(proposals, start=1)
    )
    await ctx.emit(
        TableBlock(
            "Hypotheses, most likely first",
            ("rank", "variable", "hypothesis", "why", "the experiment that tests it"),
            rows,
            "isolate probes in this order; run the suggested command to test one",
        )
    )
    return {"proposals": len(proposals), "top": proposals[0].variable}


def _capacity_expectation(before: Any) -> str:
    value = snapshot_value(before, "max_running_requests")
    return f"max_running_requests>={value}" if value is not None else ""


def _judge(
    ctx: StepContext,
    snap: Snapshot | None,
    summary: Mapping[str, Any] | None,
    reference: Snapshot | None = None,
) -> tuple[bool | None, str]:
    """Whether every expectation holds on a start (`snap`) and its benchmark (`summary`), each
    judged by the one `evaluate` against isolate's good reference: None when one is not measured
    (the measurement does not tell), and the values seen, in words."""
    start = Measured("the start", snap, summary=summary)
    good = Measured(
        "the good reference",
        reference,
        snapshot_id=None if reference is None else reference.id,
        set_id=ctx.state.reference.set_id if ctx.state.reference.summary is not None else None,
        summary=ctx.state.reference.summary,
    )
    seen, ok = [], True
    for expectation in expectations_of(ctx):
        actual = start.value(expectation.metric)
        result = evaluate(expectation, actual, good.reference_for(expectation.metric))
        if result.outcome == "not measured":
            return None, f"{expectation.metric} not measured: {result.why}"
        ok = ok and result.passed
        verb = "meets" if result.passed else "does not meet"
        relative = f" ({result.why})" if expectation.relative else ""
        seen.append(f"{expectation.metric} {fmt(actual)}, which {verb} {expectation}{relative}")
    return ok, " and ".join(seen)


async def _probe_passes(
    ctx: StepContext, snapshot_id: int | None, profile: str | None, reference: Snapshot
) -> tuple[ProbeAnswer, str]:
    snap = await ctx.store.run(get_snapshot, ctx.store.store, snapshot_id)
    summary, set_id = None, None
    if any(not is_server_metric(e.metric) for e in expectations_of(ctx)):
        run = await run_plan(await bench_plan(ctx, "probe", snapshot_id, profile), store=ctx.store)
        summary, set_id = run.set.summary, run.set.id
    ok, seen = _judge(ctx, snap, summary, reference)
    ctx.state.conclusion.cite(
        snapshots=(snapshot_id, reference.id), sets=(set_id, ctx.state.reference.set_id)
    )
    return ProbeAnswer(bool(ok), snapshot_id, set_id), seen


async def _summary_of(ctx: StepContext, set_id: int | None) -> Mapping[str, Any] | None:
    if set_id is None:
        return None
    loaded = await ctx.store.run(load_set, ctx.store.store, set_id)
    return loaded.set.summary if loaded else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _needs_bench(ctx: StepContext) -> bool:
    return any(not is_server_metric(e.metric) for e in expectations_of(ctx))


async def _failing_premise(
    ctx: StepContext, running: FlagSet, reference: Snapshot, regressed: Experiment | None, profile: str | None
) -> Premise:
    """What is known, for free, of the failing side (every change applied): the running start
    when it is that configuration (its snapshot; a benchmark on it, no restart, when an
    expectation needs one), else the regressed try's stored after-start; unknown otherwise."""
    if regressed is None:
        latest = await ctx.store.run(ctx.store.store.latest_snapshot, ctx.target)
        if latest is None or not latest.ready or _changed(flags_from_json(latest.requested_flags), running):
            # no stored snapshot of this start: read the running server (no restart, not promoted)
            seen_now = await observe(ctx.session(), cache_dir=ctx.cache_dir, promote=False)
            latest = await ctx.store.run(get_snapshot, ctx.store.store, seen_now.snapshot_id)
        if latest is None or not latest.ready:
            return Premise(None, "the running start could not be read")
        summary, set_id = None, None
        if _needs_bench(ctx):
            run = await run_plan(await bench_plan(ctx, "premise", latest.id, profile), store=ctx.store)
            summary, set_id = run.set.summary, run.set.id
        holds, seen = _judge(ctx, latest, summary, reference)
        where = f"the running start (snapshot #{latest.id}" + (f", set #{set_id})" if set_id else ")")
        return Premise(holds, f"{where} has {seen}", latest.id, set_id)
    after = RunState.load(regressed.state).after
    snap = await ctx.store.run(get_snapshot, ctx.store.store, after.snapshot_id)
    if snap is None:
        return Premise(None, f"experiment #{regressed.id} stored no after-start")
    stored = await _summary_of(ctx, after.set_id) if _needs_bench(ctx) else None
    holds, seen = _judge(ctx, snap, stored, reference)
    set_note = f", set #{after.set_id}" if stored is not None else ""
    where = f"experiment #{regressed.id}'s after-start (snapshot #{snap.id}{set_note})"
    return Premise(holds, f"{where} had {seen}", snap.id, after.set_id if stored is not None else None)


async def _good_premise(ctx: StepContext, reference: Snapshot) -> Premise:
    """What the reference's stored snapshot and set say of the good side (unknown: probe it)."""
    summary = ctx.state.reference.summary if _needs_bench(ctx) else None
    holds, seen = _judge(ctx, reference, summary, reference)
    set_note = f", set #{ctx.state.reference.set_id}" if summary is not None else ""
    set_id = ctx.state.reference.set_id if summary is not None else None
    return Premise(
        holds, f"the reference (snapshot #{reference.id}{set_note}) has {seen}", reference.id, set_id
    )


def _refuse_unjudgeable(ctx: StepContext, reference: Snapshot) -> None:
    """A relative expectation needs the reference's value; without it no probe could tell pass
    from fail, so isolate refuses before any restart (a probe that cannot tell is not a failure)."""
    for expectation in expectations_of(ctx):
        if not expectation.relative:
            continue
        if is_server_metric(expectation.metric):
            known = _number(snapshot_value(reference, expectation.metric)) is not None
            what = f"the reference's start (snapshot #{reference.id}) has no {expectation.metric}"
        else:
            known = bench_value(ctx.state.reference.summary, expectation.metric) is not None
            what = f"the reference has no stored measurement of {expectation.metric}"
        if not known:
            raise ValueError(
                f"{expectation} is relative to the reference, and {what}: pin a measured baseline "
                "(`baseline pin`) or give an absolute expectation; nothing was restarted"
            )


def _changed(good: Any, bad: Any) -> dict[str, Any]:
    return {c.flag: c for c in diff_flagsets(good, bad) if c.flag is not None and c.flag != "--node-rank"}


def _latest_regressed_try(store: Any, target: str) -> Any:
    for experiment in list_experiments(store, target, limit=50):
        regressed = experiment.playbook == "try" and experiment.verdict == "regressed"
        intended = RunState.load(experiment.state).plan.flags if regressed else None
        if intended is not None and intended.items:
            return experiment
    return None


@action(
    "isolate",
    summary="Delta-debug the flags changed since a good reference; each probe is a restart",
    mutating=True,
)
async def isolate_step(
    ctx: StepContext, *, since: str = "baseline", profile: str | None = None, end: str = "good"
) -> dict[str, Any]:
    ts = ctx.session()
    if since == "baseline":
        reference = await reference_snapshot(ctx)
    else:
        experiment = await ctx.store.run(get_experiment, ctx.store.store, int(since.lstrip("#")))
        if experiment is None:
            raise LookupError(f"no experiment #{since}")
        earlier = RunState.load(experiment.state).before
        reference = await ctx.store.run(get_snapshot, ctx.store.store, earlier.snapshot_id)
        if ctx.state.reference.set_id is None:
            ctx.state.reference.set_id = earlier.set_id  # its stored set tells the good side's benchmark
    if reference is None:
        raise LookupError("no good reference: pin a baseline (`baseline pin`) or give since=EXPERIMENT")
    ctx.state.reference.snapshot_id = reference.id  # the probes' relative expectations compare with it
    if ctx.state.reference.set_id is not None:
        loaded = await ctx.store.run(load_set, ctx.store.store, ctx.state.reference.set_id)
        ctx.state.reference.summary = loaded.set.summary if loaded else None
    _refuse_unjudgeable(ctx, reference)
    view = await read_unit(ts.node0)
    good = flags_from_json(reference.requested_flags)
    bad = view.flags
    changes = _changed(good, bad)
    regressed = None
    if not changes:
        regressed = await ctx.store.run(_latest_regressed_try, ctx.store.store, ctx.target)
        if regressed is None:
            raise ValueError(
                f"the target runs the flags of the reference (snapshot #{reference.id}) and no try regressed "
                "since; nothing to isolate"
            )
        bad = RunState.load(regressed.state).plan.flags or FlagSet(())
        changes = _changed(good, bad)
        await ctx.emit(
            TextBlock(
                f"the target is back on the reference's flags; isolating the change of experiment "
                f"#{regressed.id} ({regressed.verdict}), whose flags fail: {', '.join(changes)}",
                "Isolate",
            )
        )
    check_flags(ctx, changes)  # every probe switches these flags
    if ctx.state.before.flags is None:
        ctx.state.before.flags = view.flags
    if ctx.state.before.env is None:
        ctx.state.before.env = dict(view.env)
    metrics = [e.metric for e in expectations_of(ctx)]
    failing = {**reference.model_dump(), "requested_flags": bad.to_json()}
    proposals = await _rank(ctx, reference, failing, metrics)
    order = None
    if proposals:
        order = rank_order(list(changes), proposals)
        await ctx.emit(TextBlock("probe order (most suspect first): " + ", ".join(order), "Isolate"))
    running: dict[str, Any] = {"flags": view.flags}
    failing_side = await _failing_premise(ctx, view.flags, reference, regressed, profile)
    good_side = await _good_premise(ctx, reference)
    known = [f"failing side: {failing_side.evidence}", f"good side: {good_side.evidence}"]
    for side in (failing_side, good_side):  # what was measured of either side, the verdict rests on
        if side.holds is not None:
            ctx.state.conclusion.cite(snapshots=(side.snapshot_id,), sets=(side.set_id,))
    await ctx.emit(TextBlock("premises, before any probe: " + "; ".join(known), "Isolate"))
    unknown = sum(side.holds is None for side in (failing_side, good_side))
    await check_restarts(  # the worst case up front, before the first probe restarts anything
        ctx.store,
        ctx.target,
        limit=ts.target.policy.max_restarts_per_hour,
        needed=restart_bound(len(changes), unknown_premises=unknown),
        what=f"isolate of {len(changes)} changes (worst case, settle included)",
    )

    def config_for(subset: frozenset[str] | tuple[str, ...]) -> Any:
        chosen = [changes[flag] for flag in changes if flag in subset]
        flags, _ = apply_changes(good, {}, chosen)
        return flags

    async def restart_into(flags: Any, reason: str, *, promote: bool) -> Any:
        report = await apply_and_restart(
            ts, flags_for_nodes(flags, len(ts.nodes)), None, force=True, reason=reason
        )
        ctx.state.restart.applied = True
        running["flags"] = flags
        previous = {node.node: node.old_invocation for node in report.nodes}
        return await ensure_ready(ts, previous=previous, cache_dir=ctx.cache_dir, promote=promote)

    async def probe(subset: frozenset[str]) -> ProbeAnswer:
        if await ctx.cancelled():
            raise RuntimeError("cancelled between two probes")
        flags = config_for(subset)
        outcome = await restart_into(flags, f"experiment #{ctx.experiment_id}: isolate probe", promote=False)
        if outcome.observation is None:
            running["seen"] = "the start failed"
            running["flags"] = None  # rolled back to known-good by ensure_ready
            return ProbeAnswer(False)
        answer, running["seen"] = await _probe_passes(
            ctx, outcome.observation.snapshot_id, profile, reference
        )
        return answer

    async def record(item: ProbeRecord) -> None:
        applied = ", ".join(item.applied) or "none"
        await ctx.emit(
            TextBlock(
                f"probe {item.index} (a restart): reference + [{applied}] -> {running.get('seen')}: "
                f"{'passes' if item.passed else 'FAILS'} ({item.note})",
                f"Isolate probe {item.index}",
            )
        )

    result = await isolate(
        list(changes), probe, order=order, on_probe=record, failing=failing_side, good=good_side
    )
    ctx.state.isolate = IsolateOutcome.model_validate(
        {
            **result.to_json(),
            "changes": list(changes),
            "failing_evidence": failing_side.evidence,
            "failing_snapshot_id": failing_side.snapshot_id if failing_side.holds is False else None,
            "failing_set_id": failing_side.set_id if failing_side.holds is False else None,
        }
    )
    settle = {"good": config_for(result.final), "reference": good, "current": view.flags}.get(end, good)
    if not result.probes:
        settle = running["flags"]  # no probe restarted anything: the target stays as it is
    settled = ""
    if running.get("flags") != settle:
        outcome = await restart_into(settle, f"experiment #{ctx.experiment_id}: settle ({end})", promote=True)
        if outcome.observation is None:
            raise RuntimeError("the settling restart did not come back healthy")
        settled = " + 1 restart to settle (not a probe)"
    elif end == "good" and result.final_verified:
        latest = await ctx.store.run(ctx.store.store.latest_snapshot, ctx.target)
        if latest is not None and latest.id is not None and latest.ready:
            await ctx.store.run(set_known_good, ctx.store.store, ctx.target, latest.id)
    ctx.state.restart.restored = True  # the target is where `end` said, nothing to undo
    verdict = result.status if result.status in ("found", "not-reproduced") else "not-found"
    ctx.state.conclusion.verdict = verdict
    culprits = ", ".join(result.culprits) or "none"
    kept = [flag for flag in changes if flag not in result.culprits] if end == "good" else []
    left = {"good": "the reference" + (" + " + ", ".join(kept) if kept else ""), "reference": "the reference"}
    if not result.probes:
        where = "left as it was (no restart)"
    elif result.status != "found":
        final = ", ".join(result.final)
        where = {"good": f"left on the reference{' + ' + final if final else ''}"}.get(
            end, f"left on {left.get(end, 'the flags it had before')}"
        )
    else:
        where = f"left on {left.get(end, 'the flags it had before')}"
    head = f"culprit(s): {culprits}" if result.status == "found" else result.message.split(";")[0]
    summary = ctx.state.conclusion.summary = (
        f"{head} after {len(result.probes)} probe restart(s){settled}; {where}"
    )
    await ctx.emit(VerdictBlock(verdict, summary, (result.message, rests_on(ctx))))
    return {"status": result.status, "culprits": list(result.culprits), "probes": len(result.probes)}


def _cite(probe: ProbeOutcome) -> str:
    measured = f"snapshot #{probe.snapshot_id}" + (f", set #{probe.set_id}" if probe.set_id else "")
    return f"probe #{probe.index} ({measured})"


@action(
    "learn_isolate",
    summary="Record what isolate's measured probes showed about each flag in the knowledge base, citing them",
)
async def learn_isolate(ctx: StepContext) -> dict[str, Any]:
    """Only measured results teach: a culprit fact needs a probe (or the free measurement of the
    failing side, when the culprits are every change) that saw the culprits fail, and a
    not-culprit fact a probe that saw the flag pass; each fact cites them (issue 18 item 3)."""
    found = ctx.state.isolate
    if found is None or found.status != "found":
        return {"observations": 0}
    latest = await ctx.store.run(ctx.store.store.latest_snapshot, ctx.target)
    gpu, cap = gpu_facts(latest)
    version = latest.sglang_version if latest is not None else None
    where = f"on {gpu or 'an unknown GPU'} (compute capability {cap or '?'}), SGLang {version or '?'}"
    expect = " ".join(ctx.params.get("expect") or [])
    culprits = list(found.culprits)
    measured = [p for p in found.probes if p.snapshot_id is not None]
    failed = next((p for p in measured if not p.passed and set(p.applied) == set(culprits)), None)
    notes: list[tuple[str, str, str, dict[str, Any]]] = []
    if failed is not None:
        cited, evidence = _cite(failed), {"probes": [failed.index], "snapshot_ids": [failed.snapshot_id]}
        evidence["set_ids"] = [failed.set_id] if failed.set_id else []
    elif found.failing_snapshot_id is not None and set(culprits) == set(found.changes):
        cited = found.failing_evidence
        evidence = {
            "probes": [],
            "snapshot_ids": [found.failing_snapshot_id],
            "set_ids": [found.failing_set_id] if found.failing_set_id else [],
        }
    else:
        cited, evidence = "", {}
    for flag in culprits if cited else []:
        others = [c for c in culprits if c != flag]
        with_others = f" (with {', '.join(others)})" if others else ""
        text = f"isolate: {flag}{with_others} makes `{expect}` fail {where}; measured by {cited}"
        notes.append((flag, "culprit", text, evidence))
    seen: set[str] = set(culprits)
    for probe in measured:
        if not probe.passed:
            continue
        for flag in probe.applied:
            if flag in seen:
                continue
            seen.add(flag)
            text = f"isolate: {flag} keeps `{expect}` holding {where}; measured by {_cite(probe)}"
            proof = {
                "probes": [probe.index],
                "snapshot_ids": [probe.snapshot_id],
                "set_ids": [probe.set_id] if probe.set_id else [],
            }
            notes.append((flag, "not-culprit", text, proof))
    for flag, kind, text, proof in notes:
        detail = {"expect": ctx.params.get("expect"), "evidence": proof}
        await record_observation(ctx, latest, flag=flag, kind=kind, text=text, detail=detail)
    return {"observations": len(notes)}
