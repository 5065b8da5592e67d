"""An in-process SSH server that plays a systemd node, for fast tests of the target layer.

It answers exactly the table's commands (`systemctl cat|show|start|...`, `busctl`, `cat`, `tee`,
`mkdir`, `journalctl`) from a small model of one unit: files on disk, what the last
daemon-reload loaded, the active state and invocation id. Every command text it receives is
recorded (`received`), so a test can check that each one is an exact table rendering.
Faults are injected per entry name: `fail`, `hang` (until the client signals or closes).
"""

from __future__ import annotations

import asyncio
import json
import shlex
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from bot.sglang.launch_unit import parse_unit
from bot.target.privileged import dropin_backup_path, dropin_path
from bot.target.sudoers import needed_commands
from bot.target.table_match import identify

UNIT = "sglang-qwen.service"
VENDOR_TEXT = """[Unit]
Description=SGLang (fake node)

[Service]
Environment=PYTHONUNBUFFERED=1
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    --model-path /models/qwen \\
    --tp 2 \\
    --nnodes 2 \\
    --node-rank {rank} \\
    --port 30000
Restart=on-failure
"""


@dataclass
class FakeSystemd:
    """One unit on one node: disk, loaded configuration and runtime state."""

    rank: int = 0
    unit: str = UNIT
    files: dict[str, str] = field(default_factory=dict)
    loaded: str = ""
    load_state: str = "loaded"
    """systemd's `LoadState` of the unit (`not-found` for a unit name the node does not have)."""
    active: str = "active"
    sub: str = "running"
    result: str = "success"
    invocation: str = field(default_factory=lambda: uuid.uuid4().hex)
    n_restarts: int = 0
    starts: int = 0
    journal: list[str] = field(default_factory=list)
    environment_files: dict[str, str | None] = field(default_factory=dict)
    """The unit's `EnvironmentFile=` paths and their text (None: the login may not read it)."""

    def __post_init__(self) -> None:
        self.vendor = f"/etc/systemd/system/{self.unit}"
        if not self.files:
            self.files[self.vendor] = VENDOR_TEXT.format(rank=self.rank)
        self.reload()

    @property
    def dropin(self) -> str:
        return str(dropin_path(self.unit))

    def paths(self) -> list[str]:
        return [path for path in (self.vendor, self.dropin) if path in self.files]

    def disk_text(self) -> str:
        return "\n".join(f"# {path}\n{self.files[path]}" for path in self.paths())

    def reload(self) -> None:
        self.loaded = self.disk_text()

    def service(self) -> Any:
        return parse_unit(self.loaded)

    def exec_argv(self) -> list[list[str]]:
        return [command.argv for command in self.service().commands]

    def show(self, properties: list[str]) -> str:
        argv = self.exec_argv()
        exec_text = " ".join(
            f"{{ path={a[0]} ; argv[]={' '.join(a)} ; ignore_errors=no ; start_time=[n/a] ; "
            "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
            for a in argv
        )
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in self.service().env.items())
        values = {
            "ExecStart": exec_text,
            "LoadState": self.load_state,
            "ActiveState": self.active,
            "SubState": self.sub,
            "Result": self.result,
            "InvocationID": self.invocation if self.active != "inactive" else "",
            "ExecMainStartTimestamp": "Sun 2026-11-29 20:14:49.559217 UTC",
            "NRestarts": str(self.n_restarts),
            "NeedDaemonReload": "yes" if self.disk_text() != self.loaded else "no",
            "DropInPaths": self.dropin if f"# {self.dropin}\n" in self.loaded else "",
            "FragmentPath": self.vendor,
            "Environment": env,
        }
        return "".join(f"{name}={values.get(name, '')}\n" for name in properties)

    def start(self) -> tuple[int, str]:
        if self.result == "start-limit-hit":
            return (
                1,
                f"Job for {self.unit} failed.\nSee 'systemctl status': start request repeated too quickly.\n",
            )
        self.active, self.sub, self.result = "active", "running", "success"
        self.invocation = uuid.uuid4().hex
        self.starts += 1
        return 0, ""


@dataclass
class Gauge:
    """How many of something are open now, the most open at once, and how many were opened."""

    now: int = 0
    peak: int = 0
    opened: int = 0

    def up(self) -> None:
        self.now += 1
        self.opened += 1
        self.peak = max(self.peak, self.now)

    def down(self) -> None:
        self.now -= 1

    def restart(self) -> None:
        """Count from here: nothing opened yet, the peak what is open now."""
        self.opened, self.peak = 0, self.now


