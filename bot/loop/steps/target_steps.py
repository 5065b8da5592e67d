"""Actions that act on the target itself: heal, snapshot, apply + restart, await the start, roll back.

Each action writes what it did to `ctx.state` before returning, so a run killed after any of
them can be resumed (the flags flagbot meant are in `state.plan.flags`) or rolled back (the
flags it started from are in `state.before.flags`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from pydantic import JsonValue

from bot.bench.chart import preload as preload_chart
from bot.heap import settle
from bot.http import async_client
from bot.loop.actions import StepContext, StopPlaybook, action
from bot.loop.steps.common import check_write, describe_flags, flags_from_json
from bot.loop.steps.predict_steps import score_prediction
from bot.sglang.flagset import FlagSet
from bot.store.baselines import current_baseline
from bot.store.experiments import list_steps
from bot.store.models import Snapshot
from bot.store.snapshots import get_snapshot
from bot.target.dropin import HandEditError, check_unedited
from bot.target.evidence import TextBlock
from bot.target.heal import heal_if_diverged
from bot.target.known_good import set_known_good
from bot.target.nodestate import probe_health
from bot.target.observe import Observation, observe
from bot.target.restart import apply_and_restart, flags_for_nodes, restart_target
from bot.target.rollback import drain_notes, ensure_ready, rollback
from bot.target.session import TargetSession
from bot.target.unit import UnitView, read_state, read_unit


@action(
    "heal", summary="Reconcile a diverged target (every node back on the flags flagbot meant)", mutating=True
)
async def heal(ctx: StepContext) -> dict[str, Any]:
    healed = await heal_if_diverged(
        ctx.session(), cache_dir=ctx.cache_dir, restart_approved=ctx.state.restart_approved
    )
    if healed is None:
        return {"diverged": False}
    for block in healed.evidence:
        await ctx.emit(block)
    if not healed.ok:
        raise RuntimeError("the diverged target was reconciled but did not come back healthy")
    return {"diverged": True, "reconciled": True}


async def emit_observation(ctx: StepContext, obs: Observation) -> None:
    for block in obs.evidence:
        await ctx.emit(block)


@action(
    "snapshot_before", summary="Record the running start (reusing the pinned baseline's when it is the same)"
)
async def snapshot_before(ctx: StepContext, *, reuse_baseline: bool = True) -> dict[str, Any]:
    ts = ctx.session()
    baseline = await ctx.store.run(current_baseline, ctx.store.store, ctx.target) if reuse_baseline else None
    if baseline is not None:
        view = await read_unit(ts.node0)
        ctx.state.before.flags = view.flags
        ctx.state.before.env = dict(view.env)
        snap = await ctx.store.run(get_snapshot, ctx.store.store, baseline.snapshot_id)
        same = snap is not None and flags_from_json(snap.requested_flags) == view.flags
        same = same and snap is not None and snap.invocation_id == view.state.invocation_id
        if same and isinstance(snap, Snapshot) and baseline.set_id is not None:
            ctx.state.before.snapshot_id = snap.id
            ctx.state.before.set_id = baseline.set_id
            ctx.state.baseline_id = baseline.id
            await ctx.emit(
                TextBlock(
                    f"the server still runs the pinned baseline #{baseline.id} (same start, invocation "
                    f"{view.state.invocation_id}): its snapshot #{snap.id} and measurement set "
                    f"#{baseline.set_id} are the reference; no new measurement needed.",
                    "Before",
                )
            )
            return {"snapshot_id": snap.id, "set_id": baseline.set_id, "reused_baseline": baseline.id}
    # reads the unit too (the flags from before); the GPUs as the preflight just read them
    obs = await observe(ts, cache_dir=ctx.cache_dir, gpus=_fresh_gpus(ctx))
    ctx.state.before.flags = flags_from_json(obs.requested)
    ctx.state.before.env = dict(obs.environment)
    if not obs.healthy:
        raise RuntimeError(
            f"the server is not healthy before the change (health {obs.health}, "
            f"error {obs.startup_error or 'none'}); fix or roll back first"
        )
    await emit_observation(ctx, obs)
    ctx.state.before.snapshot_id = obs.snapshot_id
    if baseline is not None:
        ctx.state.baseline_id = baseline.id
    return {"snapshot_id": obs.snapshot_id, "invocation": obs.invocation}


GPU_FACTS_FRESH_S = 30.0
"""How old the preflight's GPU facts may be for the snapshot before the change to reuse them."""


