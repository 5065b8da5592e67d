"""`build_digest`: one week of the store read into a `Digest`.

Why a few wide queries and not the repository's per-target helpers: the digest covers every
target at once and must stay fast for a week of 10,000 experiments (bench/digest_scale.py), so
each table is read once for the week's range (`[start, end)` in UTC, from the ISO week in
`schedules.timezone`; the queries are `bot.store.digest_reads`) and the rows are grouped here.
Everything is read, nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from bot.config import Settings
from bot.digest.checks import failed_checks
from bot.digest.describe import describe_changes, describe_experiment, incidents_of
from bot.digest.model import (
    ChartData,
    Digest,
    ExperimentLine,
    FlagDecision,
    HypothesisLine,
    Learned,
    PredictionLine,
    TargetFlags,
)
from bot.digest.threads import threads_of
from bot.digest.week import IsoWeek, zone
from bot.heap import collections_paused
from bot.loop.capacity import PREDICTED_FAIL
from bot.loop.run_state import (
    FACT_PATHS,
    RUN_STATE_SCHEMA_VERSION,
    RunFacts,
    flags_from_json,
    prediction_error_text,
    run_facts,
    run_facts_of,
)
from bot.sglang.change import diff_flagsets
from bot.store import Store
from bot.store.bench_repo import get_set
from bot.store.digest_reads import (
    WeekExperiment,
    baseline_at,
    effective_before,
    experiment_states,
    experiments_between,
    hypotheses_of_week,
    latest_snapshot_before,
    observations_between,
    set_peaks_between,
    snapshot_effectives,
    snapshot_effectives_between,
    snapshot_targets_between,
)
from bot.store.snapshots import get_snapshot

__all__ = ["build_digest"]

CAPACITY = "max_running_requests"
THROUGHPUT = "output_throughput"
RESOLVED = ("confirmed", "refuted", "inconclusive")


def build_digest(store: Store, settings: Settings, week: IsoWeek, target: str | None = None) -> Digest:
    """The post-mortem of `week` (in `settings.schedules.timezone`), of one target or all.

    Built with the garbage collector's automatic passes paused (`bot.heap.collections_paused`):
    every row becomes a record the digest keeps, and the passes a large week triggered scanned
    them again and again for nothing."""
    with collections_paused():
        return _build(store, settings, week, target)


def _build(store: Store, settings: Settings, week: IsoWeek, target: str | None) -> Digest:
    tz = zone(settings.schedules.timezone)
    start, end = week.start(tz), week.end(tz)
    experiments = experiments_between(store, start, end, target, state_paths=FACT_PATHS)
    hypotheses = _hypotheses(store, start, end, target)
    learned = observations_between(store, start, end, target)
    states = _facts(store, experiments)  # read once, used four times
    names = _targets(store, settings, experiments, start, end, target)
    week_snapshots = snapshot_effectives_between(store, names, start, end)
    capacities = _capacities(store, experiments, states, week_snapshots)
    chart = _chart(store, names, week_snapshots, experiments, start, end)
    flags = [_against_baseline(store, name, end) for name in names]
    links = threads_of(
        store,
        [e.id for e in experiments],
        {e.id: e.investigation_id for e in experiments if e.investigation_id is not None},
    )
    changes = {e.id: describe_changes(e.params) for e in experiments}  # each described once
    every = [_line(e, states[e.id], changes[e.id], capacities, links) for e in experiments]
    lines = [line for line in every if line.not_started is None]
    kept, reverted = _decisions(experiments, states, changes, {line.id: line.what for line in every})
    failed_starts, rollbacks = incidents_of(experiments, states)
    checks, checks_note = failed_checks(store, start, end, target=target)
    return Digest(
        week=week,
        timezone=settings.schedules.timezone,
        start=start,
        end=end,
        target=target,
        experiments=lines,
        not_started=[line for line in every if line.not_started is not None],
        confirmed=[h for h in hypotheses if h.status == "confirmed"],
        refuted=[h for h in hypotheses if h.status == "refuted"],
        inconclusive=[h for h in hypotheses if h.status == "inconclusive"],
        still_open=[h for h in hypotheses if h.status == "open"],
        kept=kept,
        reverted=reverted,
        targets=flags,
        failed_starts=failed_starts,
        rollbacks=rollbacks,
        checks=checks,
        checks_note=checks_note,
        learned=[Learned(o.flag, o.kind, o.text, o.target, o.experiment_id, o.observed_at) for o in learned],
        chart=chart,
        predictions=_predictions(experiments, states),
    )


def _predictions(
    experiments: Sequence[WeekExperiment], states: Mapping[int, RunFacts]
) -> list[PredictionLine]:
    """Each try that predicted capacity, with the error against its start (oldest first)."""
    found: list[PredictionLine] = []
    for e in experiments:
        f = states[e.id]
        if f.predicted_capacity is None and f.measured_capacity is None:
            continue
        text = prediction_error_text(
            f.predicted_capacity, f.predicted_low, f.predicted_high, f.measured_capacity, f.prediction_missed
        )
        if e.verdict == PREDICTED_FAIL:
            text = f"stopped before the restart: {text}"
        error = (
            None
            if f.predicted_capacity is None or f.measured_capacity is None
            else f.measured_capacity - f.predicted_capacity
        )
        found.append(PredictionLine(e.id, e.target, e.created_at, text, error, f.prediction_missed))
    return found


def _facts(store: Store, experiments: Sequence[WeekExperiment]) -> dict[int, RunFacts]:
    """Each experiment's run facts: from the values the database extracted for a schema-2 state;
    from the whole state for the rest (an older schema, an empty state, a newer one refused)."""
    current = RUN_STATE_SCHEMA_VERSION
    whole = experiment_states(store, [e.id for e in experiments if e.state_version != current])
    return {
        e.id: run_facts_of(e.state_values) if e.state_version == current else run_facts(whole.get(e.id))
        for e in experiments
    }


def _hypotheses(store: Store, start: datetime, end: datetime, target: str | None) -> list[HypothesisLine]:
    """Resolved during the week, and still open at the end of it (by their status now)."""
    rows = hypotheses_of_week(store, start, end, target, resolved=RESOLVED)
    return [
        HypothesisLine(
            int(h.id or 0), h.target, h.statement, h.status, h.because, h.resolved_at or h.created_at
        )
        for h in rows
    ]


def _targets(
    store: Store,
    settings: Settings,
    experiments: Sequence[WeekExperiment],
    start: datetime,
    end: datetime,
    target: str | None,
) -> list[str]:
    """Configured targets, and any the week's experiments or starts touched (or just `target`)."""
    if target is not None:
        return [target]
    names = set(settings.targets) | {e.target for e in experiments}
    names.update(snapshot_targets_between(store, start, end))
    return sorted(names)


