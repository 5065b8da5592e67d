"""`flagbot config check --connect`: can flagbot work with each target as configured, node by node?

Why a check of its own: `config check` validates the file, but a config that names a missing
key, a known_hosts without the node, a login without its sudoers lines or a unit of another name
passes it, and the first experiment then fails with a message about something else. Each check
here is one line naming its cause (a cause that makes later checks pointless skips them rather
than failing them too); nothing is written on a node (reads only: the SSH login, `sudo -l -n`,
`systemctl show`/`cat` and the unit's ExecStart over D-Bus, SGLang's version and `--help`
through the unit's interpreter) and nothing is stored but the flag-list cache the commands use
anyway.

Checks per target: the key file and the known_hosts file (on the bot host, before any
connection); per node: known_hosts has the node, the login (host key verified), the sudoers
lines flagbot needs (`bot.target.sudoers.missing_grants` against `sudo -l -n`), the unit (loaded
by systemd, its ExecStart an SGLang launch: `bot.target.unit.read_unit`); for node 0: SGLang's
version and where the flag list commands get came from (`bot.app.flag_list`: node 0's `--help`,
its cache, or the packaged list), and the HTTP endpoint: which way it is reached (`http_via`:
direct, or through an SSH forward on node 0, `bot.target.http_route`), then `/health` and
`/server_info` that way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from bot.app.flag_list import target_list_now
from bot.config import Settings
from bot.config.schema import Target
from bot.http import async_client
from bot.sglang.launch_shell import LaunchParseError
from bot.target.errors import CommandFailed, TargetError
from bot.target.session import TargetSession
from bot.target.ssh import NodeSession
from bot.target.ssh_files import (
    key_file_problem,
    key_permissions_problem,
    known_hosts_entry_problem,
    known_hosts_problem,
)
from bot.target.sudoers import missing_grants
from bot.target.unit import UnitReadError, parse_show, read_unit

__all__ = ["ConnectCheck", "connect_checks", "failed"]

Status = Literal["ok", "warn", "fail", "skip"]
TARGET_WIDE = "-"
"""The node column of a check that is the target's, not one node's (its files, its flag list)."""


@dataclass(frozen=True)
class ConnectCheck:
    """One line of `config check --connect`: `fail: lab 10.0.0.2 login: <why>`."""

    target: str
    node: str
    check: str
    status: Status
    text: str

    def render(self) -> str:
        where = self.target if self.node == TARGET_WIDE else f"{self.target} {self.node}"
        return f"{self.status}: {where} {self.check}: {self.text}"

    def to_json(self) -> dict[str, str]:
        return {
            "target": self.target,
            "node": self.node,
            "check": self.check,
            "status": self.status,
            "text": self.text,
        }


def failed(checks: list[ConnectCheck]) -> bool:
    return any(check.status == "fail" for check in checks)


def _said(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _local_files(name: str, target: Target) -> tuple[list[ConnectCheck], bool]:
    """The key and known_hosts lines, and whether a login can be tried with them."""
    ssh = target.ssh
    key, known = ssh.key_path.expanduser(), ssh.known_hosts.expanduser()
    lines: list[ConnectCheck] = []
    problem = key_file_problem(key)
    if problem is None:
        loose = key_permissions_problem(key)
        if loose is None:
            lines.append(ConnectCheck(name, TARGET_WIDE, "key", "ok", f"ssh.key_path {key} loads"))
        else:
            lines.append(ConnectCheck(name, TARGET_WIDE, "key", "warn", f"ssh.key_path {key} {loose}"))
    else:
        lines.append(ConnectCheck(name, TARGET_WIDE, "key", "fail", f"ssh.key_path {key} {problem}"))
    known_problem = known_hosts_problem(known)
    if known_problem is None:
        lines.append(ConnectCheck(name, TARGET_WIDE, "known_hosts", "ok", f"ssh.known_hosts {known} reads"))
    else:
        lines.append(
            ConnectCheck(name, TARGET_WIDE, "known_hosts", "fail", f"ssh.known_hosts {known} {known_problem}")
        )
    return lines, problem is None and known_problem is None


async def _node(
    name: str, target: Target, node: NodeSession, files_ok: bool, timeout_s: float
) -> list[ConnectCheck]:
    where = node.name
    if not files_ok:
        return [ConnectCheck(name, where, "login", "skip", "not tried: the local file above is unusable")]
    entry = known_hosts_entry_problem(node.known_hosts, node.host, node.port)
    if entry is not None:  # one cause, one line: the login would only fail on the same missing entry
        return [
            ConnectCheck(name, where, "known_hosts", "fail", f"{node.known_hosts} {entry}"),
            ConnectCheck(name, where, "login", "skip", "not tried: known_hosts has no entry for this node"),
        ]
    try:
        await asyncio.wait_for(node.connection(), timeout_s)
    except (TargetError, TimeoutError, OSError) as exc:
        return [ConnectCheck(name, where, "login", "fail", _said(exc))]
    return [
        ConnectCheck(name, where, "login", "ok", f"{node.username}@{where}, host key verified"),
        await _sudoers(name, target, node, timeout_s),
        await _unit(name, node, timeout_s),
    ]


async def _sudoers(name: str, target: Target, node: NodeSession, timeout_s: float) -> ConnectCheck:
    where = node.name
    if not target.ssh.sudo:
        return ConnectCheck(
            name, where, "sudoers", "skip", "ssh.sudo is off: commands run as the login itself"
        )
    try:
        result = await node.run("sudo-list", check=False, timeout=timeout_s)
    except TargetError as exc:
        return ConnectCheck(name, where, "sudoers", "fail", f"`sudo -l -n` did not run: {_said(exc)}")
    listing = result.stdout.decode("utf-8", "replace")
    missing = missing_grants(listing, node.unit)
    fix = f"install `flagbot sudoers target={name} node={node.index}` on it as /etc/sudoers.d/flagbot"
    if result.exit_status != 0 and missing:
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()
        why = said[0] if said else f"exit {result.exit_status}"
        return ConnectCheck(
            name, where, "sudoers", "fail", f"`sudo -l -n` as {node.username} refused ({why}); {fix}"
        )
    if missing:
        return ConnectCheck(
            name,
            where,
            "sudoers",
            "fail",
            f"{len(missing)} sudoers line(s) missing: {'; '.join(missing)}; {fix}",
        )
    return ConnectCheck(name, where, "sudoers", "ok", f"every privileged command for {node.unit} is granted")


async def _unit(name: str, node: NodeSession, timeout_s: float) -> ConnectCheck:
    """The unit exists and systemd has it loaded, and its ExecStart is an SGLang launch flagbot
    can edit (`read_unit`, what every command reads first): a wrong `unit =` or a launch hidden in
    a script is said here, not by the first `try`."""
    where, unit = node.name, node.unit
    try:
        shown = await node.run("show", properties=["LoadState"], check=False, timeout=timeout_s)
    except TargetError as exc:
        return ConnectCheck(name, where, "unit", "fail", f"`systemctl show {unit}` did not run: {_said(exc)}")
    load_state = parse_show(shown.text).get("LoadState", "")
    if load_state == "not-found":
        return ConnectCheck(
            name, where, "unit", "fail", f"{unit} does not exist on this node (systemd: LoadState=not-found)"
        )
    if load_state and load_state != "loaded":
        return ConnectCheck(
            name, where, "unit", "fail", f"{unit} is not loaded by systemd (LoadState={load_state})"
        )
    try:
        view = await asyncio.wait_for(read_unit(node), timeout_s)
    except CommandFailed as exc:
        said = (exc.result.stderr or exc.result.stdout).decode("utf-8", "replace").strip().splitlines()
        why = said[0] if said else f"exit {exc.result.exit_status}"
        return ConnectCheck(name, where, "unit", "fail", f"`{exc.result.argv_shell}` failed: {why}")
    except (LaunchParseError, UnitReadError) as exc:
        return ConnectCheck(name, where, "unit", "fail", f"ExecStart is not an SGLang launch: {_said(exc)}")
    except (TargetError, TimeoutError) as exc:
        return ConnectCheck(name, where, "unit", "fail", f"{unit} could not be read: {_said(exc)}")
    launch = view.launch
    runs = f"`{launch.entrypoint}`" + (" in a container" if launch.kind == "docker" else "")
    return ConnectCheck(
        name,
        where,
        "unit",
        "ok",
        f"{unit} loaded ({view.state.active_state}/{view.state.sub_state}); ExecStart launches SGLang "
        f"({runs}, {len(launch.flags.items)} flags)",
    )


async def _flag_list(settings: Settings, name: str, cache_dir: Path | None) -> ConnectCheck:
    found = await target_list_now(settings, name, cache_dir=cache_dir)
    if not found.host:  # the version shown would be the packaged list's, not the node's
        return ConnectCheck(name, TARGET_WIDE, "sglang", "warn", f"flags checked against the {found.note}")
    origin = "node 0's --help" if found.origin == "node --help" else "the cache of node 0's --help"
    return ConnectCheck(
        name,
        TARGET_WIDE,
        "sglang",
        "ok",
        f"SGLang {found.catalog.version}; flag list from {origin} ({found.note})",
    )


async def _get(
    name: str, check: str, url: str, client: httpx.AsyncClient, *, sent_to: str | None = None
) -> tuple[ConnectCheck, bool]:
    """The check's line about `url`, and whether anything answered at all (the request goes to
    `sent_to` when given: the local end of the SSH forward, which the operator never configured)."""
    try:
        response = await client.get(sent_to or url)
    except httpx.HTTPError as exc:
        return ConnectCheck(name, TARGET_WIDE, check, "fail", f"{url} did not answer: {_said(exc)}"), False
    if response.status_code != 200:
        return ConnectCheck(name, TARGET_WIDE, check, "fail", f"{url} answered {response.status_code}"), True
    return ConnectCheck(name, TARGET_WIDE, check, "ok", f"{url} answered 200"), True


async def _http_route(name: str, ts: TargetSession, logged_in: bool) -> tuple[ConnectCheck, str | None]:
    """Which way the HTTP endpoint is reached (`bot.target.http_route`), and the base URL to read."""
    if not logged_in:  # no SSH forward without a login; the server may still answer directly
        if ts.target.http_via == "ssh":
            return ConnectCheck(name, TARGET_WIDE, "http_via", "skip", "not tried: no login on node 0"), None
        text = "direct only: no login on node 0, so no SSH forward was tried"
        return ConnectCheck(name, TARGET_WIDE, "http_via", "skip", text), ts.http.configured.base_url
    try:
        route = await ts.http_route()
    except TargetError as exc:
        return ConnectCheck(name, TARGET_WIDE, "http_via", "fail", str(exc)), None
    return ConnectCheck(name, TARGET_WIDE, "http_via", "ok", route.described), route.base_url


async def _http(name: str, target: Target, base_url: str, client: httpx.AsyncClient) -> list[ConnectCheck]:
    """`/health` (readiness) and `/server_info` (the effective capacity every verdict reads),
    requested at `base_url` (the route's), named by the configured URL."""
    shown, sent = target.http_base().rstrip("/"), base_url.rstrip("/")
    health, answered = await _get(name, "http", f"{shown}/health", client, sent_to=f"{sent}/health")
    if not answered:  # one cause, one line: nothing listens there
        skipped = ConnectCheck(name, TARGET_WIDE, "server_info", "skip", "not tried: /health did not answer")
        return [health, skipped]
    info, _answered = await _get(
        name, "server_info", f"{shown}/server_info", client, sent_to=f"{sent}/server_info"
    )
    return [health, info]


async def _target(
    settings: Settings, name: str, client: httpx.AsyncClient, timeout_s: float, cache_dir: Path | None
) -> list[ConnectCheck]:
    target = settings.targets[name]
    lines, files_ok = _local_files(name, target)
    async with TargetSession.open(name, target) as ts:
        per_node = await asyncio.gather(
            *(_node(name, target, node, files_ok, timeout_s) for node in ts.nodes)
        )
        for found in per_node:
            lines.extend(found)
        lines.append(await _flag_list(settings, name, cache_dir))
        logged_in = any(line.check == "login" and line.status == "ok" for line in per_node[0])
        route_line, base_url = await _http_route(name, ts, logged_in)
        lines.append(route_line)
        if base_url is not None:  # the forward closes with the session: read through it inside
            lines.extend(await _http(name, target, base_url, client))
    return lines


async def connect_checks(
    settings: Settings, *, timeout_s: float = 15.0, cache_dir: Path | None = None
) -> list[ConnectCheck]:
    """Every check of every configured target (targets at once, their nodes at once), in config order."""
    async with async_client(timeout=timeout_s) as client:
        found = await asyncio.gather(
            *(_target(settings, name, client, timeout_s, cache_dir) for name in settings.targets)
        )
    return [line for lines in found for line in lines]