def _fresh_gpus(ctx: StepContext) -> dict[str, list[dict[str, JsonValue]]] | None:
    """The preflight's GPU facts when it read them moments ago (not in a run resumed later)."""
    preflight = ctx.state.preflight
    if preflight is None or preflight.gpus_read_at is None:
        return None
    if time.time() - preflight.gpus_read_at > GPU_FACTS_FRESH_S:
        return None
    return preflight.gpus


@action(
    "apply", summary="Write the intended flags on every node and restart the ranks together", mutating=True
)
async def apply(ctx: StepContext, *, force: bool = False) -> dict[str, Any]:
    ts = ctx.session()
    flags = ctx.state.plan.flags
    if flags is None:
        raise KeyError("intended_flags")  # as before: no plan, no apply (preflight or plan_revert first)
    env = ctx.state.plan.env
    before_flags, before_env = ctx.state.before.flags, ctx.state.before.env
    if before_flags is None or before_env is None:
        view = await read_unit(ts.node0)
        before_flags, before_env = view.flags, dict(view.env)
    check_write(ctx, (before_flags, before_env), (flags, env))  # whichever step planned it
    report = await apply_and_restart(
        ts,
        flags_for_nodes(flags, len(ts.nodes)),
        env,
        force=force,
        reason=f"experiment #{ctx.experiment_id} ({ctx.playbook})",
    )
    ctx.state.restart.applied = True
    ctx.state.restart.previous_invocations = {node.node: node.old_invocation for node in report.nodes}
    reconnects = "".join(f"\n{note}" for note in report.connection_notes())  # a dropped SSH connection
    await ctx.emit(
        TextBlock(
            f"wrote the drop-in on {len(report.nodes)} node(s), verified it after daemon-reload, and "
            f"restarted every rank together in {report.duration_s:.1f} s:\n{describe_flags(flags)}"
            f"{drain_notes(report)}{reconnects}",
            "Applied",
        )
    )
    return {"phase": report.phase, "duration_s": report.duration_s}


class HandEditedRestartError(RuntimeError):
    """`restart` found a unit changed by hand since flagbot last left it: a restart would start
    the hand edit, so it is refused (the message carries the diff and what to do instead)."""


async def _units(ts: TargetSession) -> list[UnitView]:
    results = await ts.each(read_unit)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [result for result in results if not isinstance(result, BaseException)]


@action(
    "plan_restart",
    summary="Read every node's unit: the flags a restart keeps; refuse a unit edited by hand",
)
async def plan_restart(ctx: StepContext, *, dry_run: bool = False) -> dict[str, Any]:
    """What `restart` will do, checked before anything changes: every node's unit as flagbot last
    left it (a hand edit is refused with its diff, as `try` refuses it without `force`), the flags
    the ranks run now (kept: the restart writes nothing), and whether the target is diverged
    (then `restart` reconciles it, which is the restart). With `dry_run` the run ends here."""
    ts = ctx.session()
    views = await _units(ts)
    for node, view in zip(ts.nodes, views, strict=True):
        try:
            await check_unedited(node, ts.ledger, seen=(view.cat_text, view.state.need_daemon_reload))
        except HandEditError as exc:
            raise HandEditedRestartError(
                f"{exc.node}: the unit was changed by hand since flagbot last left it; `restart` would "
                "start that edit without anyone deciding to, so it changes nothing. Look at `status`, "
                "then take the edit over with `try ... force=yes` or put flagbot's flags back with "
                f"`revert baseline force=yes`. What differs:\n{exc.diff}"
            ) from None
    flags = views[0].flags
    ctx.state.before.flags = flags
    ctx.state.before.env = dict(views[0].env)
    ctx.state.plan.flags = flags
    ctx.state.plan.env = dict(views[0].env)
    divergence = await ts.ledger.divergence()
    what = (
        f"reconcile the diverged target ({', '.join(divergence.nodes) or '?'}: "
        f"{divergence.reason or 'reason not recorded'}): every node gets the flags flagbot meant and "
        "the ranks restart together"
        if divergence is not None
        else f"stop every rank of {ctx.target} ({len(ts.nodes)} node(s)), then start every rank, with the "
        "unit as it is (no drop-in written)"
    )
    await ctx.emit(
        TextBlock(
            f"{'dry run: would ' if dry_run else 'will '}{what}; then wait until the new start serves "
            f"and observe it. Flags (unchanged):\n{describe_flags(flags)}",
            "Restart plan",
        )
    )
    if dry_run:
        raise StopPlaybook("dry run: the restart was planned, nothing changed on the target")
    return {"nodes": len(ts.nodes), "diverged": divergence is not None}


