"""Experiments (one playbook run against a target) and their steps.

`finish_step` is the engine's checkpoint: the step's outcome, the experiment's cursor (the next
step to run) and its state are written in one transaction, so a run resumed after a crash starts
exactly after the last step that completed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from bot.store.loop_models import (
    CANCELLABLE_STATUSES,
    EXPERIMENT_STATUSES,
    STEP_ADVANCING_STATUSES,
    STEP_STATUSES,
    UNFINISHED_STATUSES,
    Experiment,
    ExperimentStep,
)
from bot.store.models import utcnow
from bot.store.store import Store

__all__ = [
    "cancel_requester",
    "create_experiment",
    "finish_step",
    "get_experiment",
    "latest_experiment",
    "list_experiments",
    "list_steps",
    "request_cancel",
    "start_step",
    "unfinished_experiments",
    "update_experiment",
]

_READ_ONLY_FIELDS = frozenset({"id", "created_at"})


def _check_status(status: object) -> None:
    if status not in EXPERIMENT_STATUSES:
        raise ValueError(f"unknown experiment status {status!r}; one of: {', '.join(EXPERIMENT_STATUSES)}")


def create_experiment(
    store: Store,
    *,
    target: str,
    playbook: str,
    params: Mapping[str, Any],
    actor: str,
    holder: str | None = None,
    hypothesis_id: int | None = None,
    investigation_id: int | None = None,
    baseline_id: int | None = None,
) -> Experiment:
    """A new experiment in status "pending", cursor 0, empty state."""
    row = Experiment(
        target=target,
        playbook=playbook,
        params=dict(params),
        actor=actor,
        holder=holder,
        hypothesis_id=hypothesis_id,
        investigation_id=investigation_id,
        baseline_id=baseline_id,
    )
    return store.add(row)


def get_experiment(store: Store, experiment_id: int) -> Experiment | None:
    with Session(store.engine, expire_on_commit=False) as session:
        return session.get(Experiment, experiment_id)


def cancel_requester(store: Store, experiment_id: int) -> str | None:
    """Who asked the experiment to stop; None when nobody did or there is no such experiment.

    The engine asks this at every step boundary. Why one column: `get_experiment` builds the
    whole row, parsing its params and its state (the run's JSON, which grows with every step),
    only for this one name to be read (issue 16 item 9)."""
    query = select(Experiment.cancel_requested_by).where(col(Experiment.id) == experiment_id)
    with Session(store.engine) as session:
        return session.exec(query).first()


def latest_experiment(
    store: Store, target: str, *, playbook: str | None = None, statuses: Iterable[str] | None = None
) -> Experiment | None:
    """The target's newest experiment, optionally of one playbook and in one of `statuses`."""
    query = select(Experiment).where(Experiment.target == target)
    if playbook is not None:
        query = query.where(Experiment.playbook == playbook)
    if statuses is not None:
        wanted = list(statuses)
        for status in wanted:
            _check_status(status)
        query = query.where(col(Experiment.status).in_(wanted))
    with Session(store.engine, expire_on_commit=False) as session:
        return session.exec(query.order_by(col(Experiment.id).desc()).limit(1)).first()


def list_experiments(
    store: Store, target: str, *, since: datetime | None = None, limit: int = 50
) -> list[Experiment]:
    """The target's experiments created at or after `since`, newest first."""
    query = select(Experiment).where(Experiment.target == target)
    if since is not None:
        query = query.where(col(Experiment.created_at) >= since)
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query.order_by(col(Experiment.id).desc()).limit(limit)).all())


def update_experiment(store: Store, experiment_id: int, **fields: object) -> Experiment:
    """Set any of the experiment's columns (status, verdict, summary, started_at, ...); returns it.

    ValueError for a column that does not exist or may not change, or an unknown status;
    LookupError for an unknown experiment.
    """
    unknown = sorted(set(fields) - set(Experiment.model_fields))
    if unknown:
        raise ValueError(f"experiments have no field(s) {', '.join(unknown)}")
    fixed = sorted(set(fields) & _READ_ONLY_FIELDS)
    if fixed:
        raise ValueError(f"an experiment's {', '.join(fixed)} cannot change")
    if "status" in fields:
        _check_status(fields["status"])
    with Session(store.engine, expire_on_commit=False) as session:
        row = session.get(Experiment, experiment_id)
        if row is None:
            raise LookupError(f"no experiment #{experiment_id}")
        for name, value in fields.items():
            setattr(row, name, value)
        session.add(row)
        session.commit()
        session.refresh(row)
        return row


