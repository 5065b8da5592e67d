"""How a command that is no playbook tells its front end what it is doing.

Why not the engine's `Reporter`: a playbook's progress is steps of an experiment; a benchmark or
a rollback has a lease to wait for, levels measured, a lease taken over from a dead holder. The
use case reports these as events; each front end words them (stderr lines for the CLI, the
status card and thread replies in Slack), so the wording stays in the front end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: the load generator and the store are heavy to import
    from bot.bench.loadgen import LevelResult
    from bot.store.leases import LeaseHeld, LeaseInfo
    from bot.target.evidence import Evidence


class Progress(Protocol):
    """What a non-playbook command reports while it runs; every method must return promptly."""

    async def step(self, index: int, name: str, status: str) -> None:
        """Step `index` of the command's `steps` is now `status` (running, ok, failed)."""

    async def note(self, text: str) -> None:
        """Something the user should know, said once."""

    async def evidence(self, block: Evidence) -> None:
        """A block of evidence, as soon as it exists."""

    def lease_wait(self, busy: LeaseHeld, remaining_s: float) -> None:
        """The target's lease is held by someone else; waiting up to `remaining_s` more."""

    async def lease_taken_over(self, target: str, expired: LeaseInfo) -> None:
        """An expired lease (its holder stopped heartbeating) was taken over."""

    def level_done(self, repeat: int, repeats: int, result: LevelResult) -> None:
        """One concurrency level of one repeat of a benchmark was measured."""