@action("restart", summary="Restart every rank with the flags it runs now (no unit change)", mutating=True)
async def restart(ctx: StepContext) -> dict[str, Any]:
    """Stop every rank, then start every rank (`bot.target.restart.restart_target`); a diverged
    target is reconciled instead (`heal`), which restarts it on the flags flagbot meant. The
    start is awaited by the next step (`await_start`)."""
    ts = ctx.session()
    healed = await heal_if_diverged(ts, cache_dir=ctx.cache_dir, restart_approved=ctx.state.restart_approved)
    if healed is not None:
        for block in healed.evidence:
            await ctx.emit(block)
        if not healed.ok:
            raise RuntimeError("the diverged target was reconciled but did not come back healthy")
        ctx.state.restart.applied = True
        ctx.state.restart.previous_invocations = {}
        return {"diverged": True, "reconciled": True}
    states = await ts.each(read_state)
    previous = {
        node.name: None if isinstance(state, BaseException) else state.invocation_id
        for node, state in zip(ts.nodes, states, strict=True)
    }
    report = await restart_target(ts)
    ctx.state.restart.applied = True
    ctx.state.restart.previous_invocations = previous
    reconnects = "".join(f"\n{note}" for note in report.connection_notes())
    await ctx.emit(
        TextBlock(
            f"stopped and started every rank on {len(report.nodes)} node(s) in {report.duration_s:.1f} s, "
            f"the unit unchanged{drain_notes(report)}{reconnects}",
            "Restarted",
        )
    )
    return {"phase": report.phase, "duration_s": report.duration_s}


def _while_the_server_loads() -> None:
    """Work the verdict would otherwise pay for later: matplotlib's import, and a full garbage
    collection (then a frozen heap) so none lands on the observation or the benchmark."""
    preload_chart()
    settle()


@action(
    "await_start",
    summary="Wait until the new start is ready (journal + /health), observe it; roll back if it fails",
)
async def await_start(
    ctx: StepContext, *, promote: bool = False, timeout_s: float | None = None
) -> dict[str, Any]:
    ts = ctx.session()
    warm = asyncio.create_task(asyncio.to_thread(_while_the_server_loads))
    try:
        outcome = await ensure_ready(
            ts,
            previous=ctx.state.restart.previous_invocations,
            timeout=timeout_s,
            cache_dir=ctx.cache_dir,
            promote=promote,
        )
    finally:
        with contextlib.suppress(Exception):  # a broken matplotlib shows where the chart is drawn
            await warm
    timings = outcome.readiness.timings
    if outcome.observation is not None:
        obs = outcome.observation
        await emit_observation(ctx, obs)
        if outcome.traffic is not None:
            await ctx.emit(TextBlock(outcome.traffic, "Traffic"))
        ctx.state.after.snapshot_id = obs.snapshot_id
        ctx.state.after.invocation = obs.invocation
        scored = await score_prediction(ctx)  # the try's preflight prediction, next to this start
        found = {"ready": True, "snapshot_id": obs.snapshot_id, "timings": timings}
        return found if scored is None else {**found, "prediction": scored}
    ctx.state.restart.start_failed = True
    ctx.state.conclusion.verdict = "failed-to-start"
    if outcome.rollback is not None:
        for block in outcome.rollback.evidence:
            await ctx.emit(block)
        failure = outcome.readiness.failure
        cause = outcome.rollback.fatal_line or (failure.message if failure else None)
        ctx.state.restart.rolled_back = outcome.rollback.ok
        ctx.state.restart.fatal_line = outcome.rollback.fatal_line
        ctx.state.restart.failure_reason = failure.message if failure else None
        ctx.state.conclusion.summary = (
            "the server did not start with the change"
            + (f" ({cause})" if cause else "")
            + (
                "; rolled back, healthy again"
                if outcome.rollback.ok
                else "; the rollback did not bring it back"
            )
        )
    else:
        failure = outcome.readiness.failure
        ctx.state.conclusion.summary = (
            f"the server did not start: {failure.message if failure else 'unknown'} (left as is)"
        )
    return {"ready": False, "outcome": outcome.readiness.outcome, "timings": timings}


