"""`policy.on_regression = "ask"`: the question a regressed `try` leaves in its thread, answered
by Keep or Revert (a button or a command, CLI and Slack alike), or by the default action when
nobody answers by the deadline.

Rules (one place, so the button, the command and the timer agree):

- A question is pending while `bot.app.decisions.decision_pending` holds and the run recorded
  a deadline (`conclusion.ask_deadline`, set by the `decide` step).
- Only one answer wins: answering claims the key `decision:ID` in the database
  (`bot.store.seen_keys.first_time`, a unique row). A second click, or the timer after an answer,
  finds the key taken and changes nothing; it is told so (`AlreadyDecidedError`).
- Keep records `conclusion.answer = "keep"`, `conclusion.kept = True` (the after-start becomes the
  known-good one) and an audit row `keep`; Revert records `conclusion.answer = "revert"` and an
  audit row `revert-decision`; the revert itself is the normal `revert ID` run
  (`bot.app.runs.run_playbook`), after whose success `conclusion.kept = False` (`after_revert`).
- The deadline (`due_action`): past it, with no answer, the default action (`ask_default`) is
  due; `due_decisions` lists the experiments whose default is due, for the scheduler's timer and
  for `flagbot serve`'s start (a deadline passed while the bot was down is applied then).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.app.context import AppContext
from bot.app.decisions import decision_pending
from bot.app.errors import AppError
from bot.loop.run_state import RunState, RunStateError
from bot.store.experiments import get_experiment, list_experiments, update_experiment
from bot.store.loop_models import Experiment
from bot.store.records import audit
from bot.store.seen_keys import first_time
from bot.store.snapshots import set_known_good

TIMEOUT_ACTOR = "flagbot (timeout)"
"""Who the audit trail names when the default action ran because nobody answered."""
ANSWERS = ("keep", "revert")


class AlreadyDecidedError(AppError):
    """The question was answered already (or nothing is pending): nothing changed."""


@dataclass(frozen=True)
class Answer:
    experiment_id: int
    target: str
    decision: str
    actor: str

    def text(self) -> str:
        verb = "kept the change" if self.decision == "keep" else "decided to revert the change"
        return f"experiment #{self.experiment_id}: {self.actor} {verb}"


async def keep_command(ctx: AppContext, experiment_id: int, target: str, *, actor: str) -> Answer:
    """`keep ID [target=NAME]`: answer Keep; AppError when the experiment ran on another target
    than the one named (nothing changed)."""
    found = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if found is not None and found.target != target:
        raise AppError(
            f"experiment #{experiment_id} ran on target {found.target}, not {target}: "
            f"`keep {experiment_id} target={found.target}`",
            usage=True,
        )
    return await answer(ctx, experiment_id, "keep", actor=actor)


def ask_deadline(experiment: Experiment) -> datetime | None:
    """The deadline of the run's pending question; None when it asked nothing."""
    try:
        state = RunState.load(experiment.state)
    except RunStateError:
        return None
    if state.conclusion.ask_deadline is None:
        return None
    return datetime.fromisoformat(state.conclusion.ask_deadline)


def due_action(experiment: Experiment, now: datetime) -> str | None:
    """The default action (`keep` or `revert`) due now: the question is still pending and its
    deadline has passed; None otherwise (answered, not asked, or not yet due)."""
    deadline = ask_deadline(experiment)
    if deadline is None or not decision_pending(experiment) or now < deadline:
        return None
    default = RunState.load(experiment.state).conclusion.ask_default
    return default if default in ANSWERS else "revert"


async def answer(ctx: AppContext, experiment_id: int, decision: str, *, actor: str) -> Answer:
    """Record the answer to a pending question (see the module's rules). AppError for an unknown
    experiment or answer; AlreadyDecidedError (nothing changed) when nothing is pending any more."""
    if decision not in ANSWERS:
        raise AppError(f"{decision!r} is no answer to a pending decision: keep or revert")
    found = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if found is None:
        raise AppError(f"no experiment #{experiment_id}")
    if not decision_pending(found):
        raise AlreadyDecidedError(
            f"experiment #{experiment_id} has no decision pending (decided already, or nothing to decide): "
            "nothing changed"
        )
    if not await ctx.store.run(first_time, ctx.store.store, f"decision:{experiment_id}", actor=actor):
        raise AlreadyDecidedError(f"experiment #{experiment_id} was answered already: nothing changed")
    state = RunState.load(found.state)
    state.conclusion.answer = decision
    if decision == "keep":
        state.conclusion.kept = True  # a Revert sets kept False once its revert run succeeded
    state.conclusion.decided_by = actor
    await ctx.store.run(update_experiment, ctx.store.store, experiment_id, state=state.dump())
    if decision == "keep" and state.after.snapshot_id is not None:
        await ctx.store.run(set_known_good, ctx.store.store, found.target, state.after.snapshot_id)
    await ctx.store.run(
        audit,
        ctx.store.store,
        actor=actor,
        target=found.target,
        action="keep" if decision == "keep" else "revert-decision",
        experiment_id=experiment_id,
        detail={"decision": decision, "experiment_id": experiment_id},
    )
    return Answer(experiment_id, found.target, decision, actor)


async def answer_revert_if_pending(ctx: AppContext, experiment_id: int, *, actor: str) -> Answer | None:
    """Before a revert of this experiment runs: record the revert as the answer when its decision
    is pending (AlreadyDecidedError when another answer won meanwhile); None when nothing was pending."""
    found = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if found is None or not decision_pending(found):
        return None
    return await answer(ctx, experiment_id, "revert", actor=actor)


async def after_revert(ctx: AppContext, experiment_id: int, status: str) -> None:
    """A revert run of this experiment ended: when it succeeded after a Revert answer, record the
    change as not kept (`conclusion.kept = False`)."""
    found = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if found is None or status != "succeeded":
        return
    state = RunState.load(found.state)
    if state.conclusion.answer != "revert" or state.conclusion.kept is not None:
        return
    state.conclusion.kept = False
    await ctx.store.run(update_experiment, ctx.store.store, experiment_id, state=state.dump())


def _due(store_rows: list[Experiment], now: datetime) -> list[tuple[Experiment, str]]:
    return [(row, action) for row in store_rows if (action := due_action(row, now)) is not None]


async def pending_questions(ctx: AppContext) -> list[Experiment]:
    """Finished experiments of every configured target with a question still pending."""
    rows: list[Experiment] = []
    for target in sorted(ctx.settings.targets):
        found = await ctx.store.run(list_experiments, ctx.store.store, target, limit=200)
        rows.extend(row for row in found if ask_deadline(row) is not None and decision_pending(row))
    return rows


async def due_decisions(ctx: AppContext, now: datetime) -> list[tuple[Experiment, str]]:
    """The pending questions whose deadline passed, with their default action."""
    return _due(await pending_questions(ctx), now)
