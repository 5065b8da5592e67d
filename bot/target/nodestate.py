"""What flagbot polls on a node while it waits: the unit's state, at a growing interval.

Shared by readiness (is the new start alive?), rollback (did systemd's start limit trip?) and
status. `NodeLike` is the part of `bot.target.ssh.NodeSession` these modules use, so unit tests
can pass a fake without an SSH server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

import httpx

from bot.target.main_exit import MainExit
from bot.target.unit import parse_show

SHOW = (
    "ActiveState",
    "SubState",
    "Result",
    "InvocationID",
    "NRestarts",
    "ExecMainStatus",
    "ExecMainCode",
    "Restart",
    "ExecMainStartTimestamp",
)


class CommandResultLike(Protocol):
    @property
    def exit_status(self) -> int: ...
    @property
    def stdout(self) -> bytes: ...
    @property
    def argv_shell(self) -> str: ...


class NodeLike(Protocol):
    """What readiness, observe, grep and rollback use of `bot.target.ssh.NodeSession`."""

    @property
    def name(self) -> str: ...
    @property
    def index(self) -> int: ...
    @property
    def unit(self) -> str: ...
    async def run(
        self,
        command: str,
        /,
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        **params: object,
    ) -> CommandResultLike: ...
    def stream(self, command: str, /, **params: object) -> AsyncIterator[bytes]: ...


class Backoff:
    """Poll intervals that start short and grow to a ceiling; `reset` after a change.

    The start is short because a change (503 -> 200) is what we wait for and the lag between it
    and our noticing is the figure that matters; the ceiling keeps a 15-minute model load from
    costing thousands of requests.
    """

    def __init__(self, initial: float = 0.05, factor: float = 1.5, maximum: float = 0.25) -> None:
        self.initial, self.factor, self.maximum = initial, factor, maximum
        self.current = initial

    def next(self) -> float:
        value = self.current
        self.current = min(self.maximum, self.current * self.factor)
        return value

    def reset(self) -> None:
        self.current = self.initial

    async def sleep(self) -> None:
        await asyncio.sleep(self.next())


@dataclass(frozen=True)
class NodeState:
    """One `systemctl show` of the unit on one node."""

    active: str
    sub: str
    result: str
    invocation: str | None
    n_restarts: int
    exit_status: int | None
    started: float | None
    """ExecMainStartTimestamp as Unix seconds (the host's clock)."""
    main_exit: MainExit | None = None
    """How the main process ended (`code=exited` / `code=killed`); None while it runs."""
    restart: str = ""
    """The unit's `Restart=` (`on-failure`, `on-abnormal`, `no`, ...)."""

    @classmethod
    def parse(cls, text: str) -> NodeState:
        raw = parse_show(text)
        restarts, status = raw.get("NRestarts", "0"), raw.get("ExecMainStatus", "")
        return cls(
            active=raw.get("ActiveState", ""),
            sub=raw.get("SubState", ""),
            result=raw.get("Result", ""),
            invocation=raw.get("InvocationID") or None,
            n_restarts=int(restarts) if restarts.isdigit() else 0,
            exit_status=int(status) if status.lstrip("-").isdigit() else None,
            started=_unix(raw.get("ExecMainStartTimestamp", "")),
            main_exit=MainExit.from_show(raw.get("ExecMainCode", ""), status),
            restart=raw.get("Restart", ""),
        )


def _unix(value: str) -> float | None:
    """`@1764430000` (`systemctl show --timestamp=unix`); empty or `n/a` when never started."""
    text = value.strip().removeprefix("@")
    try:
        return float(text) if text else None
    except ValueError:
        return None


async def node_state(node: NodeLike, *, timeout: float | None = None) -> NodeState:
    result = await node.run("show", properties=list(SHOW), timestamp="unix", timeout=timeout)
    return NodeState.parse(result.stdout.decode("utf-8", "replace"))


async def probe_health(client: httpx.AsyncClient, url: str) -> int | None:
    """`/health` status code; None when nothing listens (still loading) or it does not answer."""
    try:
        return (await client.get(url)).status_code
    except httpx.HTTPError:
        return None


def journal_since(started: float | None) -> str | None:
    """journalctl `--since` one second before `ExecMainStartTimestamp`, in the host's own clock."""
    return None if started is None else f"@{int(started) - 1}"
