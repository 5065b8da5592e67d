"""What scheduled jobs run with: settings, the store, a notifier, a clock, a digest publisher.

Why a module-level runtime: APScheduler's job store pickles a job as a reference to a
module-level function and its plain arguments (`bot.schedule.jobs:check_job`, `(7,)`), never
live objects. The process that runs the jobs (the bot, a test) installs one runtime; the job
functions find it here.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.app.notify import DigestPublisher, Notifier
from bot.app.probe import Probe
from bot.config import Settings
from bot.store import AsyncStore
from bot.store.models import utcnow
from bot.target.session import TargetSession

if TYPE_CHECKING:
    from bot.app.ask_timer import RevertRunner
    from bot.store.schedule_models import VerificationCheck

__all__ = ["ScheduleRuntime", "current", "install", "installed", "this_replica", "uninstall"]

LOOKS_AT_ONCE = 8
"""How many targets the scheduled jobs look at together (a drift watch's look, a check's observe);
the others wait their turn. Every due job starts at once and every target's drift watch shares
one cron, so without a limit a fleet's looks would all run at the same moment: the SSH channels
open across the fleet would grow with its size (each connection keeps its own limit, none keeps
the sum), and each look's HTTP reads would wait behind every other look's parsing on the bot's
one event loop. With it, at most this many targets' connections carry a job's commands at a
time; the time the whole fleet takes is about the same (the looks are CPU-bound), and a look's
own time stops growing with the fleet beyond this many targets (bench/fleet_scale.py). A check's turn lasts through its
benchmark: at most this many of flagbot's load generators share the bot host's CPU."""

SessionFactory = Callable[[str], AbstractAsyncContextManager["TargetSession"]]
ProbeFunc = Callable[["ScheduleRuntime", "VerificationCheck"], Awaitable[Probe]]


def this_replica() -> str:
    """This process among the replicas, as claims and logs name it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class ScheduleRuntime:
    settings: Settings
    store: AsyncStore
    notifier: Notifier
    clock: Callable[[], datetime] = utcnow
    """Time of record for results and due dates (tests move it; production reads the wall clock)."""
    lease_ttl_s: float = 60.0
    lease_wait_s: float = 600.0
    """How long a check or drift watch waits for a busy target's lease before recording `busy`."""
    session_factory: SessionFactory | None = None
    probe: ProbeFunc | None = None
    """How a check looks at its target (default: observe + benchmark over SSH); tests replace it."""
    cache_dir: Path | None = None
    digest: DigestPublisher | None = None
    """Where the weekly digest is posted (the bot's Slack; None outside the bot)."""
    revert_runner: RevertRunner | None = None
    """How a timed-out question's default `revert` runs (`bot.app.ask.run_revert` when None)."""
    replica: str = field(default_factory=this_replica)
    """Who claims scheduled runs (`bot.store.scheduled_runs`): another replica's unfinished claim
    is a run the dead leader owes."""
    extra: dict[str, Any] = field(default_factory=dict)
    looks_at_once: int = LOOKS_AT_ONCE
    _looks: asyncio.Semaphore | None = field(default=None, init=False, repr=False)

    def session(self, target: str) -> AbstractAsyncContextManager[TargetSession]:
        """A session to a configured target (connections open on first use)."""
        if self.session_factory is not None:
            return self.session_factory(target)
        if target not in self.settings.targets:
            raise LookupError(f"target {target!r} is not configured")
        return TargetSession.open(target, self.settings.targets[target], store=self.store)

    def cache(self) -> Path:
        return self.cache_dir or self.settings.database.sqlite_path.parent / "cache"

    @asynccontextmanager
    async def looking(self) -> AsyncIterator[None]:
        """A turn to look at a target (`looks_at_once` at a time); the scheduled jobs take one
        before their lease or session, so no lease is held while a job waits its turn."""
        if self._looks is None:
            self._looks = asyncio.Semaphore(self.looks_at_once)
        async with self._looks:
            yield


_CURRENT: list[ScheduleRuntime] = []


def install(runtime: ScheduleRuntime) -> None:
    """Make `runtime` the one job functions use (replacing any other)."""
    _CURRENT[:] = [runtime]


def uninstall(runtime: ScheduleRuntime | None = None) -> None:
    if runtime is None or (_CURRENT and _CURRENT[0] is runtime):
        _CURRENT.clear()


def current() -> ScheduleRuntime:
    if not _CURRENT:
        raise RuntimeError("no scheduler runtime is installed in this process (is `flagbot serve` running?)")
    return _CURRENT[0]


def active() -> ScheduleRuntime | None:
    """The installed runtime, or None (the CLI without a running bot)."""
    return _CURRENT[0] if _CURRENT else None


@asynccontextmanager
async def installed(runtime: ScheduleRuntime) -> AsyncIterator[ScheduleRuntime]:
    install(runtime)
    try:
        yield runtime
    finally:
        uninstall(runtime)
