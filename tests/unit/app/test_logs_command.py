"""`logs` (issue 22 item 5): the grammar's bounds, and the application function reading node 0's
latest journal lines only (a scripted node, no SSH), with the exact command and a node's error
said as such."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from bot.app import target_commands
from bot.app.target_commands import LogsRequest, logs_target
from bot.commands import CommandError, parse_command
from bot.target.errors import TargetError
from tests.unit.target.scripted_node import ScriptedNode, show_text

LINES = b"".join(f"2026-11-29T20:14:{s:02d}+0000 gpu0 python3[42]: line {s}\n".encode() for s in range(80))


@dataclass
class Session:
    nodes: list[Any]


def node(name: str, journal: bytes = LINES) -> ScriptedNode:
    return ScriptedNode(name, states=[(0, show_text(invocation="a" * 32))], streams={"journal": journal})


def sessions(monkeypatch: pytest.MonkeyPatch, nodes: list[Any]) -> None:
    @asynccontextmanager
    async def session(ctx: object, target: str) -> AsyncIterator[Session]:
        yield Session(nodes)

    monkeypatch.setattr(target_commands, "open_session", session)


def test_the_grammar_bounds_lines_and_since() -> None:
    assert LogsRequest.of(parse_command("logs")) == LogsRequest(None, 50)
    assert LogsRequest.of(parse_command("logs lines=200 since=30m")) == LogsRequest("-1800s", 200)
    for text, says in (("logs lines=5000", "at most 1000"), ("logs since=999d", "at most 366d")):
        with pytest.raises(CommandError, match=says):
            parse_command(text)
    assert parse_command("logs").tier == "read-only"


async def test_logs_reads_node_0_only_the_newest_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    other = node("n1", b"not read\n")
    sessions(monkeypatch, [node("n0"), other])
    answer = await logs_target(object(), "lab", LogsRequest("-1800s", 20))  # type: ignore[arg-type]
    [item] = answer.results
    assert item.result is not None and item.node == "n0"
    assert item.result.lines[0].endswith("line 60") and item.result.lines[-1].endswith("line 79")
    assert item.result.command.endswith("--since -1800s -n 20")
    assert answer.to_json()["results"][0]["title"] == "the unit's last 20 journal line(s) since -1800s on n0"
    assert not other.calls


async def test_a_node_that_cannot_be_read_is_said_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = ScriptedNode("n0", states=[], fail={"journal": TargetError("n0: cannot connect")})
    sessions(monkeypatch, [broken])
    answer = await logs_target(object(), "lab", LogsRequest(None, 50))  # type: ignore[arg-type]
    assert answer.to_json()["results"] == [{"node": "n0", "error": "n0: cannot connect"}]
