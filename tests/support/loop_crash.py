"""A flagbot process that dies mid-step: run `python -m tests.support.loop_crash DB PLAYBOOKS [TTL]`.

It runs the playbook `crashy` on target `t1` with the test actions, prints `arrived` when the
step gated on `g` is in flight, and then waits for ever; the test kills it with SIGKILL, as a
reboot or the OOM killer would, leaving a running experiment and a lease nobody heartbeats.
TTL is the lease's time to live in seconds (30 when not given); a short one lets a test see the
dead run's lease expire soon.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.playbook import load_playbooks
from bot.loop.report import MemoryReporter
from bot.store import AsyncStore, Store
from tests.support.loop_actions import registered_actions


async def main(db: Path, books: Path, ttl_s: float = 30.0) -> None:
    with registered_actions() as probe:
        store = AsyncStore(Store.open(None, sqlite_path=db))
        settings = Settings(database={"sqlite_path": db})
        engine = Engine(
            settings, store, MemoryReporter(), lease_ttl_s=ttl_s, playbooks=load_playbooks([books])
        )
        run = asyncio.create_task(engine.run("crashy", {}, target="t1", actor="alice"))
        await probe.arrived("g").wait()
        print("arrived", flush=True)
        await run


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), *(float(arg) for arg in sys.argv[3:4])))
