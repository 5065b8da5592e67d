"""The `schedule_checks` action: after a try's or a revert's verdict, re-check its conclusion later.

What is checked is the start the experiment left the target on: a kept try's new start, a
try that was reverted (or failed to start) the start from before, a revert's start. Its flags,
effective capacity and measurement set are copied into each check (`expected`), so the check
compares with what was concluded even if the snapshot is later superseded. The thread the
run is reported in (a Slack reporter's, or the investigation's) is recorded for the check to
post a change of state there.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.bench.run import jsonable
from bot.config.section_base import parse_duration
from bot.loop import check_jobs
from bot.loop.actions import StepContext, action
from bot.loop.steps.common import fmt, snapshot_value
from bot.store.baselines import current_baseline
from bot.store.bench_repo import load_set
from bot.store.checks import add_check
from bot.store.investigations import get_investigation
from bot.store.models import utcnow
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TextBlock


def concluded(ctx: StepContext) -> tuple[int | None, int | None, str]:
    """(snapshot id, measurement set id, what) of the start the experiment concluded on."""
    state = ctx.state
    if ctx.playbook == "revert" or state.plan.reverting_experiment is not None:
        return state.after.snapshot_id, state.reference.set_id, "the reverted start"
    if state.conclusion.kept and not state.restart.start_failed:
        return state.after.snapshot_id, state.after.set_id, "the kept change"
    if state.restart.start_failed and not state.restart.rolled_back:
        return None, None, "a failed start that was not rolled back"
    return state.before.snapshot_id, state.before.set_id, "the start from before (change not kept)"


def _delays(after: list[str] | None, ctx: StepContext) -> list[timedelta]:
    if after is None:
        return list(ctx.settings.schedules.check_after)
    out = []
    for text in after:
        value = parse_duration(text)
        if not isinstance(value, timedelta) or value < timedelta(0):
            raise ValueError(f"after: {text!r} is not a duration such as 10m or 24h")
        out.append(value)
    return out


async def run_thread(ctx: StepContext) -> tuple[str | None, str | None]:
    """The Slack thread this run is reported in: the reporter's, else the investigation's."""
    channel, thread = getattr(ctx.reporter, "channel", None), getattr(ctx.reporter, "thread", None)
    if isinstance(channel, str) and isinstance(thread, str):
        return channel, thread
    if ctx.investigation_id is not None:
        found = await ctx.store.run(get_investigation, ctx.store.store, ctx.investigation_id)
        if found is not None:
            return found.channel, found.thread_ts
    return None, None


@action(
    "schedule_checks",
    summary="Schedule verification checks of the experiment's conclusion (schedules.check_after)",
)
async def schedule_checks(
    ctx: StepContext, *, after: list[str] | None = None, profile: str | None = None
) -> dict[str, Any]:
    delays = _delays(after, ctx)
    snapshot_id, set_id, what = concluded(ctx)
    snapshot = await ctx.store.run(get_snapshot, ctx.store.store, snapshot_id)
    if not delays or snapshot is None:
        why = "no delays configured" if not delays else f"nothing settled to verify ({what})"
        return {"checks": [], "why": why}
    loaded = await ctx.store.run(load_set, ctx.store.store, set_id) if set_id is not None else None
    capacity = {k: snapshot_value(snapshot, k) for k in ctx.settings.verdicts.capacity}
    expected = {
        "experiment_id": ctx.experiment_id,
        "playbook": ctx.playbook,
        "verdict": ctx.state.conclusion.verdict,
        "kept": ctx.state.conclusion.kept,
        "snapshot_id": snapshot.id,
        "invocation": snapshot.invocation_id,
        "flags": snapshot.requested_flags,
        **capacity,
        "set_id": set_id if loaded is not None else None,
        "profile": loaded.set.profile if loaded is not None else None,
        "summary": f"{what}: effective max_running_requests {fmt(capacity.get('max_running_requests'))}"
        + (f", measurement set #{set_id}" if loaded is not None else ""),
    }
    if ctx.params.get("expect"):
        baseline = await ctx.store.run(current_baseline, ctx.store.store, ctx.target)
        # the experiment's expectations are checked again; relative ones against the baseline
        # pinned now (docs/commands.md), its ids copied so a later pin does not move the reference
        expected["expect"] = list(ctx.params["expect"])
        expected["reference"] = (
            {
                "name": f"baseline #{baseline.id}",
                "snapshot_id": baseline.snapshot_id,
                "set_id": baseline.set_id,
            }
            if baseline is not None
            else {
                "name": "no baseline pinned when the check was scheduled",
                "snapshot_id": None,
                "set_id": None,
            }
        )
    channel, thread = await run_thread(ctx)
    now = utcnow()
    rows = []
    for delay in delays:
        rows.append(
            await ctx.store.run(
                add_check,
                ctx.store.store,
                target=ctx.target,
                experiment_id=ctx.experiment_id,
                after=delay,
                due_at=now + delay,
                expected=jsonable(expected),
                created_by=ctx.actor,
                profile=profile,
                channel=channel,
                thread_ts=thread,
            )
        )
    jobs = check_jobs.active()
    if jobs is not None:
        for row in rows:
            jobs.add(row)
        where = "the bot's scheduler runs them"
    else:
        where = "stored; the bot's scheduler runs them (picked up at its start if it is not running)"
    listed = ", ".join(f"#{row.id} at {row.due_at:%Y-%m-%d %H:%M} UTC" for row in rows)
    await ctx.emit(TextBlock(f"verification checks of {what}: {listed}; {where}", "Checks scheduled"))
    return {"checks": [row.id for row in rows], "summary": f"{len(rows)} check(s) scheduled"}
