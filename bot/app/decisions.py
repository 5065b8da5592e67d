"""What comes next after a run: which buttons a finished run's card offers, and the command each
one sends. One place for the rules, so the Slack card, its clicks and any other front end agree.

The rules read the stored experiment only (its playbook, status, verdict and `RunState`):

- Only a run that changed the target (a `try`, or a playbook of its shape: the change was applied
  and restarted) gets buttons. A baseline, verify, revert or isolate run, a dry run, and a run that
  stopped before its restart have none: nothing of theirs is left to keep, revert or re-measure
  (except Restart anyway, below).
- **Keep** only where a decision is pending (`decision_pending`). Never the primary button after a
  regression: the primary is Revert then.
- **Revert** only where the change is still applied (`change_in_place`).
- **Re-run benchmark** only where the change is still applied and the run stored an after-set:
  `bench rerun=ID` measures the running server with that set's profile, levels and backend and
  compares the new set with the stored after-set.
- **Isolate** only after a regression of a change of more than one flag (isolating one flag
  tells nothing), on the expectation that failed, else on the metric that decided the regression
  (`isolate_expectation`).
- **Restart anyway** only on a try its preflight stopped before the restart because an
  expectation was predicted to fail (`RunState.prediction.stopped`): the same try with
  `force=yes` (`force_command`); the permission rules of a typed `force=` apply to the click.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.bench.compare_sets import load_comparison
from bot.loop.run_state import RunState, RunStateError
from bot.loop.snapshot_values import snapshot_value
from bot.sglang.change import Change
from bot.sglang.flagset import FlagItem
from bot.store import AsyncStore
from bot.store.bench_repo import LoadedSet, load_set
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment
from bot.store.snapshots import get_snapshot

FINISHED = frozenset({"succeeded", "failed", "cancelled", "rolled-back", "interrupted"})
"""Statuses of a run that is over (its card shows what comes next)."""
NO_CHANGE_PLAYBOOKS = frozenset({"baseline", "verify", "revert", "isolate"})
"""Built-in playbooks whose run leaves no change of its own to keep, revert or re-measure."""
UNDECIDED_VERDICTS = frozenset({"regressed", "inconclusive", "undecided", "not-measured"})
"""Verdicts after which a change still applied, with no keep or revert recorded, awaits a decision."""
CAPACITY_METRIC = "max_running_requests"


@dataclass(frozen=True)
class NextActions:
    """The buttons a finished run's card offers, in order, and which one is primary (green)."""

    actions: tuple[str, ...] = ()
    primary: str | None = None


def _state(experiment: Experiment) -> RunState | None:
    try:
        return RunState.load(experiment.state)
    except RunStateError:
        return None


def _changed_target(experiment: Experiment, state: RunState) -> bool:
    """The run applied a change of its own and restarted (not a dry run, not a read, not a revert
    or an isolate, whose probes end where the command said)."""
    return (
        experiment.playbook not in NO_CHANGE_PLAYBOOKS
        and not experiment.params.get("dry_run")
        and state.plan.reverting_experiment is None
        and state.isolate is None
        and state.restart.applied
    )


def change_in_place(experiment: Experiment) -> bool:
    """The experiment's change is still applied on the target: it restarted with it, the start
    did not fail, nothing rolled it back or restored the start before, and no revert was decided."""
    state = _state(experiment)
    return state is not None and _in_place(experiment, state)


def _in_place(experiment: Experiment, state: RunState) -> bool:
    if not _changed_target(experiment, state):
        return False
    restart = state.restart
    return (
        not restart.start_failed
        and not restart.rolled_back
        and not restart.restored
        and state.conclusion.kept is not False
    )


def decision_pending(experiment: Experiment) -> bool:
    """A finished run leaves a change on the target that nobody decided to keep or revert: still
    applied, its verdict regressed or undecided, and `conclusion.kept` unset (the `decide` step
    never recorded a decision; `policy.on_regression = "ask"` leaves it so until someone answers)."""
    state = _state(experiment)
    return state is not None and _pending(experiment, state)


