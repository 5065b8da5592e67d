"""The timer of `policy.on_regression = "ask"`: a question nobody answered by its deadline gets
its default action (`bot.app.ask.due_action`), once, said in its thread; the revert is the normal
`revert ID` run (`bot.app.runs.run_playbook`). Called by the scheduler's job `ask-decisions`
every minute and when `flagbot serve` starts (`bot.schedule.jobs.decisions_job`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from bot.app.ask import TIMEOUT_ACTOR, AlreadyDecidedError, answer, ask_deadline, due_decisions
from bot.app.context import AppContext
from bot.app.notify import Notice, Notifier
from bot.app.playbooks import resolve_playbook
from bot.app.runs import run_playbook
from bot.commands import parse_command
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.store.loop_models import Experiment

RevertRunner = Callable[[AppContext, Experiment], Awaitable[str]]
"""Runs the revert of an experiment whose default action is `revert`; says how it ended."""


async def run_revert(ctx: AppContext, experiment: Experiment) -> str:
    """The normal `revert ID target=T` run (the same playbook call a Revert button or command
    makes, with its checks: freeze, restart budget, the experiment's own target), by the timeout."""
    invocation = parse_command(f"revert {experiment.id} target={experiment.target}")
    call = resolve_playbook(ctx.settings, invocation)
    done = await run_playbook(
        ctx, call, MemoryReporter(), actor=TIMEOUT_ACTOR, admin=False, restart_approved=True
    )
    return f"revert run #{done.outcome.experiment_id} ended {done.outcome.status}"


@dataclass(frozen=True)
class TimedOut:
    """A question whose deadline passed: the default action taken, and what the thread was told."""

    experiment_id: int
    action: str
    text: str


async def apply_due_decisions(
    ctx: AppContext, now: datetime, notifier: Notifier, *, revert: RevertRunner = run_revert
) -> list[TimedOut]:
    """Take the default action of every question whose deadline passed (`due_action`), each at
    most once whoever else answers meanwhile (the claim of `answer`), and tell its thread. A revert
    that cannot run (the target frozen, busy, over its restart budget) is said in the thread; the
    decision stays recorded as revert, and `revert ID` can be run by hand."""
    done: list[TimedOut] = []
    for experiment, action in await due_decisions(ctx, now):
        assert experiment.id is not None
        try:
            await answer(ctx, experiment.id, action, actor=TIMEOUT_ACTOR)
        except AlreadyDecidedError:
            continue
        state = RunState.load(experiment.state).conclusion
        deadline = ask_deadline(experiment)
        by = f"{deadline:%H:%M} UTC" if deadline is not None else "the deadline"
        if action == "keep":
            text = f"Nobody answered by {by}: flagbot kept the change of experiment #{experiment.id}."
        else:
            try:
                ended = await revert(ctx, experiment)
            except Exception as exc:  # the thread must hear why the default did not happen
                ended = f"the revert could not run: {exc}; run `revert {experiment.id}` by hand"
            text = f"Nobody answered by {by}: flagbot reverted the change of experiment #{experiment.id} ({ended})."
        await notifier.notify(Notice(text, (), state.ask_channel, state.ask_thread))
        done.append(TimedOut(experiment.id, action, text))
    return done
