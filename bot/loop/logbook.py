"""A target's story: what was tried, what it showed, what was learned, in time order.

Why a function and not a query in the CLI: `flagbot log`, `/flagbot log` and the weekly digest
tell the same story from the same rows (experiments, their hypotheses and verdicts, knowledge
observations, baselines), so it is built once here as plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.loop.run_state import RunState
from bot.sglang.change import Change
from bot.store import Store
from bot.store.baselines import baselines_of
from bot.store.experiments import list_experiments
from bot.store.hypotheses import list_hypotheses
from bot.store.loop_models import Experiment
from bot.store.observations import observations_of


@dataclass(frozen=True)
class Entry:
    at: datetime
    kind: str
    ref: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at.isoformat(), "kind": self.kind, "ref": self.ref, "text": self.text}


def _experiment_text(row: Experiment) -> str:
    params = row.params or {}
    what = row.playbook
    changes = params.get("changes") or []
    if changes:
        what += " " + ", ".join(Change.from_json(c).describe() for c in changes)
    if params.get("expect"):
        what += " expecting " + " ".join(params["expect"])
    if params.get("what") or params.get("flags"):
        what += f" {params.get('what') or ''} {params.get('flags') or ''}".rstrip()
    outcome = row.status + (f", verdict {row.verdict}" if row.verdict else "")
    summary = f": {row.summary}" if row.summary else ""
    state = RunState.load(row.state)
    kept = state.conclusion.kept
    tail = "" if kept is None else ("; kept" if kept else "; reverted")
    culprits = state.isolate.culprits if state.isolate is not None else []
    if culprits:
        tail += "; culprit(s): " + ", ".join(culprits)
    if state.prediction is not None and state.prediction.stopped is None:  # a stop says it in its summary
        tail += "; " + state.prediction.describe()
    return f"{what} — {outcome}{summary}{tail}"


@dataclass(frozen=True)
class PredictionPoint:
    """One try's capacity prediction next to what its start measured (`log`'s error over time)."""

    at: datetime
    experiment_id: int
    predicted: int | None
    low: int | None
    high: int | None
    measured: int | None
    missed: bool | None
    text: str

    @property
    def error(self) -> int | None:
        return None if self.predicted is None or self.measured is None else self.measured - self.predicted


def prediction_points(
    store: Store, target: str, *, since: datetime | None = None, limit: int = 50
) -> list[PredictionPoint]:
    """The tries of `target` that made a prediction, oldest first (of the newest `limit` experiments)."""
    points: list[PredictionPoint] = []
    for row in list_experiments(store, target, since=since, limit=limit):
        found = RunState.load(row.state).prediction
        if found is None or row.id is None:
            continue
        points.append(
            PredictionPoint(
                row.created_at,
                row.id,
                found.predicted_capacity,
                found.predicted_low,
                found.predicted_high,
                found.measured_capacity,
                found.missed,
                found.describe(),
            )
        )
    points.sort(key=lambda point: (point.at, point.experiment_id))
    return points


def story(store: Store, target: str, *, since: datetime | None = None, limit: int = 50) -> list[Entry]:
    """Experiments, hypotheses, baselines and observations of `target`, oldest first (the newest `limit`)."""
    entries: list[Entry] = []
    for row in list_experiments(store, target, since=since, limit=limit):
        entries.append(Entry(row.created_at, "experiment", f"#{row.id}", _experiment_text(row)))
    for hyp in list_hypotheses(store, target):
        if since is not None and hyp.created_at < since:
            continue
        text = f"{hyp.statement} — {hyp.status}" + (f" ({hyp.because})" if hyp.because else "")
        entries.append(Entry(hyp.resolved_at or hyp.created_at, "hypothesis", f"H{hyp.id}", text))
    for base in baselines_of(store, target):
        if since is None or base.pinned_at >= since:
            text = f"baseline pinned: snapshot #{base.snapshot_id}, set #{base.set_id}" + (
                f" ({base.note})" if base.note else ""
            )
            entries.append(Entry(base.pinned_at, "baseline", f"B{base.id}", text))
    for obs in observations_of(store, target):
        if since is None or obs.observed_at >= since:
            text = obs.text
            if obs.retracted_at is not None:
                text = f"[retracted by {obs.retracted_by}: {obs.retracted_because}] {text}"
            entries.append(Entry(obs.observed_at, "learned", obs.flag, text))
    entries.sort(key=lambda entry: (entry.at, entry.kind))
    return entries[-limit:]