def start_step(
    store: Store, experiment_id: int, *, index: int, name: str, action: str, args: Mapping[str, Any]
) -> ExperimentStep:
    """Record that step `index` began (status "running")."""
    exists = select(col(Experiment.id)).where(col(Experiment.id) == experiment_id)
    with Session(store.engine, expire_on_commit=False) as session:
        # its id, not the whole row: building the row parsed the run's state JSON for nothing
        if session.exec(exists).first() is None:
            raise LookupError(f"no experiment #{experiment_id}")
        step = ExperimentStep(
            experiment_id=experiment_id, index=index, name=name, action=action, args=dict(args)
        )
        session.add(step)
        session.commit()
        # not refreshed: its id comes back with the INSERT and every other value was set (and
        # redacted) here; a re-read was one more SELECT at each of a run's steps
        return step


def finish_step(
    store: Store,
    step_id: int,
    *,
    status: str,
    result: Mapping[str, Any],
    error: str | None = None,
    state: Mapping[str, Any],
) -> ExperimentStep:
    """Close a step and checkpoint its experiment, in one transaction.

    The step gets status, result, error and finished_at; the experiment gets `state`, and its
    cursor moves to index + 1 when the step is ok, skipped or stopped (a failed step stays the
    cursor, so a resumed run would retry it).
    """
    finished = tuple(s for s in STEP_STATUSES if s != "running")
    if status not in finished:
        raise ValueError(f"a finished step's status is one of: {', '.join(finished)}; not {status!r}")
    with Session(store.engine, expire_on_commit=False) as session:
        step = session.get(ExperimentStep, step_id)
        if step is None:
            raise LookupError(f"no experiment step #{step_id}")
        experiment = session.get(Experiment, step.experiment_id)
        assert experiment is not None  # the foreign key guarantees it
        step.status, step.result, step.error, step.finished_at = status, dict(result), error, utcnow()
        experiment.state = dict(state)
        if status in STEP_ADVANCING_STATUSES:
            experiment.cursor = step.index + 1
        session.add(step)
        session.add(experiment)
        session.commit()
        return step  # as stored, without a re-read: see `start_step`


def list_steps(store: Store, experiment_id: int) -> list[ExperimentStep]:
    """The experiment's steps in the order they started."""
    query = (
        select(ExperimentStep)
        .where(ExperimentStep.experiment_id == experiment_id)
        .order_by(col(ExperimentStep.id))
    )
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query).all())


def request_cancel(store: Store, experiment_id: int, *, actor: str) -> bool:
    """Ask a pending or running experiment to stop at its next step boundary.

    True when the request is recorded (the first requester is kept); False when the experiment
    is no longer pending or running; LookupError when it does not exist.
    """
    with Session(store.engine, expire_on_commit=False) as session:
        result = session.exec(
            update(Experiment)
            .where(
                col(Experiment.id) == experiment_id,
                col(Experiment.status).in_(CANCELLABLE_STATUSES),
            )
            .values(cancel_requested_by=func.coalesce(col(Experiment.cancel_requested_by), actor))
        )
        session.commit()
        if result.rowcount == 1:
            return True
        if session.get(Experiment, experiment_id) is None:
            raise LookupError(f"no experiment #{experiment_id}")
        return False


def unfinished_experiments(store: Store, target: str | None = None) -> list[Experiment]:
    """Experiments left pending, running or interrupted (of one target, or all), oldest first."""
    query = select(Experiment).where(col(Experiment.status).in_(UNFINISHED_STATUSES))
    if target is not None:
        query = query.where(Experiment.target == target)
    with Session(store.engine, expire_on_commit=False) as session:
        return list(session.exec(query.order_by(col(Experiment.id))).all())
