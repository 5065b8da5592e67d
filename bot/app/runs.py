"""Playbook runs and their control: build the engine, settle what a stopped flagbot left, run,
cancel. One place for every front end (the CLI, Slack, `flagbot serve` at start).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.app.ask import after_revert, answer_revert_if_pending
from bot.app.change_rights import check_call
from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.app.freeze import call_changes_target, check_call_not_frozen_by
from bot.app.playbooks import PlaybookCall, effects_of, load_all
from bot.commands import CommandError
from bot.loop.engine import Engine, LeaseHeld
from bot.loop.playbook import Playbook
from bot.loop.report import MemoryReporter, Reporter, RunOutcome
from bot.loop.restart_budget import WINDOW, allowance
from bot.store.experiments import get_experiment, unfinished_experiments
from bot.store.loop_models import Experiment
from bot.store.models import utcnow
from bot.store.records import gate_facts


def build_engine(
    ctx: AppContext, reporter: Reporter | None = None, *, books: Mapping[str, Playbook] | None = None
) -> Engine:
    """The engine every command runs with: the context's store and lease time to live, the
    playbooks as `load_all` reads them (the caller's, when it already has them)."""
    return Engine(
        ctx.settings,
        ctx.store,
        reporter if reporter is not None else MemoryReporter(),
        playbooks=books if books is not None else load_all(ctx.settings),
        lease_ttl_s=ctx.lease_ttl_s,
        cache_dir=ctx.cache_dir,
    )


async def settle_every_target(
    ctx: AppContext, *, books: Mapping[str, Playbook] | None = None, only: Collection[str] | None = None
) -> list[tuple[str, list[RunOutcome] | Exception]]:
    """At `flagbot serve`'s start (and on the leader, for runs a dead replica left): settle each
    target with unfinished runs, or only those of `only`. A target that cannot be reached (or
    whose lease is held) is given with its error and left to the next command."""
    rows = await ctx.store.run(unfinished_experiments, ctx.store.store)
    books = books if books is not None else load_all(ctx.settings)
    results: list[tuple[str, list[RunOutcome] | Exception]] = []
    for target in sorted({row.target for row in rows if only is None or row.target in only}):
        try:
            results.append((target, await build_engine(ctx, books=books).reconcile(target)))
        except Exception as exc:  # unreachable, diverged, lease held: the next command retries
            results.append((target, exc))
    return results


@dataclass(frozen=True)
class PlaybookRun:
    """A finished command run: what was settled first, and the run itself."""

    outcome: RunOutcome
    settled: list[RunOutcome] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.outcome.status == "succeeded",
            "reconciled": [item.to_json() for item in self.settled],
            **self.outcome.to_json(),
        }


REVERTING_ACTIONS = frozenset({"plan_revert"})
"""Steps that take back a named experiment's change (their `what` is the experiment id)."""


def reverted_experiment(call: PlaybookCall) -> int | None:
    """The experiment id the run takes back (`revert 12`, `run revert what=12`), else None."""
    for step in call.book.steps:
        if step.action in REVERTING_ACTIONS:
            what = str(step.resolve(call.params).get("what") or "")
            if what.isdigit():
                return int(what)
    return None


async def check_experiment_target(ctx: AppContext, call: PlaybookCall) -> None:
    """A revert of an experiment that ran on another target is refused (CommandError naming both):
    it would write the other target's flags, forced or not, onto this one. Nothing has run yet."""
    experiment_id = reverted_experiment(call)
    if experiment_id is None:
        return
    row = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if row is not None and row.target != call.target:
        raise CommandError(
            f"experiment #{experiment_id} ran on target {row.target}, not {call.target}: a revert acts "
            f"only on the experiment's own target (`revert {experiment_id} target={row.target}`)",
            usage="revert [EXPERIMENT|baseline] [flags=--X,--Y] [target=NAME] [force=yes]",
        )


class RestartLimitRefusedError(AppError):
    """`policy.max_restarts_per_hour` refused the run before anything ran (the message says
    when the next restart is allowed)."""


async def check_call_gates(ctx: AppContext, call: PlaybookCall, *, now: datetime | None = None) -> None:
    """What the store says a run may not do, from one trip to its thread: FrozenError when the
    run would change a frozen target (`bot.app.freeze`); RestartLimitRefusedError when a run that
    restarts the target does not fit the restarts the store counted for it in the last hour
    (`bot.loop.restart_budget`). A run needs one restart up front; `isolate` checks its worst case
    again once it knows how many changes it probes. No store trip for a run that changes nothing."""
    freezes = call_changes_target(call)
    config = ctx.settings.targets.get(call.target)  # None: resolve_playbook refused it already
    restarts = effects_of(call.book, call.params).restarts
    limit = config.policy.max_restarts_per_hour if restarts and config is not None else None
    if not freezes and limit is None:
        return
    at = now or utcnow()
    # a burst of commands on one target shares one read (a window start a moment earlier
    # counts at least the restarts this call's own would)
    facts = await ctx.store.run_shared(
        ("gate_facts", call.target), gate_facts, ctx.store.store, call.target, since=at - WINDOW
    )
    check_call_not_frozen_by(ctx.settings, call, facts.freeze_event, now=at)
    if limit is not None:
        refusal = allowance(facts.restarts, limit=limit, needed=1, now=at).refusal(
            call.target, f"`{call.book.name}`"
        )
        if refusal is not None:
            raise RestartLimitRefusedError(refusal)