@action(
    "restore",
    summary="Put back the flags the experiment started from (or the known-good ones)",
    mutating=True,
)
async def restore(ctx: StepContext) -> dict[str, Any]:
    """The on_failure / on_cancel step: undo what `apply` did, if it did anything.

    Nothing is restarted when the change was never applied (a refused preflight, a cancel
    before the restart) or was already rolled back by `await_start`.
    """
    done = ctx.state.restart
    if not done.applied or done.rolled_back or done.restored:
        return {"restored": False, "why": "nothing was applied, or it was already undone"}
    ts = ctx.session()
    if ctx.state.before.flags is None:
        result = await rollback(ts, trigger="on-demand", cache_dir=ctx.cache_dir, force=True)
        for block in result.evidence:
            await ctx.emit(block)
        ctx.state.restart.restored = result.ok
        return {"restored": result.ok, "rolled_back": result.ok, "to": result.to}
    ok, capacity = await back_to_before(ctx, reason="restore", force=True)
    await ctx.emit(
        TextBlock(
            f"restored the flags from before experiment #{ctx.experiment_id}; "
            + (f"healthy again (max_running_requests {capacity})" if ok else "the server did not come back"),
            "Restored",
        )
    )
    return {"restored": ok, "rolled_back": ok, "max_running_requests": capacity}


async def back_to_before(ctx: StepContext, *, reason: str, force: bool = False) -> tuple[bool, Any]:
    """Restart every node on the flags the experiment started from and wait until it serves;
    (healthy?, effective max_running_requests). The healthy start becomes known-good again."""
    ts = ctx.session()
    flags = ctx.state.before.flags
    if flags is None:
        raise KeyError("before_flags")  # as before: nothing recorded to go back to
    report = await apply_and_restart(
        ts,
        flags_for_nodes(flags, len(ts.nodes)),
        ctx.state.before.env,
        force=force,
        reason=f"experiment #{ctx.experiment_id}: {reason}",
    )
    previous = {node.node: node.old_invocation for node in report.nodes}
    outcome = await ensure_ready(ts, previous=previous, cache_dir=ctx.cache_dir, promote=True)
    ok = outcome.observation is not None and outcome.observation.healthy
    ctx.state.restart.restored = ok
    capacity = outcome.observation.effective.get("max_running_requests") if outcome.observation else None
    return ok, capacity


@action(
    "check_interrupted", summary="After a crash: resume if the target runs the intended flags and is healthy"
)
async def check_interrupted(ctx: StepContext) -> dict[str, Any]:

    ts = ctx.session()
    if not ctx.state.restart.applied:
        if not await _apply_in_flight(ctx):
            return {"resume": True, "why": "nothing had been changed on the target yet"}
        # Killed inside `apply`: some node may have the new drop-in written, reloaded or restarted,
        # and `applied` was never checkpointed; so `restore` must put the flags from before back.
        ctx.state.restart.applied = True
        return {
            "resume": False,
            "why": "it stopped while applying the change (drop-in write, reload or restart not confirmed)",
        }
    view = await read_unit(ts.node0)
    intended = ctx.state.plan.flags or FlagSet(())
    async with async_client(timeout=3.0) as client:
        health = await probe_health(client, await ts.http_base() + "/health")
    if view.flags == intended and health == 200:
        return {"resume": True, "why": "the target runs the experiment's flags and answers /health 200"}
    if view.flags == intended and view.state.active_state in ("activating", "active"):
        outcome = await ensure_ready(ts, previous={}, cache_dir=ctx.cache_dir, promote=False)
        if outcome.observation is not None:
            ctx.state.after.snapshot_id = outcome.observation.snapshot_id
            return {
                "resume": True,
                "why": "the target was still starting with the experiment's flags; now ready",
            }
        ctx.state.restart.rolled_back = bool(outcome.rollback and outcome.rollback.ok)
        return {"resume": False, "why": "the start with the experiment's flags failed"}
    return {
        "resume": False,
        "why": f"the target runs other flags than the experiment meant, or is unhealthy (health {health})",
    }


async def _apply_in_flight(ctx: StepContext) -> bool:
    """Whether the step the run died in is `apply` (its changes on the target are not checkpointed)."""
    steps = await ctx.store.run(list_steps, ctx.store.store, ctx.experiment_id)
    return any(step.index == ctx.step_index and step.action == "apply" for step in steps)


@action("promote", summary="Make the current start the target's known-good configuration")
async def promote(ctx: StepContext) -> dict[str, Any]:
    snapshot_id = ctx.state.after.snapshot_id
    if snapshot_id is None:
        return {"promoted": False}
    await ctx.store.run(set_known_good, ctx.store.store, ctx.target, snapshot_id)
    return {"promoted": True, "snapshot_id": snapshot_id}
