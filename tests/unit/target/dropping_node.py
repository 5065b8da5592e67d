"""A fake node whose SSH server can drop the whole connection under a command, as a dying sshd would.

Kept apart from `fake_node.py` (shared by many tests) because only the connection-drop tests
need it: `drop[name] = ("before" | "after", times)` aborts the server side of the connection
when command `name` arrives, before running it or after running it (its effect done, its exit
status never sent); `refuse_after_drop` also closes the listening socket, so a reconnect fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest_asyncio

from bot.target.table_match import identify
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import FakeTarget, serving

When = Literal["before", "after"]


@dataclass
class DroppingNode(FakeNode):
    drop: dict[str, tuple[When, int]] = field(default_factory=dict)
    refuse_after_drop: bool = False
    dropped: list[str] = field(default_factory=list)
    """Names of the commands the connection was dropped under, in order."""
    connections: list[Any] = field(default_factory=list)
    """Server-side connections that ran a command (the last one is the current one)."""

    async def handle(self, process: Any) -> None:
        conn = process.channel.get_connection()
        if not self.connections or self.connections[-1] is not conn:
            self.connections.append(conn)
        match = identify(process.command or "", unit=self.systemd.unit)
        name = match[0] if match else ""
        when, times = self.drop.get(name, ("before", 0))
        if times <= 0:
            await super().handle(process)
            return
        self.drop[name] = (when, times - 1)
        self.received.append(process.command or "")
        if when == "after":
            stdin = await process.stdin.read() if name.startswith("write-") else b""
            self.run(name, match[1] if match else {}, stdin)
        self.dropped.append(name)
        if self.refuse_after_drop:
            self.server.close()
        conn.abort()

    def cut_idle(self) -> None:
        """Abort the server side of the current connection while no command runs (an idle cut)."""
        self.connections[-1].abort()


@pytest_asyncio.fixture(name="dropping_target")
async def dropping_target_fixture(tmp_path: Path) -> AsyncIterator[FakeTarget]:
    """`dropping_target`: two fake nodes that can drop connections (`nodes[k]` are `DroppingNode`s).

    Import `dropping_target_fixture` into a test module to use it (no shared conftest edit).
    """
    async with serving(tmp_path, [DroppingNode(FakeSystemd(rank=k)) for k in range(2)]) as target:
        yield target


def dropper(target: FakeTarget, k: int) -> DroppingNode:
    node = target.nodes[k]
    assert isinstance(node, DroppingNode)
    return node
