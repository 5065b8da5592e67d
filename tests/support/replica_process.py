"""One replica of `flagbot serve`'s scheduler side, as a process of its own, for the replica tests:
`python -m tests.support.replica_process URL NAME DIR [BOOKS]`.

Why not `flagbot serve` itself: the tests SIGKILL a leader in the middle of a scheduled check and
of the weekly digest, which needs the check's probe and the digest's publisher to stop where the
test can see them. Everything else is production code: the election on PostgreSQL's advisory lock
(`bot.schedule.election`, `bot.store.leader_lock`), `running_scheduler` on the shared job store,
the digest's claim. What the test watches are files in DIR:

- `leader-NAME`: written when this replica starts leading (its content: the pid).
- `check-hung` / `digest-hung`: created (exclusively) by the first replica to run the check / the
  digest, which then hangs there for good, so the test kills it in the middle; a later replica
  runs them through.
- `digest-posted`: one line per digest posted.
- with BOOKS (a folder holding the test playbook `crashy`, tests/support/loop_actions.py), when
  `try-on-leader` exists: the first replica to lead runs `crashy` on `t1` with a short lease,
  as a replica runs a `try` it was asked for, writes `try-hung` (its pid) once the run's gated
  step is in flight, and hangs there; every other replica has that gate open, so the run it
  settles goes through. `notices`: one line per notice the replica told (a settled run's thread).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from bot.app.checks import Probe
from bot.app.context import AppContext
from bot.app.notify import MemoryNotifier, Notice
from bot.app.runtime import ProbeFunc, ScheduleRuntime
from bot.loop.engine import Engine
from bot.loop.playbook import load_playbooks
from bot.loop.report import MemoryReporter
from bot.schedule.election import Elector
from bot.schedule.scheduler import running_scheduler
from bot.store import AsyncStore, Store
from bot.store.leader_lock import leader_lock_for
from bot.store.schedule_models import VerificationCheck
from bot.store.schema_revision import current_revision
from tests.support.loop_actions import Probe as ActionProbe
from tests.support.loop_actions import registered_actions
from tests.support.schedule import FakeTarget, settings

ELECTION_INTERVAL_S = 1.0
TRY_LEASE_TTL_S = 2.0
"""The try's lease: short, so a killed leader's run is an orphan soon after the kill."""


def _first(path: Path) -> bool:
    """True for the one process that creates `path` (O_EXCL): the one that hangs."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    path.write_text(str(os.getpid()))
    return True


async def _hang() -> None:
    await asyncio.Event().wait()  # until SIGKILL


class HangingPublisher:
    def __init__(self, folder: Path, name: str) -> None:
        self.folder, self.name = folder, name

    async def publish_weekly(self, now: datetime) -> None:
        if _first(self.folder / "digest-hung"):
            await _hang()
        with (self.folder / "digest-posted").open("a") as out:
            out.write(f"{self.name} {now.isoformat()}\n")


def hanging_probe(folder: Path) -> ProbeFunc:
    async def probe(rt: ScheduleRuntime, check: VerificationCheck) -> Probe:
        if _first(folder / "check-hung"):
            await _hang()
        return await FakeTarget()(rt, check)  # what the experiment concluded still holds

    return probe


class FileNotifier(MemoryNotifier):
    """Keeps every notice and writes its text to `notices`, one line each, for the test to read."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    async def notify(self, notice: Notice) -> str | None:
        with self.path.open("a") as out:
            out.write(notice.text.replace("\n", " ") + "\n")
        return await super().notify(notice)


async def _hanging_try(ctx: AppContext, books: Path, probe: ActionProbe, folder: Path) -> None:
    """`crashy` on t1 as this replica's run, hung at its gated step until the test kills us."""
    engine = Engine(
        ctx.settings,
        ctx.store,
        MemoryReporter(),
        lease_ttl_s=TRY_LEASE_TTL_S,
        playbooks=load_playbooks([books]),
    )
    run = asyncio.create_task(engine.run("crashy", {}, target="t1", actor="slack:U0OPER"))
    await probe.arrived("g").wait()
    (folder / "try-hung").write_text(str(os.getpid()))
    await run


async def main(url: str, name: str, folder: Path, books: Path | None = None) -> None:
    with registered_actions() as probe:
        await _replica(url, name, folder, books, probe)


async def _replica(url: str, name: str, folder: Path, books: Path | None, probe: ActionProbe) -> None:
    store = AsyncStore(Store.open(url))
    config = settings(folder, digest_channel="C0DIGEST", drift_cron="0 3 1 1 *")
    if books is not None:
        config = config.model_copy(update={"playbook_dirs": [books]})
    ctx = AppContext(config, store)
    tries: list[asyncio.Task[None]] = []

    @asynccontextmanager
    async def lead() -> AsyncIterator[object]:
        async with running_scheduler(
            ctx,
            notifier=FileNotifier(folder / "notices"),
            digest=HangingPublisher(folder, name),
            replica=name,
            probe=hanging_probe(folder),
        ) as jobs:
            (folder / f"leader-{name}").write_text(str(os.getpid()))
            if books is not None and (folder / "try-on-leader").exists():
                if _first(folder / "try-started"):
                    tries.append(asyncio.create_task(_hanging_try(ctx, books, probe, folder)))
                else:
                    probe.gate("g").set()  # the run this replica settles goes through its gate
            yield jobs

    engine = store.store.engine
    elector = Elector(
        leader_lock_for(engine),
        schema_revision=lambda: current_revision(engine),
        lead=lead,
        interval_s=ELECTION_INTERVAL_S,
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    (folder / f"started-{name}").write_text(str(os.getpid()))
    try:
        await elector.run(stop)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), *(Path(arg) for arg in sys.argv[4:5])))
