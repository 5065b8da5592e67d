"""A target as one object: its config, one `NodeSession` per node (node 0 first) and the store.

Why a facade: every target operation (read the unit, write the drop-in, restart, readiness,
journal grep) works on all nodes of a deployment together, and needs the same three things.
Connections open lazily on first use and are closed together when the `async with` ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from bot.config.schema import Target
from bot.store import AsyncStore
from bot.target.http_route import HttpRoute, HttpRouter
from bot.target.ledger import Ledger
from bot.target.ssh import Auditor, NodeSession

T = TypeVar("T")


@dataclass
class TargetSession:
    """All nodes of one configured target. Build it with `TargetSession.open(...)`."""

    name: str
    target: Target
    nodes: list[NodeSession]
    store: AsyncStore | None = None
    jump: NodeSession | None = field(default=None, repr=False)
    ledger: Ledger = field(init=False, repr=False)
    """What flagbot remembers of the target (store-backed when `store` is given)."""
    http: HttpRouter = field(init=False, repr=False)
    """How node 0's HTTP server is reached (direct or an SSH forward), resolved once per session."""

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.name, self.store)
        self.http = HttpRouter(self.target, self.nodes[0])

    async def http_route(self) -> HttpRoute:
        """Node 0's HTTP base as the bot host reaches it now: every HTTP read of the server uses it.

        A session whose `target` was replaced (another base URL or `http_via`) routes anew."""
        if self.http.target is not self.target:
            await self.http.close()
            self.http = HttpRouter(self.target, self.node0)
        return await self.http.route()

    async def http_base(self) -> str:
        """The base URL of `http_route()` (the configured one, or the local end of the forward)."""
        return (await self.http_route()).base_url

    @property
    def unit(self) -> str:
        """Node 0's service; each node's own is `NodeSession.unit` (`Target.unit_of`)."""
        return self.nodes[0].unit

    @property
    def node0(self) -> NodeSession:
        """The node that serves HTTP and prints the capacity line."""
        return self.nodes[0]

    @classmethod
    def build(
        cls, name: str, target: Target, *, store: AsyncStore | None = None, audit: Auditor | None = None
    ) -> TargetSession:
        """Sessions for every node (none connected yet); the jump host, if any, is shared.

        Each node's session carries that node's service (`Target.unit_of`: a head and a worker
        may run different units, a template one instance per node), so every command, drop-in
        path and journal read for the node names its own unit."""
        ssh = target.ssh
        jump = (
            NodeSession.from_config(ssh.jump_host, ssh, unit=target.unit_of(0), index=-1, audit=audit)
            if ssh.jump_host is not None
            else None
        )
        nodes = [
            NodeSession.from_config(node, ssh, unit=target.unit_of(k), index=k, tunnel=jump, audit=audit)
            for k, node in enumerate(target.nodes)
        ]
        return cls(name=name, target=target, nodes=nodes, store=store, jump=jump)

    @classmethod
    @asynccontextmanager
    async def open(
        cls, name: str, target: Target, *, store: AsyncStore | None = None, audit: Auditor | None = None
    ) -> AsyncIterator[TargetSession]:
        """`async with TargetSession.open("twin", target, store=store) as ts:`; closes every connection."""
        session = cls.build(name, target, store=store, audit=audit)
        try:
            yield session
        finally:
            await session.close()

    async def each(self, action: Callable[[NodeSession], Awaitable[T]]) -> list[T | BaseException]:
        """Run `action` on every node at once; results (or the exception) in node order."""
        return list(await asyncio.gather(*(action(node) for node in self.nodes), return_exceptions=True))

    async def close(self) -> None:
        await self.http.close()  # the forward's listener first: it lives on node 0's connection
        await asyncio.gather(*(node.close() for node in self.nodes), return_exceptions=True)
        if self.jump is not None:
            await self.jump.close()