def _capacity(effective: Mapping[str, Any] | None) -> float | None:
    value = (effective or {}).get(CAPACITY)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _snapshot_ids(experiment: WeekExperiment, state: RunFacts) -> tuple[int | None, int | None]:
    return (
        experiment.before_snapshot_id or state.before_snapshot_id,
        experiment.after_snapshot_id or state.after_snapshot_id,
    )


def _capacities(
    store: Store,
    experiments: Sequence[WeekExperiment],
    states: Mapping[int, RunFacts],
    week_snapshots: Sequence[tuple[int, str, datetime, Any]],
) -> dict[int, float | None]:
    """snapshot id -> effective max_running_requests, for every start an experiment names."""
    known = {sid: _capacity(eff) for sid, _, _, eff in week_snapshots}
    named = {sid for e in experiments for sid in _snapshot_ids(e, states[e.id])}
    wanted = sorted({sid for sid in named if sid is not None} - set(known))
    for sid, effective in snapshot_effectives(store, wanted).items():
        known[sid] = _capacity(effective)
    return known


def _line(
    experiment: WeekExperiment,
    state: RunFacts,
    changes: list[str],
    capacities: dict[int, float | None],
    links: dict[int, Any],
) -> ExperimentLine:
    before, after = _snapshot_ids(experiment, state)
    ident = experiment.id
    return ExperimentLine(
        id=ident,
        target=experiment.target,
        playbook=experiment.playbook,
        what=describe_experiment(experiment, state, changes),
        status=experiment.status,
        verdict=experiment.verdict,
        summary=experiment.summary,
        actor=experiment.actor,
        at=experiment.created_at,
        kept=state.kept,
        capacity_before=_whole(capacities.get(before)) if before is not None else None,
        capacity_after=_whole(capacities.get(after)) if after is not None else None,
        thread=links.get(ident),
        not_started=state.not_started,
    )


def _whole(value: float | None) -> int | float | None:
    return int(value) if value is not None and value.is_integer() else value


