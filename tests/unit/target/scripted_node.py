"""A scripted stand-in for `NodeSession`: table commands answered from a timeline, no SSH.

Readiness, observe and grep decide from what a node says over time (unit states, journal lines,
`/health` codes); a script of `(seconds after start, answer)` pairs makes each decision
reproducible in milliseconds. Every command is rendered through the real table, so a test
also checks that the parameters are valid there.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.target.privileged import render_params

UNIT = "sglang-qwen.service"


def show_text(
    *,
    invocation: str,
    active: str = "active",
    sub: str = "running",
    result: str = "success",
    n_restarts: int = 0,
    status: int = 0,
    started: float = 1_764_430_000.0,
    code: int = 0,
    restart: str = "on-failure",
) -> str:
    """`systemctl show` of the properties readiness polls; `code` is `ExecMainCode` (0 while the
    main process runs, 1 exited, 2 killed, 3 dumped)."""
    return (
        f"ActiveState={active}\nSubState={sub}\nResult={result}\nInvocationID={invocation}\n"
        f"NRestarts={n_restarts}\nExecMainStatus={status}\nExecMainStartTimestamp=@{int(started)}\n"
        f"ExecMainCode={code}\nRestart={restart}\n"
    )


def journal_json(
    message: str | list[int] | None, *, invocation: str, systemd: bool = False, at: float = 0.0
) -> bytes:
    entry: dict[str, Any] = {
        "__REALTIME_TIMESTAMP": str(int((at or time.time()) * 1e6)),
        "__CURSOR": f"c-{at}",
    }
    entry["INVOCATION_ID" if systemd else "_SYSTEMD_INVOCATION_ID"] = invocation
    entry["MESSAGE"] = message
    entry["_PID"] = "1" if systemd else "42"
    return (json.dumps(entry) + "\n").encode()


@dataclass
class Result:
    command: str
    argv_shell: str
    exit_status: int
    stdout: bytes
    stderr: bytes = b""
    duration_s: float = 0.0


@dataclass
class ScriptedNode:
    """One node: `show` answers follow `states`, `journal-follow` streams `lines` as time passes."""

    name: str
    index: int = 0
    unit: str = UNIT
    states: list[tuple[float, str]] = field(default_factory=list)
    lines: list[tuple[float, bytes]] = field(default_factory=list)
    outputs: dict[str, bytes | Callable[[dict[str, object]], bytes]] = field(default_factory=dict)
    streams: dict[str, bytes | Callable[[dict[str, object]], bytes]] = field(default_factory=dict)
    fail: dict[str, BaseException] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _render(self, command: str, params: dict[str, object]) -> str:
        if "unit" in command_required(command):
            params = {"unit": self.unit, **params}
        shell = render_params(command, params, sudo=False).shell
        self.calls.append((command, shell))
        return shell

    async def run(
        self,
        command: str,
        /,
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        **params: object,
    ) -> Result:
        shell = self._render(command, dict(params))
        if command in self.fail:
            raise self.fail[command]
        if command == "show":
            due = [text for at, text in self.states if at <= self._now()]
            return Result(command, shell, 0, (due[-1] if due else self.states[0][1]).encode())
        output = self.outputs.get(command, b"")
        data = output(dict(params)) if callable(output) else output
        return Result(command, shell, 0, data)

    async def stream(self, command: str, /, **params: object) -> AsyncIterator[bytes]:
        self._render(command, dict(params))
        if command in self.fail:
            raise self.fail[command]
        if command == "journal-follow":
            for at, line in self.lines:
                delay = at - self._now()
                if delay > 0:
                    await asyncio.sleep(delay)
                yield line
            await asyncio.sleep(3600)  # a follower never ends on its own
            return
        output = self.streams.get(command, b"")
        data = output(dict(params)) if callable(output) else output
        for start in range(0, len(data), 7000):  # in chunks, as SSH delivers them
            yield data[start : start + 7000]


def command_required(command: str) -> frozenset[str]:
    from bot.target.privileged import COMMANDS

    return COMMANDS[command].required


def health_transport(
    timeline: list[tuple[float, int | None]], t0: float | None = None
) -> httpx.MockTransport:
    """`/health` codes over time (None: connection refused); `/server_info` from `info`."""
    start = time.monotonic() if t0 is None else t0

    def handler(request: httpx.Request) -> httpx.Response:
        now = time.monotonic() - start
        due = [code for at, code in timeline if at <= now]
        code = due[-1] if due else timeline[0][1]
        if code is None:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(code)

    return httpx.MockTransport(handler)


def failed_start_node(invocation: str, lines: list[str], state: str, *, started: float) -> ScriptedNode:
    """Node 0 after a failed start, as rollback's evidence reads it: `show` answers `state`, and
    the journal holds `lines` as the one start `invocation`, begun at `started` (Unix seconds)."""
    return ScriptedNode(
        "n0",
        states=[(0, state)],
        outputs={
            "journal-invocation": ("\n".join(lines) + "\n").encode(),
            "journal-starts": (
                json.dumps({"INVOCATION_ID": invocation, "__REALTIME_TIMESTAMP": str(int(started * 1e6))})
                + "\n"
            ).encode(),
        },
    )