@dataclass
class SharedGauges:
    """SSH connections and channels over many fake nodes at once (a fleet's global peaks)."""

    connections: Gauge = field(default_factory=Gauge)
    channels: Gauge = field(default_factory=Gauge)


@dataclass
class FakeNode:
    """A fake host: an SSH server on 127.0.0.1 with one `FakeSystemd`."""

    systemd: FakeSystemd
    port: int = 0
    received: list[str] = field(default_factory=list)
    fail: dict[str, str] = field(default_factory=dict)
    fail_once: dict[str, str] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    signals: list[str] = field(default_factory=list)
    closed_while_hanging: int = 0
    server: Any = None
    logins: int = 0
    """SSH connections accepted (a pooled session logs in once for many commands)."""
    delay_s: float = 0.0
    """Every command takes at least this long (to see how many run at once)."""
    sglang_version: str | None = None
    """What `import sglang; print(sglang.__version__)` prints (None: SGLang is not importable)."""
    help_text: str | None = None
    """What `python -m sglang.launch_server --help` prints (None: SGLang is not importable)."""
    sudo_grants: list[str] | None = None
    """What `sudo -l -n` lists as granted (NOPASSWD, as root); None: the generated sudoers file's lines."""
    running: int = 0
    peak: int = 0
    """The most commands that ran at once on this node."""
    forwarding: bool = True
    """Whether the node accepts TCP forwards (sshd's `AllowTcpForwarding`, on by default)."""
    forwards: list[tuple[str, int]] = field(default_factory=list)
    """Every (host, port) a client asked the node to connect to (`direct-tcpip` channels)."""

    hooks: list[list[str]] = field(default_factory=list)
    """The argv of every drain hook command the node ran (`hook-command`), in order."""

    shared: SharedGauges | None = None
    """Counted also here, with the other nodes that share it (a fleet's global peaks)."""
    connected: int = 0
    """SSH connections open now."""
    encryption_algs: list[str] | None = None
    """The ciphers the node's sshd allows (sshd's `Ciphers`); None: asyncssh's defaults."""

    async def handle(self, process: Any) -> None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        if self.shared is not None:
            self.shared.channels.up()
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            await self._handle(process)
        finally:
            self.running -= 1
            if self.shared is not None:
                self.shared.channels.down()

    async def _handle(self, process: Any) -> None:
        command = process.command or ""
        self.received.append(command)
        try:
            match = identify(command, unit=self.systemd.unit)
            if match is None:
                process.stderr.write(b"fake node: not a table command\n")
                process.exit(127)
                return
            name, params = match
            if name in self.hang:
                await self._hang(process)
                return
            if name in self.fail or name in self.fail_once:
                process.stderr.write((self.fail.get(name) or self.fail_once.pop(name)).encode())
                process.exit(1)
                return
            stdin = await process.stdin.read() if name.startswith("write-") else b""
            status, out, err = self.run(name, params, stdin)
            process.stdout.write(out)
            process.stderr.write(err)
            process.exit(status)
        except (asyncssh.BreakReceived, asyncssh.SignalReceived, asyncssh.TerminalSizeChanged):
            process.exit(143)

    async def _hang(self, process: Any) -> None:
        """Run until the client sends a signal (recorded) or closes the channel."""
        signalled = asyncio.Event()
        session = process.channel._session
        original = session.signal_received

        def on_signal(name: str) -> None:
            self.signals.append(name)
            signalled.set()
            original(name)

        session.signal_received = on_signal
        waiters = [
            asyncio.ensure_future(signalled.wait()),
            asyncio.ensure_future(process.channel.wait_closed()),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if signalled.is_set():
            process.exit(143)
        else:
            self.closed_while_hanging += 1

    def run(self, name: str, params: dict[str, object], stdin: bytes) -> tuple[int, bytes, bytes]:
        node = self.systemd
        if name == "cat":
            return 0, node.disk_text().encode(), b""
        if name == "show":
            props = params["properties"]
            names = props.split(",") if isinstance(props, str) else list(props)  # type: ignore[call-overload]
            return 0, node.show(names).encode(), b""
        if name == "unit-property":
            service = node.service()
            if params["bus_property"] == "ExecStart":
                data: Any = [[a[0], a, False, 0, 0, 0, 0, 0, 0, 0] for a in node.exec_argv()]
                return 0, json.dumps({"type": "a(sasbttttuii)", "data": data}).encode(), b""
            if params["bus_property"] == "EnvironmentFiles":
                files = [[path, False] for path in node.environment_files]
                return 0, json.dumps({"type": "a(sb)", "data": files}).encode(), b""
            env = [f"{k}={v}" for k, v in service.env.items()]
            return 0, json.dumps({"type": "as", "data": env}).encode(), b""
        if name in ("read-dropin", "read-dropin-backup"):
            path = node.dropin if name == "read-dropin" else str(dropin_backup_path(node.unit))
            if path not in node.files:
                return 1, b"", f"cat: {path}: No such file or directory\n".encode()
            return 0, node.files[path].encode(), b""
        if name in ("write-dropin", "write-dropin-backup"):
            path = node.dropin if name == "write-dropin" else str(dropin_backup_path(node.unit))
            node.files[path] = stdin.decode()
            return 0, stdin, b""
        if name == "make-dropin-dir":
            return 0, b"", b""
        if name == "daemon-reload":
            node.reload()
            return 0, b"", b""
        if name == "stop":
            node.active, node.sub = "inactive", "dead"
            return 0, b"", b""
        if name in ("start", "restart"):
            status, err = node.start()
            return status, b"", err.encode()
        if name == "reset-failed":
            node.result, node.active = "success", "inactive"
            return 0, b"", b""
        if name == "read-env-file":
            text = node.environment_files.get(str(params["env_file"]))
            if text is None:
                return 1, b"", f"cat: {params['env_file']}: Permission denied\n".encode()
            return 0, text.encode(), b""
        if name in ("sglang-version", "sglang-help", "container-sglang-version", "container-sglang-help"):
            said = self.sglang_version if name.endswith("sglang-version") else self.help_text
            if said is None:
                return 1, b"", b"ModuleNotFoundError: No module named 'sglang'\n"
            return 0, (said.rstrip("\n") + "\n").encode(), b""
        if name == "sudo-list":
            grants = needed_commands(node.unit) if self.sudo_grants is None else self.sudo_grants
            listing = "User ops may run the following commands on fake:\n" + "".join(
                f"    (root) NOPASSWD: {grant}\n" for grant in grants
            )
            return 0, listing.encode(), b""
        if name == "hook-command":
            self.hooks.append(list(params["hook_argv"]))  # type: ignore[call-overload]  # a list parameter
            return 0, b"", b""
        if name.startswith("journal"):
            return 0, "".join(line + "\n" for line in node.journal).encode(), b""
        return 1, b"", f"fake node: {name} not modelled\n".encode()

    async def start(self, host_key: Any, client_public: Any) -> None:
        node = self

        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: Any) -> None:
                node.logins += 1
                node.connected += 1
                if node.shared is not None:
                    node.shared.connections.up()

            def connection_lost(self, exc: Exception | None) -> None:
                node.connected -= 1
                if node.shared is not None:
                    node.shared.connections.down()

            def begin_auth(self, username: str) -> bool:
                return True

            def connection_requested(
                self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
            ) -> bool:
                node.forwards.append((dest_host, dest_port))
                if not node.forwarding:  # as OpenSSH's sshd with `AllowTcpForwarding no`
                    raise asyncssh.ChannelOpenError(
                        asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "forwarding off"
                    )
                return True

        self.server = await asyncssh.create_server(
            Server,
            "127.0.0.1",
            0,
            server_host_keys=[host_key],
            authorized_client_keys=asyncssh.import_authorized_keys(client_public),
            process_factory=node.handle,
            encoding=None,
            **({"encryption_algs": self.encryption_algs} if self.encryption_algs is not None else {}),
        )
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@dataclass
class Keys:
    """A host key per fake node, one client key, and the known_hosts file naming them."""

    directory: Path
    client_key: Path
    client_public: str
    host_keys: list[Any]

    @classmethod
    def make(cls, directory: Path, nodes: int) -> Keys:
        client = asyncssh.generate_private_key("ssh-ed25519")
        client_key = directory / "client_ed25519"
        client.write_private_key(str(client_key))
        public = client.export_public_key().decode()
        hosts = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(nodes)]
        return cls(directory, client_key, public, hosts)

    def known_hosts(self, ports: list[int], *, path: Path | None = None) -> Path:
        target = path or self.directory / "known_hosts"
        lines = [
            f"[127.0.0.1]:{port} {key.export_public_key().decode().strip()}"
            for port, key in zip(ports, self.host_keys, strict=True)
        ]
        target.write_text("\n".join(lines) + "\n")
        return target
