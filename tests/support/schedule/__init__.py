"""Helpers of the scheduler's tests: a settings object with one target, a stand-in for the target
layer (what a check "sees"), an experiment with a concluded start, and a job that counts its runs
(module-level, so APScheduler's job store can pickle a reference to it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bot.app.checks import Probe
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.config import Settings
from bot.store import Snapshot, Store
from bot.store.checks import add_check
from bot.store.experiments import create_experiment
from bot.store.schedule_models import VerificationCheck

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
FLAGS = [{"flag": "--tp-size", "value": "2"}, {"flag": "--enable-metrics", "value": None}]
RUNS: list[tuple[str, datetime]] = []
"""(name, wall-clock time) of every `counting_job` run."""


async def counting_job(name: str) -> None:
    RUNS.append((name, datetime.now(UTC)))


LAB = {
    "unit": "sglang.service",
    "base_url": "http://127.0.0.1:9",
    "nodes": [{"host": "127.0.0.1", "port": 9}],
}


def migrated_store(backend: str, tmp_path: Path, postgres_url: str | None = None) -> Store:
    """An upgraded store: SQLite in tmp_path, or the tests' PostgreSQL emptied first."""
    from sqlalchemy import text

    if backend == "sqlite":
        opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    else:
        opened = Store.open(postgres_url)
        with opened.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    opened.upgrade()
    return opened


def settings(tmp_path: Path, *, targets: bool = True, **schedules: Any) -> Settings:
    """`lab` points at a closed port: nothing may reach it (the checks' target is `FakeTarget`)."""
    return Settings.model_validate(
        {
            "targets": {"lab": LAB} if targets else {},
            "database": {"sqlite_path": str(tmp_path / "flagbot.db")},
            "schedules": schedules,
        }
    )


def concluded_check(
    store: Store, *, due_at: datetime = T0, after: timedelta = timedelta(minutes=10)
) -> VerificationCheck:
    """A kept try on `lab` (effective max_running_requests 48) and one check of it."""
    snap = store.add(
        Snapshot(
            target="lab",
            invocation_id="inv-1",
            requested_flags=FLAGS,
            effective={"max_running_requests": 48},
            ready=True,
        )
    )
    experiment = create_experiment(store, target="lab", playbook="try", params={}, actor="cli:test")
    return add_check(
        store,
        target="lab",
        experiment_id=experiment.id,
        after=after,
        due_at=due_at,
        expected={"snapshot_id": snap.id, "flags": FLAGS, "max_running_requests": 48, "summary": "kept"},
        created_by="cli:test",
        channel="C1",
        thread_ts="1700000000.000100",
    )


@dataclass
class FakeTarget:
    """What the target looks like to a check, changed by the test between runs."""

    capacity: int = 48
    healthy: bool = True
    flags: list[dict[str, Any]] = field(default_factory=lambda: [dict(item) for item in FLAGS])
    looks: int = 0

    async def __call__(self, rt: ScheduleRuntime, check: VerificationCheck) -> Probe:
        self.looks += 1
        return Probe(
            healthy=self.healthy,
            health=200 if self.healthy else 503,
            invocation="inv-1",
            flags=self.flags,
            effective={"max_running_requests": self.capacity},
        )


class Clock:
    """A clock the test moves."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def drain_runs() -> Iterator[tuple[str, datetime]]:
    while RUNS:
        yield RUNS.pop(0)


class DiesBeforePosting(MemoryNotifier):
    """The notifier of a replica SIGKILLed between recording a result and posting it."""

    async def notify(self, notice: Any) -> str | None:
        raise RuntimeError("the replica died here")
