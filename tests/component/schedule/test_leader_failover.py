"""Two replicas on one real PostgreSQL, as two processes (tests/support/replica_process.py): one
leads and runs the scheduler; SIGKILL it in the middle of a scheduled check, of the weekly
digest, or of a try it was running, and the other takes over: it runs the job through, and the
job has run exactly once (rows in the store), none lost; the try's run is settled and its thread
told. Every wait is on a condition with a deadline; the takeover's deadline
is the 30 s the issue allows (PostgreSQL frees a killed leader's lock at once; the standby asks
every second)."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlmodel import Session, col, select

from bot.schedule.scheduler import DIGEST_JOB, SETTLE_INTERVAL_S, build_scheduler, schedule_recurring, stop
from bot.store import Store
from bot.store.checks import get_check
from bot.store.leases import current
from bot.store.loop_models import Experiment
from bot.store.schedule_models import CheckRun, ScheduledRun
from tests.support.loop_actions import CRASHY
from tests.support.replica_process import TRY_LEASE_TTL_S
from tests.support.schedule import concluded_check, migrated_store, settings
from tests.support.waits import until

ROOT = Path(__file__).parents[3]
TAKEOVER_S = 30.0
START_S = 60.0


@pytest.fixture
def store(tmp_path: Path, postgres_url: str) -> Iterator[Store]:
    opened = migrated_store("postgresql", tmp_path, postgres_url)
    yield opened
    opened.close()


class Replicas:
    """The replica processes of one test; every one still running is killed at the end."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url, self.folder = url, folder
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.books: Path | None = None
        """The playbooks' folder each replica loads (the try test's `crashy`), when set."""

    async def start(self, name: str) -> None:
        books = [str(self.books)] if self.books is not None else []
        self.processes[name] = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.support.replica_process",
            self.url,
            name,
            str(self.folder),
            *books,
            cwd=ROOT,
        )

    def leaders(self) -> list[str]:
        return sorted(path.name.removeprefix("leader-") for path in self.folder.glob("leader-*"))

    def pid_of(self, marker: str) -> int:
        return int((self.folder / marker).read_text() or 0)

    def name_of(self, pid: int) -> str:
        return next(name for name, process in self.processes.items() if process.pid == pid)

    async def kill(self, name: str) -> None:
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        await process.wait()

    async def stop_all(self) -> None:
        for process in self.processes.values():
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()


@pytest.fixture
async def replicas(postgres_url: str, tmp_path: Path) -> AsyncIterator[Replicas]:
    running = Replicas(postgres_url, tmp_path)
    yield running
    await running.stop_all()


def _hung_pid(folder: Path, marker: str) -> int:
    path = folder / marker
    return int(path.read_text()) if path.exists() and path.read_text() else 0


async def _kill_the_hung_leader(replicas: Replicas, marker: str) -> str:
    """Wait for the leader to be in the middle of the job, SIGKILL it; the survivor's name."""
    await until(
        lambda: _hung_pid(replicas.folder, marker), f"the leader to start the job ({marker})", START_S
    )
    dead = replicas.name_of(_hung_pid(replicas.folder, marker))
    assert replicas.leaders() == [dead]  # the other stood by: nothing ran there
    await replicas.kill(dead)
    (survivor,) = set(replicas.processes) - {dead}
    await until(lambda: survivor in replicas.leaders(), f"{survivor} to take over", TAKEOVER_S)
    return survivor


async def test_a_leader_killed_during_a_scheduled_check_is_replaced_and_the_check_runs_once(
    store: Store, replicas: Replicas
) -> None:
    check = concluded_check(store, due_at=datetime.now(UTC) - timedelta(minutes=1))
    assert check.id is not None
    await replicas.start("a")
    await replicas.start("b")
    await _kill_the_hung_leader(replicas, "check-hung")

    def runs() -> list[CheckRun]:
        with Session(store.engine) as session:
            return list(session.exec(select(CheckRun).where(col(CheckRun.check_id) == check.id)).all())

    await until(lambda: runs(), "the check to run on the new leader", TAKEOVER_S)
    await replicas.stop_all()
    assert [(run.result, run.trigger) for run in runs()] == [("pass", "schedule")]
    done = get_check(store, check.id)
    assert done is not None and done.status == "done"


async def test_a_leader_killed_during_the_digest_is_replaced_and_the_digest_is_posted_once(
    store: Store, replicas: Replicas, tmp_path: Path
) -> None:
    scheduler = build_scheduler(store.engine)  # the digest's job, due a minute ago, in the shared store
    scheduler.start(paused=True)
    schedule_recurring(scheduler, settings(tmp_path, digest_channel="C0DIGEST", drift_cron="0 3 1 1 *"))
    scheduler.modify_job(DIGEST_JOB, next_run_time=datetime.now(UTC) - timedelta(minutes=1))
    await stop(scheduler)

    await replicas.start("a")
    await replicas.start("b")
    survivor = await _kill_the_hung_leader(replicas, "digest-hung")
    posted = tmp_path / "digest-posted"
    await until(posted.exists, "the new leader to post the digest", TAKEOVER_S)
    await replicas.stop_all()

    assert [line.split()[0] for line in posted.read_text().splitlines()] == [survivor]
    with Session(store.engine) as session:
        claims = list(session.exec(select(ScheduledRun)).all())
    assert len(claims) == 1 and claims[0].finished_at is not None and claims[0].replica == survivor
    assert claims[0].key.startswith("digest:")
    again = build_scheduler(store.engine)  # the job is still there, due next week, not lost
    again.start(paused=True)
    job = again.get_job(DIGEST_JOB)
    await stop(again)
    assert job is not None and job.next_run_time > datetime.now(UTC)


async def test_a_leader_killed_during_a_try_has_its_run_settled_by_the_new_leader_and_its_thread_told(
    store: Store, replicas: Replicas, tmp_path: Path
) -> None:
    """The whole replica dies, not only the run: its scheduler and its try with it. The new
    leader's `settle-orphans` job finds the run whose lease expired, settles it (the interrupt
    check says resume, so it goes through), releases the target and tells the run's thread."""
    books = tmp_path / "books"
    books.mkdir()
    (books / "crashy.yaml").write_text("name: crashy\n" + textwrap.dedent(CRASHY), encoding="utf-8")
    (tmp_path / "try-on-leader").write_text("")
    replicas.books = books
    await replicas.start("a")
    await replicas.start("b")

    def experiments() -> list[Experiment]:
        with Session(store.engine) as session:
            return list(session.exec(select(Experiment).where(col(Experiment.target) == "t1")).all())

    await until(lambda: _hung_pid(tmp_path, "try-hung"), "the leader's try to reach its gated step", START_S)
    [orphan] = experiments()
    held = current(store, "t1")
    assert orphan.status == "running" and held is not None  # in flight on the leader, under its lease
    assert held.pid == _hung_pid(tmp_path, "try-hung") and held.experiment_id == orphan.id
    survivor = await _kill_the_hung_leader(replicas, "try-hung")
    notices = tmp_path / "notices"
    told = f"experiment #{orphan.id} (crashy) on t1"
    await until(
        lambda: notices.exists() and told in notices.read_text(),
        f"{survivor} to settle the dead replica's run and tell its thread",
        TAKEOVER_S + TRY_LEASE_TTL_S + SETTLE_INTERVAL_S,
    )
    await replicas.stop_all()
    [settled] = experiments()
    assert settled.status == "succeeded"  # resumed by the new leader and run through
    assert sum(told in line for line in notices.read_text().splitlines()) == 1  # told once
    assert current(store, "t1") is None  # the dead replica's hold is gone, and the settler's too