async def check_call_in_store(ctx: AppContext, call: PlaybookCall) -> None:
    """Everything the store may refuse a run for before it starts: `check_call_gates` (freeze,
    restart limit), then `check_experiment_target` (a revert of another target's experiment)."""
    await check_call_gates(ctx, call)
    await check_experiment_target(ctx, call)


async def run_playbook(
    ctx: AppContext,
    call: PlaybookCall,
    reporter: Reporter,
    *,
    actor: str,
    admin: bool,
    restart_approved: bool,
    hypothesis_id: int | None = None,
    gates_checked: bool = False,
    on_settled: Callable[[RunOutcome], Awaitable[None]] | None = None,
    on_wait: Callable[[LeaseHeld, float], None] | None = None,
) -> PlaybookRun:
    """Settle what a dead run left on the target (mutating playbooks; each told to `on_settled`),
    then run this one. LeaseHeld when another holder has the target; ChangeRefusedError (nothing
    runs) when it asks for a change the target's policy does not allow `actor` (`admin`: whether
    the actor is an admin, `bot.app.change_rights`); CommandError (nothing run) for a revert of
    another target's experiment; RestartLimitRefusedError (nothing run) when a restart does not fit
    `policy.max_restarts_per_hour`; FrozenError (nothing run) when the run would change a frozen
    target (`bot.app.freeze`).

    `restart_approved`: whoever asked may restart this target (the CLI, whose user holds the bot
    host; in Slack, a request an approver approved). Without it, `heal` refuses to restart a
    diverged target whose policy has `require_approval` (`bot.target.heal`).

    `gates_checked`: the caller asked `check_call_in_store` just before (Slack, before it opens
    the thread), so it is not asked twice; a `wait=` run asks `check_call_gates` again once the
    target is free."""
    check_call(ctx.settings, call, admin=admin)
    if not gates_checked:
        await check_call_in_store(ctx, call)
    reverted = reverted_experiment(call)
    if reverted is not None:
        await answer_revert_if_pending(ctx, reverted, actor=actor)  # a pending Keep / Revert: Revert
    engine = build_engine(ctx, reporter, books=call.books)

    async def recheck() -> None:  # `wait=`: a freeze or restarts made while it waited still count
        await check_call_gates(ctx, call)

    settled = await engine.reconcile(call.target) if call.book.mutating else []
    if on_settled is not None:
        for outcome in settled:
            await on_settled(outcome)
    outcome = await engine.run(
        call.book,
        call.params,
        target=call.target,
        actor=actor,
        admin=admin,
        hypothesis_id=hypothesis_id,
        restart_approved=restart_approved,
        wait_s=call.wait_s,
        on_wait=on_wait,
        when_leased=recheck if call.wait_s > 0 else None,
        command=call_words(call),
    )
    if reverted is not None:
        await after_revert(ctx, reverted, outcome.status)
    return PlaybookRun(outcome, settled)


def call_words(call: PlaybookCall, limit: int = 200) -> str:
    """The call in short words (`try changes=… wait_s…`) for the waiting queue `status` lists:
    enough to tell two waiters apart, cut at `limit` characters."""
    words = [
        call.book.name,
        *(f"{key}={value}" for key, value in call.params.items() if value not in (None, "", [], {})),
    ]
    text = " ".join(words)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class CancelResult:
    """What `cancel` did: the experiment it named (None: nothing runs), and whether it was asked
    to stop (False: it had already ended)."""

    target: str
    experiment: Experiment | None
    experiment_id: int | None
    requested: bool

    def to_json(self) -> dict[str, object]:
        return {"ok": self.requested, "experiment_id": self.experiment_id}


async def cancel_candidate(ctx: AppContext, target: str, experiment_id: int | None) -> Experiment | None:
    """The experiment a `cancel` names: the given one, else the newest unfinished on the target
    (RBAC asks who owns it before the cancel runs)."""
    if experiment_id is not None:
        return await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    running = await ctx.store.run(unfinished_experiments, ctx.store.store, target)
    return running[-1] if running else None


async def cancel(ctx: AppContext, target: str, experiment_id: int | None, *, actor: str) -> CancelResult:
    """Ask a run to stop at its next step boundary (it then rolls back): the given experiment,
    else the newest unfinished one on the target."""
    row = await cancel_candidate(ctx, target, experiment_id)
    if row is None or row.id is None:
        return CancelResult(target, None, experiment_id, False)
    requested = await build_engine(ctx).cancel(row.id, actor)
    return CancelResult(target, row, row.id, requested)