def _pending(experiment: Experiment, state: RunState) -> bool:
    if experiment.status not in FINISHED or not _in_place(experiment, state):
        return False
    verdict = experiment.verdict or state.conclusion.verdict or "inconclusive"
    answered = state.conclusion.answer is not None  # Keep or Revert answered (`bot.app.ask`)
    return state.conclusion.kept is None and not answered and verdict in UNDECIDED_VERDICTS


def changed_flag_count(experiment: Experiment) -> int:
    """How many flags (or environment variables) the run's command changed."""
    changes = experiment.params.get("changes")
    return len(changes) if isinstance(changes, list) else 0


def _stopped_by_prediction(experiment: Experiment, state: RunState) -> bool:
    return (
        experiment.playbook == "try"
        and state.prediction is not None
        and state.prediction.stopped is not None
        and not state.restart.applied
    )


def _change_words(change: Change) -> list[str]:
    """A change as the words that typed it (`Change.describe`, one word per value)."""
    if change.op == "env-set":
        return ["env", "set", f"{change.env_name}={change.env_value}"]
    if change.op == "env-unset":
        return ["env", "unset", str(change.env_name)]
    if change.op == "remove" or change.flag is None:
        return ["remove", str(change.flag)]
    return [change.op, *FlagItem(change.flag, change.value).argv()]


def force_command(experiment: Experiment) -> str:
    """The try again, as typed, with `force=yes`: its changes, expectations and options (each word
    quoted for the command line's own reader, `bot.commands.tokens`)."""
    params = experiment.params
    words = [
        "try",
        *(
            word
            for item in params.get("changes") or []
            for word in Change.from_json(item).describe().split(" ", 2)
        ),
    ]
    words += [str(text) for text in params.get("expect") or []]
    for name in ("profile", "keep", "because", "hypothesis"):
        if params.get(name) not in (None, ""):
            words.append(f"{name}={params[name]}")
    words += ["force=yes", f"target={experiment.target}"]
    return shlex.join(words)


def next_actions(experiment: Experiment) -> NextActions:
    """The buttons of a finished run's card (see the module's rules); none for a run not over."""
    state = _state(experiment)
    if state is not None and experiment.status in FINISHED and _stopped_by_prediction(experiment, state):
        return NextActions(("force",), None)
    if state is None or experiment.status not in FINISHED or not _changed_target(experiment, state):
        return NextActions()
    in_place = _in_place(experiment, state)  # the state read once, for every rule
    pending = _pending(experiment, state)
    regressed = (experiment.verdict or state.conclusion.verdict) == "regressed"
    actions: list[str] = []
    if in_place:
        actions.append("revert")
    if pending:
        actions.append("keep")
    if in_place and state.after.set_id is not None:
        actions.append("rerun")
    if regressed and changed_flag_count(experiment) > 1:
        actions.append("isolate")
    primary = "revert" if regressed and pending else None
    return NextActions(tuple(actions), primary)


async def next_actions_of(store: AsyncStore, experiment_id: int | None) -> NextActions:
    """`next_actions` of a stored experiment (none when there is no such experiment)."""
    if experiment_id is None or experiment_id < 1:
        return NextActions()
    found = await store.run(get_experiment, store.store, experiment_id)
    return NextActions() if found is None else next_actions(found)


async def _experiment(ctx: AppContext, experiment_id: int) -> Experiment:
    found = await ctx.store.run(get_experiment, ctx.store.store, experiment_id)
    if found is None:
        raise AppError(f"no experiment #{experiment_id}")
    return found


