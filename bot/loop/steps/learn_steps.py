"""Actions that keep the log: open and resolve the experiment's hypothesis, add what was learned.

Every try records a hypothesis ("this change moves capacity or throughput", or the user's own
with `hypothesis=ID` / `because=`) and the verdict resolves it, so `flagbot log` can tell what
was tried and what was learned. Observations go to the knowledge base's store table, and the
next preflight cites them. A try that added one flag the capacity model does not compute also
records that flag's workspace, measured from its two starts (`learn_memory_cost`): every later
prediction with the same model, GPU, tensor parallelism and SGLang release uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.loop.actions import StepContext, action
from bot.loop.capacity import MEMORY_COST, cost_detail, figures_of, gpu_facts, identity_of, recorded_figures
from bot.loop.expectations import evaluate_all, load_measured
from bot.loop.steps.common import changes_of, snapshot_value
from bot.sglang.capacity_model.applied_change import MODELLED_FLAGS, server_args_key
from bot.sglang.capacity_model.arithmetic import learn_flag_cost
from bot.sglang.capacity_model.figures import Unknown
from bot.sglang.change import Change
from bot.sglang.expectation import parse_expectation
from bot.store.experiments import update_experiment
from bot.store.hypotheses import add_hypothesis, get_hypothesis, resolve_hypothesis
from bot.store.models import Snapshot
from bot.store.observations import add_observation
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TextBlock


async def record_observation(
    ctx: StepContext,
    snapshot: Any,
    *,
    flag: str,
    kind: str,
    text: str,
    detail: dict[str, Any],
    emit: bool = True,
) -> None:
    """One knowledge observation about `flag`, with the GPU and SGLang version of `snapshot`'s start
    and this experiment as provenance; shown in the thread as "Learned" unless `emit` is False."""
    gpu, cap = gpu_facts(snapshot)
    await ctx.store.run(
        add_observation,
        ctx.store.store,
        flag=flag,
        kind=kind,
        text=text,
        target=ctx.target,
        gpu_name=gpu,
        compute_capability=cap,
        sglang_version=snapshot.sglang_version if snapshot is not None else None,
        experiment_id=ctx.experiment_id,
        detail={**detail, "experiment_id": ctx.experiment_id},
    )
    if emit:
        await ctx.emit(TextBlock(text, "Learned"))


@action("open_hypothesis", summary="Record the hypothesis this experiment tests (or link the given one)")
async def open_hypothesis(ctx: StepContext) -> dict[str, Any]:
    if ctx.state.hypothesis_id is not None:
        return {"hypothesis_id": ctx.state.hypothesis_id}
    given = ctx.params.get("hypothesis") or ctx.hypothesis_id
    if given is not None:
        found = await ctx.store.run(get_hypothesis, ctx.store.store, int(given))
        if found is None:
            raise LookupError(f"no hypothesis #{given}; `hypothesis list` shows them")
        hypothesis_id = int(given)
    else:
        changes = changes_of(ctx)
        described = ", ".join(change.describe() for change in changes)
        because = ctx.params.get("because")
        statement = (
            f"{described}: {because}"
            if because
            else f"{described} changes the target's capacity or throughput"
        )
        variable = next((c.flag or c.env_name for c in changes), None)
        row = await ctx.store.run(
            add_hypothesis,
            ctx.store.store,
            target=ctx.target,
            statement=statement,
            variable=variable,
            expectations=list(ctx.params.get("expect") or []),
            because=because,
            created_by=ctx.actor,
            investigation_id=ctx.investigation_id,
        )
        assert row.id is not None
        hypothesis_id = row.id
    ctx.state.hypothesis_id = hypothesis_id
    await ctx.store.run(update_experiment, ctx.store.store, ctx.experiment_id, hypothesis_id=hypothesis_id)
    return {"hypothesis_id": hypothesis_id}


def _status_from(verdict: str) -> str:
    return {"improved": "confirmed", "regressed": "confirmed", "no-effect": "refuted"}.get(
        verdict, "inconclusive"
    )


@action("close_hypothesis", summary="Resolve the hypothesis by the verdict (or by its own expectations)")
async def close_hypothesis(ctx: StepContext) -> dict[str, Any]:
    hypothesis_id = ctx.state.hypothesis_id
    if hypothesis_id is None:
        return {"skipped": "no hypothesis"}
    hypothesis = await ctx.store.run(get_hypothesis, ctx.store.store, hypothesis_id)
    verdict = str(ctx.state.conclusion.verdict or "inconclusive")
    status = _status_from(verdict)
    why = f"experiment #{ctx.experiment_id} ({ctx.playbook}): {verdict}"
    if hypothesis is not None and hypothesis.expectations and not ctx.state.restart.start_failed:
        # the hypothesis' expectations mean what the try's own do: relative ones against the start
        # before the restart (bot.loop.expectations), and one not measured refutes nothing
        now = await load_measured(
            ctx.store, "the start after this try", ctx.state.after.snapshot_id, ctx.state.after.set_id
        )
        before = await load_measured(
            ctx.store, "the start before this try", ctx.state.before.snapshot_id, ctx.state.before.set_id
        )
        results = evaluate_all([parse_expectation(text) for text in hypothesis.expectations], now, before)
        if any(r.failed for r in results):
            status = "refuted"
        elif all(r.passed for r in results):
            status = "confirmed"
        else:
            status = "inconclusive"
        why += "; " + "; ".join(r.describe() for r in results)
    row = await ctx.store.run(resolve_hypothesis, ctx.store.store, hypothesis_id, status=status, because=why)
    await ctx.emit(
        TextBlock(f"hypothesis #{hypothesis_id} ({row.statement}): {status} — {why}", "Hypothesis")
    )
    return {"hypothesis_id": hypothesis_id, "status": status}


def _implied_delta(before: Any, after: Any) -> dict[str, Any]:
    a: Mapping[str, Any] = (before.implied if before is not None else {}) or {}
    b: Mapping[str, Any] = (after.implied if after is not None else {}) or {}
    return {key: value for key, value in b.items() if key not in a or a[key] != value}


@action("learn", summary="Add what the experiment showed to the knowledge base (implied flags, effects)")
async def learn(ctx: StepContext) -> dict[str, Any]:
    changes = [c for c in changes_of(ctx) if c.flag is not None and c.op in ("add", "set")]
    if not changes:
        return {"observations": 0}
    before = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.before.snapshot_id)
    after = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.after.snapshot_id)
    if ctx.state.restart.start_failed:
        return await _learn_failure(ctx, changes, before)
    count = await learn_memory_cost(ctx, before, after)
    gpu, cap = gpu_facts(after)
    version = after.sglang_version if after is not None else None
    where = f"on {gpu or 'an unknown GPU'} (compute capability {cap or '?'}), SGLang {version or '?'}"
    together = " together with " + ", ".join(c.flag or "" for c in changes[1:]) if len(changes) > 1 else ""
    for change in changes:
        flag = change.flag or ""
        notes = []
        implied = _implied_delta(before, after)
        if implied:
            notes.append(
                (
                    "implied",
                    f"with {flag}{together} {where}, server_args also changed: "
                    + ", ".join(f"{k}={v!r}" for k, v in sorted(implied.items())),
                    {"implied": implied},
                )
            )
        if len(changes) == 1:
            a = snapshot_value(before, "max_running_requests")
            b = snapshot_value(after, "max_running_requests")
            verdict = ctx.state.conclusion.verdict
            if a is not None and b is not None and a != b:
                notes.append(
                    (
                        "capacity-lowered" if b < a else "capacity-raised",
                        f"{change.describe()} {where} moved effective max_running_requests {a} -> {b}",
                        {"before": a, "after": b},
                    )
                )
            elif verdict == "no-effect":
                notes.append(("no-effect", f"{change.describe()} {where} had no measurable effect", {}))
        for kind, text, detail in notes:
            await record_observation(ctx, after, flag=flag, kind=kind, text=text, detail=detail)
            count += 1
    return {"observations": count}


def _learnable(changes: list[Change], before: Snapshot) -> Change | None:
    """The one flag of a try whose workspace the two starts measure: exactly one added flag the
    model does not compute (the rest are explained by its rules), none of the environment, and
    not on the start before already."""
    if any(change.op in ("env-set", "env-unset") for change in changes):
        return None
    unmodelled = [change for change in changes if change.flag not in MODELLED_FLAGS]
    if len(unmodelled) != 1 or unmodelled[0].op not in ("add", "set") or unmodelled[0].flag is None:
        return None
    running = (before.server_args or {}).get(server_args_key(unmodelled[0].flag))
    return None if running is True else unmodelled[0]


async def learn_memory_cost(ctx: StepContext, before: Snapshot | None, after: Snapshot | None) -> int:
    """Record the workspace of the try's one unmodelled flag (0 or 1 observation recorded)."""
    if before is None or after is None or recorded_figures(before) is None or recorded_figures(after) is None:
        return 0
    change = _learnable(changes_of(ctx), before)
    identity = identity_of(after)
    if change is None or change.flag is None or identity != identity_of(before) or not identity.complete:
        return 0
    cost = learn_flag_cost(figures_of(before), figures_of(after))
    if isinstance(cost, Unknown):
        await ctx.emit(TextBlock(f"{change.flag}: its memory cost was not learned ({cost})", "Learned"))
        return 0
    text = (
        f"{change.flag} takes {cost:.2f} GiB per GPU before the memory profile with {identity.describe()}: "
        f"measured by experiment #{ctx.experiment_id} on {ctx.target} (snapshots #{before.id} -> #{after.id}); "
        "predict and the try preflight use it from now on for this model, GPU and release"
    )
    await record_observation(
        ctx,
        after,
        flag=change.flag,
        kind=MEMORY_COST,
        text=text,
        detail=cost_detail(identity, cost, before.id, after.id, value=change.value),
    )
    return 1


async def _learn_failure(ctx: StepContext, changes: list[Any], before: Any) -> dict[str, Any]:
    """A change the server would not start with is worth remembering, with its fatal line."""
    gpu, cap = gpu_facts(before)
    restart = ctx.state.restart
    fatal = restart.fatal_line or restart.failure_reason or "no fatal line found"
    described = ", ".join(change.describe() for change in changes)
    text = f"{described}: the server did not start on {gpu or 'an unknown GPU'} ({cap or '?'}): {fatal}"
    for change in changes:
        detail = {"fatal_line": restart.fatal_line, "reason": restart.failure_reason}
        await record_observation(
            ctx, before, flag=change.flag or "", kind="failure", text=text, detail=detail, emit=False
        )
    await ctx.emit(TextBlock(text, "Learned"))
    return {"observations": len(changes)}
