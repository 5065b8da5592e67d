"""The running scheduler's check jobs, as the loop sees them: an interface the scheduler installs.

Why an interface here: a playbook's `schedule_checks` step stores verification checks, and when
`flagbot serve` runs a scheduler in this process the checks should be scheduled at once, not at
its next sync. The loop cannot import the scheduler (a front end); the scheduler installs an
object with this interface while it runs, and the step (or `checks pause|resume|delete`) finds it
with `active()`. Without a running scheduler `active()` is None: checks are only stored, and the
bot's scheduler picks them up at its start or next sync.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Protocol

from bot.store.schedule_models import VerificationCheck

__all__ = ["CheckJobs", "active", "install", "installed", "uninstall"]


class CheckJobs(Protocol):
    def add(self, check: VerificationCheck) -> None:
        """Schedule a check just stored (replacing a job of the same check)."""

    def next_run(self, check_id: int) -> datetime | None:
        """When the check's job runs next; None when it has no job or is paused."""

    async def sync(self) -> dict[str, list[str]]:
        """Make the jobs follow the stored checks; what was added, removed, paused, resumed."""


_ACTIVE: list[CheckJobs] = []


def install(jobs: CheckJobs) -> None:
    """Make `jobs` the running scheduler's (replacing any other)."""
    _ACTIVE[:] = [jobs]


def uninstall(jobs: CheckJobs | None = None) -> None:
    if jobs is None or (_ACTIVE and _ACTIVE[0] is jobs):
        _ACTIVE.clear()


def active() -> CheckJobs | None:
    """The running scheduler's jobs in this process, or None."""
    return _ACTIVE[0] if _ACTIVE else None


@asynccontextmanager
async def installed(jobs: CheckJobs) -> AsyncIterator[CheckJobs]:
    install(jobs)
    try:
        yield jobs
    finally:
        uninstall(jobs)
