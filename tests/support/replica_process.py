"""One replica of `flagbot serve`'s scheduler side, as a process of its own, for the replica tests:
`python -m tests.support.replica_process URL NAME DIR`.

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
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ProbeFunc, ScheduleRuntime
from bot.schedule.election import Elector
from bot.schedule.scheduler import running_scheduler
from bot.store import AsyncStore, Store
from bot.store.leader_lock import leader_lock_for
from bot.store.schedule_models import VerificationCheck
from bot.store.schema_revision import current_revision
from tests.support.schedule import FakeTarget, settings

ELECTION_INTERVAL_S = 1.0


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


async def main(url: str, name: str, folder: Path) -> None:
    store = AsyncStore(Store.open(url))
    config = settings(folder, digest_channel="C0DIGEST", drift_cron="0 3 1 1 *")
    ctx = AppContext(config, store)

    @asynccontextmanager
    async def lead() -> AsyncIterator[object]:
        async with running_scheduler(
            ctx,
            notifier=MemoryNotifier(),
            digest=HangingPublisher(folder, name),
            replica=name,
            probe=hanging_probe(folder),
        ) as jobs:
            (folder / f"leader-{name}").write_text(str(os.getpid()))
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
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