def _decisions(
    experiments: Sequence[WeekExperiment],
    states: Mapping[int, RunFacts],
    changes: Mapping[int, list[str]],
    whats: Mapping[int, str],
) -> tuple[list[FlagDecision], list[FlagDecision]]:
    """Flags kept and reverted: `changes` and `whats` are each experiment's, by id (a revert's
    undone try is named by the changes of that try when it ran this week)."""
    kept: list[FlagDecision] = []
    reverted: list[FlagDecision] = []
    for e in experiments:
        ident = e.id
        state = states[ident]
        decided = state.kept
        if e.playbook == "try" and decided is not None:
            why = e.verdict or e.status
            for change in changes[ident] or [whats[ident]]:
                (kept if decided else reverted).append(
                    FlagDecision(ident, e.target, change, "kept" if decided else "reverted", why)
                )
        elif e.playbook == "revert" and e.status == "succeeded":
            undone = state.reverting_experiment
            undone_changes = (changes.get(undone) if undone is not None else None) or [whats[ident]]
            why = f"undoes #{undone}" if undone is not None else "revert"
            why += f", verified {e.verdict}" if e.verdict else ""
            reverted.extend(
                FlagDecision(ident, e.target, change, "reverted", why) for change in undone_changes
            )
    return kept, reverted


def _against_baseline(store: Store, target: str, end: datetime) -> TargetFlags:
    """The newest start before the week ended against the baseline pinned by then."""
    base = baseline_at(store, target, end)
    current = latest_snapshot_before(store, target, end)
    base_snap = get_snapshot(store, base.snapshot_id) if base is not None else None
    if base is None or base_snap is None:
        return TargetFlags(
            target=target,
            baseline_id=None,
            baseline_snapshot_id=None,
            snapshot_id=current.id if current else None,
            differences=(),
            capacity=_whole(_capacity(current.effective)) if current else None,
            note="no baseline pinned (`flagbot baseline pin`)",
        )
    if current is None:
        return TargetFlags(
            target=target,
            baseline_id=base.id,
            baseline_snapshot_id=base_snap.id,
            snapshot_id=None,
            differences=(),
            baseline_capacity=_whole(_capacity(base_snap.effective)),
            note="no start observed",
        )
    changes = diff_flagsets(
        flags_from_json(base_snap.requested_flags), flags_from_json(current.requested_flags)
    )
    return TargetFlags(
        target=target,
        baseline_id=base.id,
        baseline_snapshot_id=base_snap.id,
        snapshot_id=current.id,
        differences=tuple(change.describe() for change in changes),
        baseline_capacity=_whole(_capacity(base_snap.effective)),
        capacity=_whole(_capacity(current.effective)),
        note="" if changes else "the same flags as the baseline",
    )


def _chart(
    store: Store,
    names: list[str],
    week_snapshots: Sequence[tuple[int, str, datetime, Mapping[str, Any]]],
    experiments: Sequence[WeekExperiment],
    start: datetime,
    end: datetime,
) -> ChartData:
    capacity: dict[str, list[tuple[datetime, float]]] = {}
    for name in names:  # where each line starts: the last start before the week, drawn at its beginning
        before = effective_before(store, name, start)
        value = _capacity(before) if before is not None else None
        if value is not None:
            capacity[name] = [(start, value)]
    for _, name, at, effective in week_snapshots:
        value = _capacity(effective)
        if value is not None:
            capacity.setdefault(name, []).append((at, value))
    throughput: dict[str, list[tuple[datetime, float]]] = {}
    for name, at, peak in set_peaks_between(store, names, start, end, THROUGHPUT):
        if peak is not None:
            throughput.setdefault(name, []).append((at, peak))
    reference: dict[str, float] = {}
    for name in names:
        base = baseline_at(store, name, end)
        measured = get_set(store, base.set_id) if base is not None and base.set_id else None
        peak = _peak_throughput(measured.summary) if measured is not None else None
        if peak is not None:
            reference[name] = peak
    marks = [(e.created_at, f"#{e.id}", e.verdict) for e in experiments]
    return ChartData(capacity, throughput, marks, reference)


def _peak_throughput(summary: Mapping[str, Any] | None) -> float | None:
    """The best level's mean output tok/s of a measurement set (what the set could deliver); the
    week's sets get the same from the database (`set_peaks_between`), this is the baseline's."""
    values = [
        float(level[THROUGHPUT])
        for level in (summary or {}).get("levels", [])
        if isinstance(level, dict)
        and isinstance(level.get(THROUGHPUT), int | float)
        and not isinstance(level.get(THROUGHPUT), bool)
    ]
    return max(values) if values else None
