"""What flagbot remembers of a target between runs: unit checksums, divergence, drop-in backups.

Why a ledger: hand-edit detection needs the `systemctl cat` text flagbot last left on each node
(the checksum in `TargetState.unit_sha256` to compare, the text itself to show a diff), and a
half-applied restart must survive a restart of the bot (`TargetState.diverged`). With a store
those live in `TargetState` and `DropinBackup` rows; without one (tests, a one-off CLI call)
in memory for the life of the session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.store import AsyncStore
from bot.store.models import DropinBackup, TargetState, utcnow
from bot.store.target_state import (
    change_target_state,
    dropin_backups,
    dropin_contents,
    get_target_state,
    latest_dropin_content,
)

AS_LEFT = "as-left"
INTENDED = "intended"
"""`DropinBackup.reason` of the drop-in flagbot meant a node to have (what `reconcile` restores)."""
_NOT_BACKUPS = (AS_LEFT, INTENDED)
"""`DropinBackup.reason` of the row holding `systemctl cat` as flagbot left it (for the diff)."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Divergence:
    nodes: list[str]
    reason: str | None


@dataclass
class Ledger:
    """Per-target memory; backed by the store when there is one."""

    target: str
    store: AsyncStore | None = None
    _memory_state: TargetState | None = field(default=None, repr=False)
    _memory_text: dict[str, str] = field(default_factory=dict, repr=False)
    _memory_backups: list[DropinBackup] = field(default_factory=list, repr=False)
    _memory_intended: dict[str, str] = field(default_factory=dict, repr=False)

    # --- TargetState ----------------------------------------------------------------------

    async def state(self) -> TargetState:
        if self.store is None:
            if self._memory_state is None:
                self._memory_state = TargetState(target=self.target)
            return self._memory_state
        return await self.store.run(get_target_state, self.store.store, self.target)

    async def _update(self, change: Callable[[TargetState], None]) -> None:
        """Apply `change` to the target's row in one transaction (read, change, write).

        Never a whole-row write of a row read earlier: the nodes of a target record their units
        concurrently, and a stale row saved by one would undo what the other had just recorded
        (a lost checksum then reads as a hand edit on the next change). On PostgreSQL the row is
        locked (`FOR UPDATE`); SQLite has no row locks, and the store's single writer thread
        serialises a process's changes, while the target's lease keeps two processes from
        changing one target at once."""
        if self.store is None:
            row = await self.state()
            change(row)
            row.updated_at = utcnow()
            return
        await self.store.run(change_target_state, self.store.store, self.target, change)

    async def divergence(self) -> Divergence | None:
        row = await self.state()
        return Divergence(list(row.diverged_nodes), row.diverged_reason) if row.diverged else None

    async def mark_diverged(self, nodes: list[str], reason: str) -> None:
        def change(row: TargetState) -> None:
            row.diverged, row.diverged_nodes, row.diverged_reason = True, list(nodes), reason

        await self._update(change)

    async def clear_diverged(self) -> None:
        def change(row: TargetState) -> None:
            row.diverged, row.diverged_nodes, row.diverged_reason = False, [], None

        await self._update(change)

    async def traffic_stopped_at(self) -> datetime | None:
        """When flagbot's drain stop hook took the server out of service, if it has not let work
        back in since (`bot.target.drain`)."""
        return (await self.state()).traffic_stopped_at

    async def mark_traffic_stopped(self) -> None:
        def change(row: TargetState) -> None:
            row.traffic_stopped_at = row.traffic_stopped_at or utcnow()

        await self._update(change)

    async def clear_traffic_stopped(self) -> None:
        def change(row: TargetState) -> None:
            row.traffic_stopped_at = None

        await self._update(change)

    # --- unit as left ---------------------------------------------------------------------

    async def unit_as_left(self, node: str) -> tuple[str | None, str | None]:
        """(checksum, text) of `systemctl cat` as flagbot last left `node`; Nones when never seen."""
        row = await self.state()
        checksum = row.unit_sha256.get(node)
        if checksum is None:
            return None, None
        text = self._memory_text.get(node)
        if text is None and self.store is not None:
            text = await self.store.run(latest_dropin_content, self.store.store, self.target, node, AS_LEFT)
        return checksum, text if text is not None and sha256_text(text) == checksum else None

    async def record_unit(self, node: str, cat_text: str, *, path: str) -> None:
        """Remember `systemctl cat` of `node` as flagbot leaves it (checksum + text)."""
        checksum = sha256_text(cat_text)
        row = await self.state()
        if row.unit_sha256.get(node) == checksum and node in self._memory_text:
            return

        def change(row: TargetState) -> None:
            row.unit_sha256 = {**row.unit_sha256, node: checksum}

        await self._update(change)  # read, change and write at once: the other nodes record too
        self._memory_text[node] = cat_text
        if self.store is not None:
            backup = DropinBackup(
                target=self.target, node=node, path=path, content=cat_text, sha256=checksum, reason=AS_LEFT
            )
            await self.store.run(self.store.store.add, backup)

    # --- drop-in backups ------------------------------------------------------------------

    async def backup(self, node: str, path: str, content: str, reason: str) -> DropinBackup:
        """Keep a drop-in's previous content (with its checksum) before it is overwritten."""
        row = DropinBackup(
            target=self.target,
            node=node,
            path=path,
            content=content,
            sha256=sha256_text(content),
            reason=reason,
        )
        if self.store is None:
            self._memory_backups.append(row)
            return row
        return await self.store.run(self.store.store.add, row)

    async def backups(self, node: str | None = None) -> list[DropinBackup]:
        """Drop-in backups, newest first (the `as-left` and `intended` records excluded)."""
        if self.store is None:
            rows = [row for row in reversed(self._memory_backups) if node is None or row.node == node]
            return rows
        return await self.store.run(dropin_backups, self.store.store, self.target, node, excluding=AS_LEFT)

    # --- intended drop-ins (for reconcile) ------------------------------------------------

    async def set_intended(self, contents: Mapping[str, str]) -> None:
        """Record the drop-in each node should have; `reconcile` restores it on a node that missed it."""
        self._memory_intended.update(contents)
        if self.store is not None:
            for node, content in contents.items():
                row = DropinBackup(
                    target=self.target,
                    node=node,
                    path="intended",
                    content=content,
                    sha256=sha256_text(content),
                    reason=INTENDED,
                )
                await self.store.run(self.store.store.add, row)

    async def intended(self) -> dict[str, str]:
        """node -> the drop-in content flagbot last meant it to have."""
        if self.store is None or self._memory_intended:
            return dict(self._memory_intended)
        return await self.store.run(dropin_contents, self.store.store, self.target, INTENDED)
