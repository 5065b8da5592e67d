"""`Testbed`: boot, inspect and tear down the N nodes of one instance.

Instances are independent (own bridge, addresses, namespaces, cgroups and files), so the demo
(instance 1), a test session (201) and a benchmark (202) run side by side. Within an instance,
an exclusive lock file under the base dir serialises `up`/`down`: the process that booted the
nodes holds it until `down()` or its exit, so a second test session cannot tear down the first.
Nodes outlive the process that booted them (`flagbot twin up` returns); `state.json` records
what is running for `status` and `down` from another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

from bot.target.sudoers import missing_programs, validate_sudoers
from flagbot_lab.testbed import cgroups, cleanup, network, node, probe, rootexec
from flagbot_lab.testbed.config import twin_config_text, write_twin_config
from flagbot_lab.testbed.keys import ensure_client_key, write_known_hosts
from flagbot_lab.testbed.layout import (
    DEFAULT_BASE_DIR,
    DEFAULT_INSTANCE,
    HTTP_PORT,
    Layout,
    TestbedError,
    check_unit_layout,
    node_unit,
)
from flagbot_lab.testbed.system import pid_alive, unavailable_reason


def load_twin_installer() -> node.TwinInstaller:
    """`flagbot_lab.twin.install`, which copies the twin into a node tree and writes its unit."""
    try:
        module = importlib.import_module("flagbot_lab.twin.install")
    except ImportError as exc:
        raise TestbedError(f"the SGLang twin is not available (flagbot_lab.twin.install: {exc})") from None
    if not all(hasattr(module, name) for name in ("install_into", "unit_text")):
        raise TestbedError("flagbot_lab.twin.install lacks install_into() or unit_text()")
    return cast(node.TwinInstaller, module)


@dataclass(frozen=True)
class NodeStatus:
    index: int
    machine: str
    address: str
    running: bool
    processes: int


@dataclass(frozen=True)
class TestbedStatus:
    __test__ = False

    instance: int
    state: str
    """`down`, `booting`, `up`, or `broken` (state says up but a node is gone)."""
    scenario: str | None
    nodes: list[NodeStatus] = field(default_factory=list)
    base_url: str | None = None
    known_hosts: str | None = None
    config: str | None = None


@dataclass
class BootTimes:
    prepared: float = 0.0
    """All node trees mounted and filled, nspawn started."""
    sshd: float = 0.0
    """Every node's sshd answered with its banner."""