async def isolate_expectation(ctx: AppContext, experiment: Experiment) -> str:
    """What an Isolate of this regressed run checks: the first of its own expectations that failed;
    else the metric that decided the comparison (a capacity metric: `max_running_requests>=N`, N
    the start before; a benchmark metric: no worse than the verdicts' minimum effect, relative to
    the start before); else the capacity of the start before."""
    state = RunState.load(experiment.state)
    for result in state.conclusion.expectations:
        if result.get("outcome") == "fail" and isinstance(result.get("expectation"), str):
            return str(result["expectation"])
    metric = None
    if state.conclusion.comparison_id is not None:
        found = await ctx.store.run(load_comparison, ctx.store.store, state.conclusion.comparison_id)
        if found is not None and found[0].guarded_by:
            metric = found[0].guarded_by.split("@", 1)[0]
    verdicts = ctx.settings.verdicts
    if metric is not None and metric not in verdicts.capacity and metric in verdicts.guarded:
        effect = verdicts.min_effect_for.get(metric, verdicts.min_effect)
        better = verdicts.guarded[metric]
        return f"{metric}>=-{effect:g}%" if better == "higher" else f"{metric}<=+{effect:g}%"
    before = await ctx.store.run(get_snapshot, ctx.store.store, state.before.snapshot_id)
    want = snapshot_value(before, CAPACITY_METRIC)
    if want is None:
        raise AppError(f"experiment #{experiment.id} has no start before to compare the capacity with")
    return f"{CAPACITY_METRIC}>={want}"


async def button_command(ctx: AppContext, experiment_id: int, action: str) -> str | None:
    """The command a run's button sends, on the experiment's own target (never the default one);
    None for a button that sends no command (Keep records the decision only). AppError when the
    button does not fit the experiment (any more): e.g. Revert of a change already reverted."""
    experiment = await _experiment(ctx, experiment_id)
    target = experiment.target
    if action == "cancel":
        return f"cancel {experiment_id} target={target}"
    if action == "keep":
        return None
    if action not in next_actions(experiment).actions:
        raise AppError(f"experiment #{experiment_id} offers no {action} now (its card says what does)")
    if action == "revert":
        return f"revert {experiment_id} target={target}"
    if action == "rerun":
        return f"bench rerun={experiment_id} target={target}"
    if action == "force":
        return force_command(experiment)
    if action == "isolate":
        expectation = await isolate_expectation(ctx, experiment)
        return f"isolate {expectation} since={experiment_id} target={target}"
    raise AppError(f"no command for a {action} button")


@dataclass(frozen=True)
class Rerun:
    """A benchmark re-run of an experiment: the stored after-set it repeats and compares with."""

    experiment: Experiment
    after: LoadedSet

    @property
    def set_id(self) -> int:
        assert self.after.set.id is not None
        return self.after.set.id

    @property
    def concurrency(self) -> tuple[int, ...] | None:
        levels = self.after.set.params.get("concurrency")
        if isinstance(levels, list) and levels and all(isinstance(c, int) for c in levels):
            return tuple(levels)
        return None

    def describe(self) -> str:
        return f"set #{self.set_id} (the after-set of experiment #{self.experiment.id})"


async def rerun_of(ctx: AppContext, experiment_id: int, target: str | None) -> Rerun:
    """The stored after-set a `bench rerun=ID` repeats; AppError when the experiment has none, or
    belongs to another target than the one named."""
    experiment = await _experiment(ctx, experiment_id)
    if target is not None and target != experiment.target:
        raise AppError(
            f"rerun={experiment_id}: experiment #{experiment_id} ran on {experiment.target}, not {target}",
            usage=True,
        )
    state = _state(experiment)
    set_id = state.after.set_id if state is not None else None
    if set_id is None:
        raise AppError(f"rerun={experiment_id}: experiment #{experiment_id} stored no after-set to re-run")
    after = await ctx.store.run(load_set, ctx.store.store, set_id)
    if after is None:
        raise AppError(f"rerun={experiment_id}: its after-set #{set_id} is no longer stored")
    return Rerun(experiment, after)
