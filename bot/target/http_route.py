"""How the bot host reaches node 0's HTTP server: directly, or through an SSH forward on node 0.

Why: SGLang listens on 127.0.0.1 unless `--host` says otherwise, and then the bot host cannot
reach node 0's port although the node itself can. Every HTTP read flagbot makes of the server
(`/health`, `/server_info`, `/metrics`, the benchmarks) takes its base URL from one
`HttpRouter` per target session, so all of them go the same way.

`[targets.X] http_via` decides: `"direct"` uses the configured base URL as it is; `"ssh"`
always forwards; `"auto"` (the default) tries a TCP connect to the configured host and port from
the bot host first, then node 0's own loopback over the SSH connection, and forwards only when
the server answers there but not directly. While neither answers (the server is starting) auto
forwards but keeps asking, so a server that comes up on its public address is then used
directly: a forward to the loopback reaches a server on 0.0.0.0 as well, never one bound to a
single other address.

The forward is asyncssh's `forward_local_port` on node 0's existing (pooled) connection: its
host key was verified when it opened, and it is the only way a forward is made. The listener
binds the bot host's 127.0.0.1 on a free port and leads only to node 0's own 127.0.0.1 at the
configured port; it opens once per target session and closes with it (a pooled connection stays
open for the next session).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Literal
from urllib.parse import SplitResult, urlsplit, urlunsplit

import asyncssh

from bot.config.schema import Target
from bot.target.errors import TargetError
from bot.target.ssh import NodeSession

HttpVia = Literal["auto", "direct", "ssh"]
Way = Literal["direct", "ssh"]

LOOPBACK = "127.0.0.1"
PROBE_TIMEOUT_S = 3.0
"""How long either probe waits: an answering port accepts at once; a filtered one never does."""

WAY_WORDS: dict[Way, str] = {"direct": "direct", "ssh": "through an SSH forward on node 0"}


class HttpForwardError(TargetError):
    """The SSH forward to node 0's loopback could not be opened (sshd may forbid forwarding)."""


@dataclass(frozen=True)
class HttpRoute:
    """Node 0's HTTP base as the bot host uses it, and as node 0 itself uses it."""

    base_url: str
    """What the bot host requests (`http://127.0.0.1:LOCAL/...` through the forward)."""
    on_node: str
    """What a client on node 0 requests (bench_serving): the loopback URL when forwarded."""
    way: Way
    note: str = ""
    """Why this way was taken (`auto`'s probe results, a refused forward)."""

    @property
    def described(self) -> str:
        """`direct` or `through an SSH forward on node 0`, with the note when there is one."""
        words = WAY_WORDS[self.way]
        return f"{words} ({self.note})" if self.note else words


def _port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def _with_netloc(parts: SplitResult, netloc: str) -> str:
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")).rstrip("/")


async def answers_directly(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether something accepts a TCP connection at host:port from the bot host."""
    try:
        async with asyncio.timeout(timeout_s):
            _reader, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


LoopbackAnswer = Literal["answers", "closed", "forbidden"]


async def probe_loopback(
    conn: asyncssh.SSHClientConnection, port: int, timeout_s: float = PROBE_TIMEOUT_S
) -> tuple[LoopbackAnswer, str]:
    """Whether node 0's own 127.0.0.1:port accepts a connection, opened as the forward would be
    (a `direct-tcpip` channel: no command runs). `forbidden`: sshd refuses forwarding itself
    (`AllowTcpForwarding no`), which no waiting for the server mends; `closed`: nothing listens."""
    try:
        async with asyncio.timeout(timeout_s):
            _reader, writer = await conn.open_connection(LOOPBACK, port)
    except asyncssh.ChannelOpenError as exc:
        if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
            return "forbidden", f"node 0's sshd refuses TCP forwarding ({exc.reason})"
        return "closed", exc.reason
    except (OSError, asyncssh.Error, TimeoutError) as exc:
        return "closed", str(exc) or type(exc).__name__
    writer.close()
    return "answers", ""


class HttpRouter:
    """The route to one target's node 0 HTTP server, resolved on first use and kept per session."""

    def __init__(self, target: Target, node0: NodeSession) -> None:
        self.target = target
        self.node0 = node0
        self._parts = urlsplit(target.http_base())
        self._decided: HttpRoute | None = None
        self._listener: asyncssh.SSHListener | None = None
        self._listener_conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()

    @property
    def configured(self) -> HttpRoute:
        """The configured base URL, taken as it is."""
        base = self.target.http_base().rstrip("/")
        return HttpRoute(base, base, "direct")

    async def route(self) -> HttpRoute:
        """The route now (probing on first use under `auto`); TargetError when node 0 cannot be reached
        for a forward `http_via = "ssh"` needs."""
        async with self._lock:
            if self._decided is not None and (self._decided.way == "direct" or self._forward_alive()):
                return self._decided
            return await self._resolve()

    async def _resolve(self) -> HttpRoute:
        via: HttpVia = self.target.http_via
        if via == "direct":
            self._decided = self.configured
            return self._decided
        port = _port(self._parts)
        if via == "ssh":
            answer, said = await probe_loopback(await self.node0.connection(), port)
            if answer == "forbidden":
                raise HttpForwardError(f"{self.node0.name}: no SSH forward to its {LOOPBACK}:{port}: {said}")
            self._decided = await self._forwarded("http_via = ssh")
            return self._decided
        host = self._parts.hostname or ""
        if await answers_directly(host, port):
            self._decided = self.configured
            return self._decided
        try:
            answer, said = await probe_loopback(await self.node0.connection(), port)
        except TargetError as exc:  # no login: no forward; the HTTP read says what is wrong there
            configured = self.configured
            return HttpRoute(configured.base_url, configured.on_node, "direct", f"no SSH forward: {exc}")
        if answer == "answers":
            self._decided = await self._forwarded(f"{host}:{port} does not answer from the bot host")
            return self._decided
        if answer == "forbidden":  # decided: no forward can ever help
            self._decided = HttpRoute(self.configured.base_url, self.configured.on_node, "direct", said)
            return self._decided
        # nothing answers yet (a server starting): forward, which reaches a server on 0.0.0.0 too,
        # and ask again next time, so one that comes up on its public address is used directly
        return await self._forwarded("nothing answers yet")

    def _forward_alive(self) -> bool:
        return self._listener_conn is not None and not self._listener_conn.is_closed()

    async def _forwarded(self, note: str) -> HttpRoute:
        port = _port(self._parts)
        if not self._forward_alive():
            self._close_listener()
            conn = await self.node0.connection()
            try:
                self._listener = await conn.forward_local_port(LOOPBACK, 0, LOOPBACK, port)
            except (OSError, asyncssh.Error) as exc:
                raise HttpForwardError(
                    f"{self.node0.name}: no SSH forward to its {LOOPBACK}:{port}: {exc}"
                ) from None
            self._listener_conn = conn
        assert self._listener is not None
        local = _with_netloc(self._parts, f"{LOOPBACK}:{self._listener.get_port()}")
        on_node = _with_netloc(self._parts, f"{LOOPBACK}:{port}")
        return HttpRoute(local, on_node, "ssh", note)

    def _close_listener(self) -> None:
        listener, self._listener, self._listener_conn = self._listener, None, None
        if listener is not None:
            listener.close()

    async def close(self) -> None:
        """Close the forward's listener (the connection itself stays with its session or pool)."""
        listener = self._listener
        self._close_listener()
        self._decided = None
        if listener is not None:
            with contextlib.suppress(Exception):
                await listener.wait_closed()
