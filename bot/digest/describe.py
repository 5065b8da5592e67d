"""An experiment in a few words, and the incidents (failed starts, rollbacks) it went through.

Why here and not the log's sentence (`bot.loop.logbook`): the digest shows the change, the
verdict and the kept/reverted decision in separate columns, so it needs the parts, not one
sentence; both read the same params and state the playbooks write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bot.digest.model import Incident
from bot.loop.run_state import RunFacts
from bot.sglang.change import Change
from bot.store.digest_reads import WeekExperiment

__all__ = ["describe_changes", "describe_experiment", "incidents_of"]


def describe_changes(params: Mapping[str, Any] | None) -> list[str]:
    """Each change of a try's params in the grammar's words (`add --enable-x`); unreadable ones as-is."""
    out = []
    for raw in (params or {}).get("changes") or []:
        try:
            out.append(Change.from_json(raw).describe())
        except (KeyError, TypeError, ValueError):
            out.append(str(raw))
    return out


def describe_experiment(experiment: WeekExperiment, state: RunFacts, changes: list[str] | None = None) -> str:
    """What the run set out to do: `add --x, set --y 2`, `revert #12`, `verify max_running_requests>=48`.
    `state` is the facts of the experiment's run state and `changes` its `describe_changes`, each
    read once by the caller (a week can hold 100,000)."""
    params = experiment.params or {}
    parts: list[str] = []
    if changes is None:
        changes = describe_changes(params)
    if changes:
        parts.append(", ".join(changes))
    if experiment.playbook == "revert":
        undone = state.reverting_experiment
        what, flags = params.get("what"), params.get("flags")
        if undone is not None:
            parts.append(f"#{undone}'s change")
        elif flags:
            parts.append(f"remove {flags}")
        elif what:
            parts.append(f"#{what}" if str(what).isdigit() else str(what))
        else:
            parts.append("the latest kept try")
    expect = params.get("expect") or []
    if expect:
        parts.append("expecting " + " ".join(str(e) for e in expect))
    culprits = state.culprits
    if culprits:
        parts.append("culprit(s): " + ", ".join(str(c) for c in culprits))
    if params.get("dry_run"):
        parts.append("(dry run)")
    return " ".join(parts) if parts else experiment.playbook


def incidents_of(
    experiments: Sequence[WeekExperiment], states: Mapping[int, RunFacts]
) -> tuple[list[Incident], list[Incident]]:
    """(failed starts, rollbacks) among the week's experiments, oldest first; `states` by id."""
    failed: list[Incident] = []
    rolled: list[Incident] = []
    for e in experiments:
        ident = e.id
        facts = states[ident]
        if facts.start_failed or e.verdict == "failed-to-start":
            line = facts.fatal_line
            text = line if line else (e.summary or "the server did not become ready")
            failed.append(Incident(ident, e.target, "failed start", text, e.created_at))
        if e.status == "rolled-back" or facts.rolled_back:  # a decided revert only sets `restored`
            text = e.summary or "back on the flags from before"
            rolled.append(Incident(ident, e.target, "rollback", text, e.created_at))
    return failed, rolled
