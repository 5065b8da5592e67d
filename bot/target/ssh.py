"""One SSH connection per node, reused, through which only table commands can run.

Why one reused connection: a login costs ~0.3 s on a systemd host (a user manager starts on
each), a command on an open connection ~10 ms; readiness polling and journal greps run many
commands. Why only table commands: `run` takes the *name* of an entry of
`bot.target.privileged.COMMANDS` and its typed parameters; there is no raw-string API, so every
remote command is one the generated sudoers file and a reviewer have seen.

Host keys are always verified against the configured known_hosts file (re-read at every
connect: a rebooted testbed node has a new key); an unknown or changed key raises
`HostKeyError` with the offered key's SHA256 fingerprint. A command that outlives its timeout is
terminated on the host (signal, then channel close): OpenSSH leaves a process without a pty
running when only the channel closes.

A connection that was up and broke under a command (sshd restarted, a NAT or firewall idle cut,
the session process killed) is not a host fault: a command in `RETRY_SAFE` is re-run once on a
fresh connection and the reconnect is recorded in `NodeSession.reconnects` for the evidence.
Only when the reconnect fails too is the node unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh

from bot.config.schema import JumpHost, Node, SSHSettings
from bot.target.command_result import CommandResult
from bot.target.errors import (
    CommandFailed,
    CommandTimeout,
    ConnectFailedError,
    ConnectionLostError,
    HostKeyError,
    LocalFileError,
    UnreachableError,
)
from bot.target.privileged import COMMANDS, ParamError, Rendered, render_params
from bot.target.ssh_files import key_file_problem, known_hosts_entry_problem, known_hosts_problem
from bot.target.ssh_pool import channel_slots, current_pool, file_identity
from bot.target.ssh_reconnect import RETRY_SAFE, Reconnect

if TYPE_CHECKING:
    from asyncssh.connection import SSHConnection

KEEPALIVE_S = 5.0
"""A dead link is noticed by the keepalive within ~3 intervals, not at the next TCP timeout."""
KILL_GRACE_S = 2.0
"""How long a timed-out command gets between SIGTERM and the channel being torn down."""


def _aes_gcm_first(offered: list[bytes]) -> list[bytes]:
    """asyncssh's ciphers, the same ones, with AES-GCM moved ahead of ChaCha20-Poly1305.

    Why: a connection uses the first cipher of the client's list that the server also offers.
    asyncssh lists chacha20-poly1305 first, and builds it in Python from three cryptography
    contexts per packet (~14 us a packet here, against ~2.6 us for AES-GCM's one AEAD call);
    an experiment's SSH traffic is ~1,800 packets, all handled on the event loop's thread. Every
    cipher offered before is offered still, so a server that allows only ChaCha20 still gets it.
    """
    return sorted(offered, key=lambda name: 0 if name.endswith(b"-gcm@openssh.com") else 1)


ENCRYPTION_ALGS = [
    name.decode() for name in _aes_gcm_first(asyncssh.encryption.get_default_encryption_algs())
]
"""The ciphers every connection offers, in order of preference (see `_aes_gcm_first`)."""


Auditor = Callable[[str, str], None]
"""Called with (node name, argv_shell) before each remote command: a log of what flagbot ran."""

Process = asyncssh.SSHClientProcess[bytes]
"""A table command running on a node (stdin, stdout and stderr in bytes: `encoding=None`)."""
Tunnel = asyncssh.SSHClientConnection | tuple[()]
"""The jump host's connection a node is reached through, or `()`: asyncssh's "no tunnel"."""


class NodeSession:
    """The lazily opened, reused SSH connection to one node, and the only way to run commands there.

    `unit` fills the `unit` parameter of table commands when a call does not give one, so
    callers write `await node.run("show", properties=["ActiveState"])`.
    """

    def __init__(
        self,
        host: str,
        *,
        unit: str,
        port: int = 22,
        username: str = "flagbot",
        key_path: Path | None = None,
        known_hosts: Path,
        sudo: bool = True,
        connect_timeout: float = 10.0,
        command_timeout: float = 60.0,
        tunnel: NodeSession | None = None,
        index: int = 0,
        audit: Auditor | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.username = username
        self.unit = unit
        self.key_path = key_path
        self.known_hosts = known_hosts
        self.sudo = sudo
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self.tunnel = tunnel
        self.index = index
        self.audit = audit
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self.reconnects: list[Reconnect] = []
        """Every reconnect after a lost connection, oldest first (restart reports slice it)."""

    @classmethod
    def from_config(
        cls,
        node: Node | JumpHost,
        ssh: SSHSettings,
        *,
        unit: str,
        index: int = 0,
        tunnel: NodeSession | None = None,
        audit: Auditor | None = None,
    ) -> NodeSession:
        """A session for one configured node (or jump host), paths with `~` expanded."""
        return cls(
            node.host,
            unit=unit,
            port=node.port,
            username=node.user,
            key_path=ssh.key_path.expanduser(),
            known_hosts=ssh.known_hosts.expanduser(),
            sudo=ssh.sudo,
            connect_timeout=ssh.connect_timeout.total_seconds(),
            command_timeout=ssh.command_timeout.total_seconds(),
            tunnel=tunnel,
            index=index,
            audit=audit,
        )

    @property
    def name(self) -> str:
        """How the node is named in errors, the store and reports: `host` or `host:port`."""
        return self.host if self.port == 22 else f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"NodeSession({self.username}@{self.name}, node {self.index})"

    # --- connection -------------------------------------------------------------------------

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The open connection, (re)connecting when there is none or it was lost.

        A connection found closed between commands (the keepalive noticed an idle cut) is
        replaced and the reconnect recorded; a lost command's reconnect is recorded by `run`.
        """
        async with self._lock:
            if self._conn is not None and self._conn.is_closed():
                self._forget_pooled(self._conn)
                self._conn = None
                self._conn = await self._open_connection()
                self.reconnects.append(Reconnect(self.name, None, "closed while idle", time.time()))
            elif self._conn is None:
                self._conn = await self._open_connection()
            return self._conn

    @property
    def pool_key(self) -> tuple[object, ...]:
        """What makes two sessions' connections interchangeable (see `bot.target.ssh_pool`)."""
        jump = self.tunnel.pool_key if self.tunnel is not None else None
        return (self.username, self.host, self.port, str(self.key_path), str(self.known_hosts), jump)

    async def _open_connection(self) -> asyncssh.SSHClientConnection:
        """A new connection, or the pooled one for this node while `flagbot serve` shares them."""
        pool = current_pool()
        if pool is None:
            return await self._connect()
        return await pool.get(self.pool_key, self._connect, version=file_identity(self.known_hosts))

    def _forget_pooled(self, conn: asyncssh.SSHClientConnection) -> None:
        pool = current_pool()
        if pool is not None:
            pool.discard(self.pool_key, conn)

    async def _connect(self) -> asyncssh.SSHClientConnection:
        self.check_local_files()
        tunnel: Tunnel = await self.tunnel.connection() if self.tunnel is not None else ()
        options: dict[str, Any] = {
            "port": self.port,
            "username": self.username,
            "known_hosts": str(self.known_hosts),
            "agent_path": None,
            "config": None,
            "tunnel": tunnel,
            "connect_timeout": self.connect_timeout,
            "login_timeout": self.connect_timeout,
            "keepalive_interval": KEEPALIVE_S,
            "keepalive_count_max": 3,
            "encryption_algs": ENCRYPTION_ALGS,
        }
        if self.key_path is not None:
            options["client_keys"] = [str(self.key_path)]
        try:
            async with asyncio.timeout(self.connect_timeout + 1):  # not wait_for: see _open
                return await asyncssh.connect(self.host, **options)
        except asyncssh.HostKeyNotVerifiable as exc:
            # "Host key is not trusted" says nothing about which of two faults it is: no entry at
            # all for this host:port (add one) or an entry with another key (a changed host?)
            missing = known_hosts_entry_problem(self.known_hosts, self.host, self.port)
            reason = f"ssh.known_hosts {self.known_hosts} {missing}" if missing else str(exc)
            raise HostKeyError(self.name, await self._offered_fingerprint(tunnel), reason) from None
        except asyncssh.PermissionDenied as exc:
            raise ConnectFailedError(
                self.name, f"login as {self.username} refused ({exc.reason}); is the key authorized?"
            ) from None
        except TimeoutError:
            raise ConnectFailedError(self.name, f"no SSH answer within {self.connect_timeout:g} s") from None
        except (OSError, asyncssh.Error) as exc:
            raise ConnectFailedError(self.name, str(exc) or type(exc).__name__) from None

    def check_local_files(self) -> None:
        """`LocalFileError` when the key or known_hosts file cannot serve a connection (checked
        before connecting: a path in flagbot.toml is not a fault of the node)."""
        problem = known_hosts_problem(self.known_hosts)
        if problem is not None:
            raise LocalFileError(self.name, "ssh.known_hosts", str(self.known_hosts), problem)
        if self.key_path is not None:
            problem = key_file_problem(self.key_path)
            if problem is not None:
                raise LocalFileError(self.name, "ssh.key_path", str(self.key_path), problem)

    async def _offered_fingerprint(self, tunnel: Tunnel) -> str | None:
        """The SHA256 fingerprint of the key the host offers, fetched only to explain a refusal."""
        with contextlib.suppress(OSError, asyncssh.Error, TimeoutError):
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(self.host, self.port, tunnel=tunnel, config=None),
                self.connect_timeout,
            )
            if key is not None:
                return str(key.get_fingerprint("sha256"))
        return None

    def _drop(self, conn: SSHConnection | None = None) -> None:
        """Forget a connection that stopped answering; the next call reconnects.

        With `conn`, only when it is still the current one: two commands that shared a lost
        connection must not make the second one abort the connection the first one reopened.
        """
        if self._conn is not None and (conn is None or self._conn is conn):
            self._forget_pooled(self._conn)
            self._conn.abort()
            self._conn = None

    async def close(self) -> None:
        """Close the connection (idempotent); a later `run` would open a new one.

        A pooled connection stays open for the next session (the pool closes it)."""
        conn, self._conn = self._conn, None
        pool = current_pool()
        if pool is not None and pool.holds(self.pool_key, conn):
            return
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), KILL_GRACE_S)

    # --- commands ---------------------------------------------------------------------------

    def render(self, command: str, /, **params: object) -> Rendered:
        """The argv of a table command as this node runs it (sudo per config, unit filled in)."""
        spec = COMMANDS.get(command)
        if spec is None:
            raise ParamError(f"no node command {command!r}; known: {', '.join(COMMANDS)}")
        if "unit" in spec.required and params.get("unit") is None:
            params = {**params, "unit": self.unit}
        return render_params(command, params, sudo=self.sudo)

    async def _open(
        self, rendered: Rendered, timeout: float
    ) -> tuple[asyncssh.SSHClientConnection, Process, Callable[[], None]]:
        """(connection, channel running `rendered`, the release of its channel slot: call it when done).

        A privileged command may take a slot reads may not (`bot.target.ssh_pool.RESERVED_CHANNELS`).

        A connection that does not answer is dropped. A channel the server refuses on a live
        connection (sshd's `MaxSessions`) is not a lost connection: nothing is dropped."""
        conn = await self.connection()
        slots = channel_slots(conn)
        privileged = rendered.command.privileged
        try:
            async with asyncio.timeout(timeout):  # not wait_for: see below
                await slots.acquire(privileged=privileged)
        except TimeoutError:
            busy = (
                f"{slots.total} commands kept every SSH channel"
                if privileged
                else f"{slots.read_limit} reads kept the read channels ({slots.reserved} of "
                f"{slots.total} are kept for privileged commands)"
            )
            raise UnreachableError(self.name, f"{busy} busy for {timeout:g} s") from None
        release = functools.partial(slots.release, privileged=privileged)
        if self.audit is not None:
            self.audit(self.name, rendered.shell)
        opening = asyncio.ensure_future(conn.create_process(rendered.shell, encoding=None))
        try:
            # `asyncio.timeout`, not `wait_for`: Python 3.11's wait_for returns the result when the
            # caller's cancel lands as the open completes, so the cancel was lost and the command
            # ran to its own limit (a loaded machine made it likely; a test caught it)
            async with asyncio.timeout(timeout):
                process = await asyncio.shield(opening)
            return conn, process, release
        except asyncio.CancelledError:
            # the caller gave up while the channel opened: the node may already run the command,
            # so let the open finish (within the open's own bound) and stop what it started, as a
            # cancelled run does
            await _stop_opened(opening, min(timeout, STOP_OPENED_WAIT_S))
            release()
            raise
        except TimeoutError:
            opening.cancel()
            release()
            self._drop(conn)
            raise UnreachableError(
                self.name, f"no answer on the SSH connection within {timeout:g} s"
            ) from None
        except asyncssh.ChannelOpenError as exc:
            release()
            if conn.is_closed():
                self._drop(conn)
                raise ConnectionLostError(self.name, rendered.shell, _said(exc)) from None
            raise UnreachableError(self.name, f"the node refused an SSH channel: {_said(exc)}") from None
        except BaseException as exc:
            release()
            if isinstance(exc, OSError | asyncssh.Error):
                self._drop(conn)
                raise ConnectionLostError(self.name, rendered.shell, _said(exc)) from None
            raise

    async def run(
        self,
        command: str,
        /,
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        **params: object,
    ) -> CommandResult:
        """Run table command `command` with validated `params`; stdin gets `input`, then EOF.

        EOF is always sent (asyncssh's `run(input="")` sends none, and `tee` would wait for
        ever). Raises `CommandFailed` on a non-zero exit when `check`, `CommandTimeout` after
        `timeout` (default: the config's command timeout; the remote process is terminated),
        `UnreachableError` when the node does not answer.

        A connection lost under a `RETRY_SAFE` command is reopened and the command re-run once
        (with its full timeout again), the reconnect recorded in `reconnects`; when the reconnect
        fails, `UnreachableError` says both. Other commands raise `ConnectionLostError`.
        """
        rendered = self.render(command, **params)
        if input is not None and not rendered.command.stdin:
            raise ParamError(f"{command} reads no input")
        limit = self.command_timeout if timeout is None else timeout
        try:
            result = await self._run_once(rendered, input, limit)
        except ConnectionLostError as lost:
            if command not in RETRY_SAFE:
                raise
            await self._reconnect(lost)
            result = await self._run_once(rendered, input, limit)
        if check and result.exit_status != 0:
            raise CommandFailed(result, self.name)
        return result

    async def _reconnect(self, lost: ConnectionLostError) -> None:
        """A fresh connection after `lost`, recorded; when none can be had, the node is unreachable."""
        try:
            await self.connection()
        except UnreachableError as again:
            raise UnreachableError(
                self.name, f"{lost.reason}; the reconnect failed too: {again.reason}"
            ) from None
        self.reconnects.append(Reconnect(self.name, lost.argv_shell, lost.detail or "closed", time.time()))

    async def _run_once(self, rendered: Rendered, input: bytes | str | None, limit: float) -> CommandResult:
        started = time.monotonic()
        conn, process, release = await self._open(rendered, limit)
        try:
            return await self._finish(conn, process, rendered, input, limit, started)
        finally:
            release()

    async def _finish(
        self,
        conn: asyncssh.SSHClientConnection,
        process: Process,
        rendered: Rendered,
        input: bytes | str | None,
        limit: float,
        started: float,
    ) -> CommandResult:
        try:
            if input is not None:
                process.stdin.write(input.encode() if isinstance(input, str) else input)
            process.stdin.write_eof()
            remaining = max(0.01, limit - (time.monotonic() - started))
            completed = await asyncio.wait_for(process.wait(check=False), remaining)
        except TimeoutError:
            await self._terminate(process)
            raise CommandTimeout(self.name, rendered.shell, limit) from None
        except (OSError, asyncssh.Error) as exc:
            self._drop(conn)
            raise ConnectionLostError(self.name, rendered.shell, _said(exc)) from None
        except asyncio.CancelledError:  # the caller gave up: do not leave the command running
            with contextlib.suppress(Exception):
                process.send_signal("TERM")
                process.close()
            raise
        status = completed.exit_status
        if status is None and completed.exit_signal is None and conn.is_closed():
            self._drop(conn)
            raise ConnectionLostError(self.name, rendered.shell, "the connection closed")
        if status is None:  # killed by a signal
            status = -1
        return CommandResult(
            command=rendered.command.name,
            argv_shell=rendered.shell,
            exit_status=status,
            stdout=_output(completed.stdout),
            stderr=_output(completed.stderr),
            duration_s=time.monotonic() - started,
        )

    async def stream(self, command: str, /, **params: object) -> AsyncIterator[bytes]:
        """Yield the stdout of a long-running table command (`journalctl -f`) as it arrives.

        Closing the iterator (`aclose()`, leaving `async for` by `break`, cancellation)
        terminates the remote process. A lost connection raises `ConnectionLostError` (never
        retried here: the reader knows from where to resume), also when it shows only as an end
        of the stream without an exit status.
        """
        rendered = self.render(command, **params)
        conn, process, release = await self._open(rendered, self.command_timeout)
        try:
            process.stdin.write_eof()
            while True:
                try:
                    chunk = await process.stdout.read(65536)
                except (OSError, asyncssh.Error) as exc:
                    self._drop(conn)
                    raise ConnectionLostError(self.name, rendered.shell, _said(exc)) from None
                if not chunk:
                    if conn.is_closed() and process.exit_status is None and process.exit_signal is None:
                        self._drop(conn)
                        raise ConnectionLostError(self.name, rendered.shell, "the connection closed")
                    return
                yield bytes(chunk)
        finally:
            try:
                await self._terminate(process)
            finally:
                release()

    async def _terminate(self, process: Process) -> None:
        """Stop a remote process we no longer wait for: SIGTERM (sudo relays it), then close.

        A closed channel alone leaves the process running on OpenSSH; the signal request ends
        it. A connection that does not even deliver the close is dropped.
        """
        if process.exit_status is not None:
            return
        with contextlib.suppress(Exception):
            process.send_signal("TERM")
        try:
            await asyncio.wait_for(process.wait_closed(), KILL_GRACE_S)
            return
        except TimeoutError:
            pass
        except Exception:  # noqa: S110 - closing an already broken channel
            pass
        with contextlib.suppress(Exception):
            process.send_signal("KILL")
            process.close()
        try:
            await asyncio.wait_for(process.wait_closed(), KILL_GRACE_S)
        except Exception:
            self._drop(process.channel.get_connection())


def _output(data: bytes | str | None) -> bytes:
    """A completed command's stdout or stderr: bytes (`encoding=None`), none when not captured."""
    if isinstance(data, str):  # asyncssh's type allows text; a process opened without encoding gives bytes
        return data.encode()
    return bytes(data or b"")


def _said(exc: BaseException) -> str:
    """What the transport said about a lost connection, for the message."""
    return str(exc) or type(exc).__name__


STOP_OPENED_WAIT_S = 30.0
"""How long a cancelled command waits for its channel's open to finish so it can TERM what the open
started (at most the open's own bound). A fixed 5 s let a loaded machine's slow open run on
unsignalled; a hung open must not hold a cancel for a command's whole limit either."""


async def _stop_opened(opening: asyncio.Future[asyncssh.SSHClientProcess[bytes]], bound_s: float) -> None:
    """TERM the process a cancelled open started, once the open completes (within `bound_s`)."""
    with contextlib.suppress(Exception):
        process = await asyncio.wait_for(opening, bound_s)
        process.send_signal("TERM")
        process.close()