class Testbed:
    """The nodes of one instance. `with Testbed(...) as tb:` is `up()` ... `down()`."""

    __test__ = False

    def __init__(
        self,
        instance: int = DEFAULT_INSTANCE,
        base_dir: Path = DEFAULT_BASE_DIR,
        nodes: int = 2,
        scenario: str = "seed-gb10",
        *,
        config_path: Path | None = None,
        installer: node.TwinInstaller | None = None,
        boot_timeout: float = 30.0,
        unit_layout: str = "one-name",
    ) -> None:
        self.layout = Layout(instance, Path(base_dir).absolute(), nodes)
        self.scenario = scenario
        self.unit_layout = check_unit_layout(unit_layout)
        """How the nodes name their service (`layout.UNIT_LAYOUTS`): the twin's unit is
        installed under those names, the sudoers file and twin.toml follow them."""
        self.config_path = (config_path or self.layout.instance_dir / "twin.toml").absolute()
        self._installer = installer
        self.boot_timeout = boot_timeout
        self.times = BootTimes()
        self._locks: list[IO[str]] = []
        self._children: list[subprocess.Popen[bytes]] = []

    @classmethod
    def attach(cls, instance: int = DEFAULT_INSTANCE, base_dir: Path = DEFAULT_BASE_DIR) -> Testbed:
        """The instance as recorded in its state.json (node count, scenario), e.g. for `down`
        or `status` from another process than the one that booted it."""
        probe_bed = cls(instance, base_dir, 1)
        state = probe_bed._read_state()
        nodes = len(state.get("nodes", [])) or 1
        config = state.get("config")
        return cls(
            instance,
            base_dir,
            nodes,
            str(state.get("scenario") or "seed-gb10"),
            config_path=Path(config) if config else None,
            unit_layout=str(state.get("unit_layout") or "one-name"),
        )

    # --- convenience -------------------------------------------------------------------------

    @property
    def instance(self) -> int:
        return self.layout.instance

    @property
    def addresses(self) -> list[str]:
        return [self.layout.address(k) for k in range(self.layout.nodes)]

    @property
    def base_url(self) -> str:
        return self.layout.base_url

    def unit(self, k: int) -> str:
        """The service node k runs (its unit layout's name for it)."""
        return node_unit(self.unit_layout, k)

    @property
    def known_hosts(self) -> Path:
        return self.layout.known_hosts

    @property
    def client_key(self) -> Path:
        return self.layout.client_key

    def __enter__(self) -> Testbed:
        self.up()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    # --- locking and state ---------------------------------------------------------------------

    def _acquire(self) -> None:
        """Lock the instance: in the base dir, and across base dirs under /run."""
        if self._locks:
            return
        for path in (self.layout.global_lock_file, self.layout.lock_file):
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = path.open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                self._release()
                raise TestbedError(
                    f"testbed instance {self.instance} is in use by pid {holder} (lock {path}); "
                    "use another --instance"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            self._locks.append(handle)

    def _release(self) -> None:
        for handle in reversed(self._locks):
            with contextlib.suppress(OSError):
                handle.truncate(0)
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        self._locks.clear()

    def _read_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.layout.state_file.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_state(self, state: dict[str, Any]) -> None:
        self.layout.instance_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.layout.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.layout.state_file)

    # --- lifecycle -----------------------------------------------------------------------------

    def up(self, *, replace: bool = False) -> BootTimes:
        """Boot the nodes and return once every sshd answers (the twin may still be loading).

        Leftovers of a crashed run of this instance are cleaned first. A running instance is
        refused unless `replace` (the test fixture replaces its own instance after a crash).
        Any failure tears down what was started, then raises `TestbedError`.
        """
        reason = unavailable_reason()
        if reason:
            raise TestbedError(reason)
        self._acquire()
        recorded = self.status().state
        foreign = recorded == "down" and bool(cgroups.pids(self.layout.cgroup))
        if (recorded == "up" or foreign) and not replace:
            self._release()
            where = " from another base dir" if foreign else ""
            raise TestbedError(
                f"testbed instance {self.instance} is already up{where}; `flagbot twin down "
                f"--instance {self.instance}` first (or `flagbot twin status`)"
            )
        try:
            cleanup.teardown(self.instance, self.layout.instance_dir)
            self._boot()
        except BaseException:
            with contextlib.suppress(TestbedError):
                cleanup.teardown(self.instance, self.layout.instance_dir)
            self._write_state({"instance": self.instance, "state": "down"})
            self._release()
            raise
        return self.times

    def _boot(self) -> None:
        start = time.monotonic()
        layout = self.layout
        network.require_free(layout)
        installer = self._installer or load_twin_installer()
        sudoers = [node.node_sudoers(self.unit(k)) for k in range(layout.nodes)]
        for text in set(sudoers):
            validate_sudoers(text)
        missing = missing_programs()
        if missing:
            raise TestbedError(f"programs named in the sudoers file are missing: {', '.join(missing)}")
        client_pub = ensure_client_key(layout.client_key)
        layout.instance_dir.mkdir(parents=True, exist_ok=True)
        state: dict[str, Any] = {
            "instance": self.instance,
            "state": "booting",
            "scenario": self.scenario,
            "unit_layout": self.unit_layout,
            "nodes": [],
            "base_url": layout.base_url,
            "known_hosts": str(layout.known_hosts),
            "config": str(self.config_path),
        }
        self._write_state(state)
        network.ensure_bridge(layout)
        host_keys = []
        for k in range(layout.nodes):
            layout.node_dir(k).mkdir(parents=True, exist_ok=True)
            network.add_node(layout, k)
            host_keys.append(
                node.prepare(
                    layout,
                    k,
                    client_pub=client_pub,
                    sudoers=sudoers[k],
                    installer=installer,
                    scenario=self.scenario,
                    unit_layout=self.unit_layout,
                )
            )
            root_stat = os.stat(layout.root(k))
            child = node.start(layout, k)
            self._children.append(child)
            state["nodes"].append(
                {
                    "index": k,
                    "machine": layout.netns(k),
                    "address": layout.address(k),
                    "nspawn_pid": child.pid,
                    "nspawn_lock": f"/run/systemd/nspawn/locks/inode-{root_stat.st_dev}:{root_stat.st_ino}",
                }
            )
            self._write_state(state)
        write_known_hosts(layout.known_hosts, list(zip(self.addresses, host_keys, strict=True)))
        text = twin_config_text(
            layout,
            key_path=layout.client_key,
            known_hosts=layout.known_hosts,
            scenario=self.scenario,
            unit_layout=self.unit_layout,
        )
        write_twin_config(self.config_path, text)
        self.times.prepared = time.monotonic() - start
        probe.wait_for_banners(self.addresses, timeout=self.boot_timeout)
        self.times.sshd = time.monotonic() - start
        state["state"] = "up"
        self._write_state(state)

    def down(self) -> None:
        """Stop every node and remove everything of this instance; idempotent."""
        reason = unavailable_reason()
        if reason:
            raise TestbedError(reason)
        self._acquire()
        try:
            cleanup.teardown(self.instance, self.layout.instance_dir)
            for child in self._children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=1)
            self._children.clear()
            self._write_state({"instance": self.instance, "state": "down"})
        finally:
            self._release()

    def status(self) -> TestbedStatus:
        """What runs, from state.json and the node cgroups (no network traffic)."""
        state = self._read_state()
        recorded = state.get("state", "down")
        nodes = []
        for entry in state.get("nodes", []) if recorded != "down" else []:
            k = int(entry["index"])
            processes = len(cgroups.pids(self.layout.node_cgroup(k)))
            running = pid_alive(int(entry["nspawn_pid"])) and processes > 0
            nodes.append(NodeStatus(k, str(entry["machine"]), str(entry["address"]), running, processes))
        if recorded == "up" and not all(n.running for n in nodes):
            recorded = "broken"
        return TestbedStatus(
            instance=self.instance,
            state=recorded,
            scenario=state.get("scenario"),
            nodes=nodes,
            base_url=state.get("base_url"),
            known_hosts=state.get("known_hosts"),
            config=state.get("config"),
        )

    def wait_healthy(self, timeout: float = 60.0) -> float:
        """Poll node 0's `/health` until 200; return the seconds waited."""
        return probe.wait_for_health(f"{self.base_url}/health", timeout=timeout)

    # --- fault injection for tests ----------------------------------------------------------

    def set_link(self, k: int, up: bool) -> None:
        """Unplug (or replug) node k: its bridge port goes down, packets to it are dropped."""
        network.set_link(self.layout, k, up)

    def set_frozen(self, k: int, frozen: bool) -> None:
        """Freeze (or thaw) every process of node k, as a hung host."""
        cgroups.set_frozen(self.layout.node_cgroup(k), frozen)

    def run_as_root(
        self, k: int, argv: Sequence[str], *, timeout: float = 60.0, input: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` (a list, no shell) as root inside node k, as an operator with a root shell
        would: `nsenter` into its init's namespaces, not ops' sudo (which grants flagbot's table)."""
        if not 0 <= k < self.layout.nodes:
            raise TestbedError(f"no node {k}: the instance has {self.layout.nodes}")
        entries = {int(e["index"]): e for e in self._read_state().get("nodes", [])}
        if k not in entries:
            raise TestbedError(f"node {k} of instance {self.instance} is not up")
        pid = rootexec.init_pid(
            cgroups.pids(self.layout.node_cgroup(k)), nspawn_pid=int(entries[k]["nspawn_pid"])
        )
        return rootexec.run_in(pid, argv, timeout=timeout, input=input)

    # --- async wrappers ------------------------------------------------------------------------

    async def run_as_root_async(
        self, k: int, argv: Sequence[str], *, timeout: float = 60.0, input: str = ""
    ) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(self.run_as_root, k, argv, timeout=timeout, input=input)

    async def up_async(self, *, replace: bool = False) -> BootTimes:
        return await asyncio.to_thread(self.up, replace=replace)

    async def down_async(self) -> None:
        await asyncio.to_thread(self.down)

    async def wait_healthy_async(self, timeout: float = 60.0) -> float:
        return await asyncio.to_thread(self.wait_healthy, timeout)

    async def unit_states(self) -> list[probe.UnitState]:
        """`systemctl show` of the unit on every node, over SSH as ops (for `twin status`)."""
        return list(
            await asyncio.gather(
                *(
                    probe.unit_state(
                        address, key=self.client_key, known_hosts=self.known_hosts, unit=self.unit(k)
                    )
                    for k, address in enumerate(self.addresses)
                )
            )
        )

    def health_codes(self) -> list[int | None]:
        return [probe.health_code(f"http://{address}:{HTTP_PORT}/health") for address in self.addresses]


def status_dict(status: TestbedStatus) -> dict[str, Any]:
    return asdict(status)


def leftovers(instance: int) -> list[str]:
    """Everything of `instance` still on the host (empty after a clean `down()`)."""
    return cleanup.leftovers(instance)
