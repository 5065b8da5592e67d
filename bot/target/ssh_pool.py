"""SSH connections kept open between commands while `flagbot serve` runs.

A one-off CLI command opens its connections and closes them when it ends (its flag-list read
and its run share them: `bot.app.command_loop`). The long-running bot
would do the same for every Slack command, check and experiment: a new login per node each time
(key exchange, authentication, a user session started by sshd: 0.2-0.3 s a node). With the pool
enabled (`pooled()` around `serve`), a `NodeSession` takes the open connection of the same
(user, host, port, key, known_hosts file, jump host) and leaves it open when the session closes;
a connection found closed (keepalive, idle cut) or dropped after a failure is replaced. Host keys
are verified when a connection is opened, as before, and a change to the known_hosts file closes
the connections verified against its old content at their next use; asyncssh runs each command
on its own channel (at most `MAX_CHANNELS` at once on a connection, `RESERVED_CHANNELS` of them
kept for privileged commands), so sessions sharing a connection do not wait for each other and
reads cannot starve a restart.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from asyncssh import SSHClientConnection

CLOSE_WAIT_S = 2.0


class PooledConnection(Protocol):
    """What the pool needs of a connection (asyncssh's `SSHClientConnection` has it)."""

    def close(self) -> None: ...

    def is_closed(self) -> bool: ...

    async def wait_closed(self) -> None: ...


ConnT = TypeVar("ConnT", bound=PooledConnection)


class ConnectionPool(Generic[ConnT]):
    """Open connections by key; one connect at a time per key, different keys in parallel."""

    def __init__(self) -> None:
        self._connections: dict[Hashable, ConnT] = {}
        self._versions: dict[Hashable, Hashable] = {}
        self._locks: dict[Hashable, asyncio.Lock] = {}

    async def get(
        self, key: Hashable, connect: Callable[[], Awaitable[ConnT]], *, version: Hashable = None
    ) -> ConnT:
        """The pooled connection for `key`, opened with `connect` when there is none or it closed.

        `version` is what the connection was verified against (the known_hosts file's identity):
        a connection opened under another version is closed and replaced, so a host key removed
        from known_hosts stops a running bot's connection at its next command."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is not None and self._versions.get(key) != version:
                del self._connections[key]
                conn.close()
                conn = None
            if conn is None or conn.is_closed():
                conn = await connect()
                self._connections[key] = conn
                self._versions[key] = version
            return conn

    def holds(self, key: Hashable, conn: ConnT | None) -> bool:
        return conn is not None and self._connections.get(key) is conn

    def discard(self, key: Hashable, conn: ConnT) -> None:
        """Forget `conn` (a session dropped it as broken); the next `get` opens a new one."""
        if self.holds(key, conn):
            del self._connections[key]

    def __len__(self) -> int:
        return len(self._connections)

    async def close(self) -> None:
        """Close every pooled connection (at the end of `serve`)."""
        connections, self._connections = list(self._connections.values()), {}
        for conn in connections:
            conn.close()

        async def closed(conn: ConnT) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), CLOSE_WAIT_S)

        await asyncio.gather(*(closed(conn) for conn in connections))


_current: ConnectionPool[SSHClientConnection] | None = None


def current_pool() -> ConnectionPool[SSHClientConnection] | None:
    """The pool sessions share now, or None (each session has its own connections)."""
    return _current


@contextlib.asynccontextmanager
async def pooled() -> AsyncIterator[ConnectionPool[SSHClientConnection]]:
    """Share connections between sessions inside the block; close them all at its end."""
    global _current
    previous, _current = _current, ConnectionPool()
    pool = _current
    try:
        yield pool
    finally:
        _current = previous
        await pool.close()


def file_identity(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, mtime) of a file, None when it is missing: a changed file has another."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


MAX_CHANNELS = 8
"""Commands flagbot runs at once on one connection. sshd refuses channels beyond `MaxSessions`
(10 by default); every session sharing a pooled connection (`flagbot serve`) counts, so a burst
(readiness watchers, observe's parallel reads, a check, a Slack `status`) waits for a slot instead
of being refused."""
RESERVED_CHANNELS = 2
"""Of `MAX_CHANNELS`, how many only privileged commands (stop, start, daemon-reload, the drop-in's
`tee`: `NodeCommand.privileged`) may use: reads (journalctl, grep, `systemctl show`) queue for the
other six, so eight viewers' greps cannot hold the channel an operator's restart needs."""
_slots: weakref.WeakKeyDictionary[PooledConnection, ChannelSlots] = weakref.WeakKeyDictionary()


class ChannelSlots:
    """A connection's channel slots: `total` for everyone, of which `reserved` for privileged commands.

    A read takes a slot while fewer than `total` are busy and fewer than `total - reserved`
    reads hold one; a privileged command takes any free slot. Waiters are served first come,
    first served, privileged ones before every read (a freed slot goes to a waiting write).
    """

    def __init__(self, total: int = MAX_CHANNELS, reserved: int = RESERVED_CHANNELS) -> None:
        if not 0 <= reserved < total:
            raise ValueError(f"reserved channels ({reserved}) must be fewer than all channels ({total})")
        self.total = total
        self.reserved = reserved
        self.busy = 0
        self.reads = 0
        self._waiting: dict[bool, collections.deque[asyncio.Future[None]]] = {
            True: collections.deque(),
            False: collections.deque(),
        }

    @property
    def read_limit(self) -> int:
        return self.total - self.reserved

    def _free(self, privileged: bool) -> bool:
        return self.busy < self.total and (privileged or self.reads < self.read_limit)

    def _take(self, privileged: bool) -> None:
        self.busy += 1
        if not privileged:
            self.reads += 1

    async def acquire(self, *, privileged: bool) -> None:
        """Wait for a slot (at once when one is free and nobody waits ahead); cancelled (a
        timeout), nothing is held."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[privileged].append(waiter)
        self._wake()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted as the wait was given up
                self.release(privileged=privileged)
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._waiting[privileged].remove(waiter)

    def release(self, *, privileged: bool) -> None:
        self.busy -= 1
        if not privileged:
            self.reads -= 1
        self._wake()

    def _wake(self) -> None:
        for privileged in (True, False):
            queue = self._waiting[privileged]
            while queue and self._free(privileged):
                waiter = queue.popleft()
                if not waiter.done():
                    self._take(privileged)
                    waiter.set_result(None)


def channel_slots(conn: PooledConnection) -> ChannelSlots:
    """The channel slots of one connection, shared by every session that uses it."""
    slots = _slots.get(conn)
    if slots is None:
        slots = _slots[conn] = ChannelSlots()
    return slots
