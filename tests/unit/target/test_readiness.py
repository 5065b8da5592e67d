"""Readiness decisions from scripted nodes: ready (both signals), failures of every kind, timeout,
and connections lost during the wait (the follower resumes, `show` is polled again)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from bot.target.errors import ConnectionLostError, UnreachableError
from bot.target.journal_follow import RESUMES_IN_A_ROW
from bot.target.readiness import Backoff, NodeState, journal_since, wait_ready
from tests.unit.target.scripted_node import ScriptedNode, health_transport, journal_json, show_text

OLD, NEW, NEXT = "a" * 32, "b" * 32, "c" * 32
READY = "[2026-11-29 20:14:47] The server is fired up and ready to roll!"
BASE = "http://node0:30000"


def nodes(*, states0: list[tuple[float, str]], lines: list[tuple[float, bytes]] = (), states1=None):  # type: ignore[no-untyped-def]
    node0 = ScriptedNode("n0", 0, states=states0, lines=list(lines))
    node1 = ScriptedNode("n1", 1, states=states1 or [(0, show_text(invocation="d" * 32))])
    return [node0, node1]


async def run(ns, health, *, timeout=5.0, previous=None, **kw):  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(transport=health_transport(health)) as client:
        return await wait_ready(
            ns,
            base_url=BASE,
            timeout=timeout,
            previous=previous if previous is not None else {"n0": OLD, "n1": "e" * 32},
            client=client,
            **kw,
        )


async def test_ready_records_both_signals_and_the_phases() -> None:
    ns = nodes(
        states0=[(0, show_text(invocation=NEW))],
        lines=[
            (0.05, journal_json("server_args=ServerArgs(tp_size=2)", invocation=NEW)),
            (0.35, journal_json(READY, invocation=NEW)),
        ],
    )
    seen: list[tuple[str, str]] = []
    result = await run(ns, [(0, None), (0.15, 503), (0.3, 200)], on_progress=lambda p, d: seen.append((p, d)))
    assert result.outcome == "ready" and result.ready
    assert result.invocation == NEW
    assert result.health_ready_at is not None and result.ready_line_at is not None
    assert list(result.phases) == ["loading", "warming", "ready"]
    assert result.timings["total_s"] == pytest.approx(0.3, abs=0.2)
    assert "warming_s" in result.timings and "loading_s" in result.timings
    assert ("warming", "/health 503 (warming up)") in seen
    assert any(d == "journal: server_args" for _, d in seen)


async def test_the_ready_line_alone_is_enough() -> None:
    ns = nodes(states0=[(0, show_text(invocation=NEW))], lines=[(0.1, journal_json(READY, invocation=NEW))])
    result = await run(ns, [(0, 503)], confirm_s=0.2)
    assert result.outcome == "ready"
    assert result.ready_line_at is not None and result.health_ready_at is None


async def test_a_200_before_the_new_invocation_exists_is_not_ready() -> None:
    ns = nodes(states0=[(0, show_text(invocation=OLD)), (0.4, show_text(invocation=NEW))])
    started = time.monotonic()
    result = await run(ns, [(0, 200)], confirm_s=0.05)
    assert result.outcome == "ready" and result.invocation == NEW
    assert time.monotonic() - started >= 0.35


async def test_a_fatal_line_fails_at_once_with_the_line() -> None:
    fatal = "sglang serve: error: unrecognized arguments: --bogus"
    ns = nodes(states0=[(0, show_text(invocation=NEW))], lines=[(0.1, journal_json(fatal, invocation=NEW))])
    result = await run(ns, [(0, None)])
    assert result.outcome == "failed" and result.failure is not None
    assert result.failure.reason == "fatal-line"
    assert result.failure.fatal_line == fatal
    assert result.failure.invocation == NEW


async def test_lines_of_the_old_invocation_do_not_count() -> None:
    fatal = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    ns = nodes(
        states0=[(0, show_text(invocation=NEW))],
        lines=[(0.05, journal_json(fatal, invocation=OLD)), (0.2, journal_json(READY, invocation=NEW))],
    )
    result = await run(ns, [(0, None)], confirm_s=0.05)
    assert result.outcome == "ready"


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (
            show_text(invocation=NEW, active="activating", sub="auto-restart", result="exit-code", status=2),
            "crash-loop",
        ),
        (show_text(invocation=NEW, active="failed", sub="failed", result="start-limit-hit"), "start-limit"),
        (
            show_text(invocation=NEW, active="failed", sub="failed", result="exit-code", status=1),
            "unit-failed",
        ),
        (show_text(invocation=NEW, n_restarts=3), "crash-loop"),
    ],
)
async def test_unit_failures_are_detected(state: str, reason: str) -> None:
    ns = nodes(states0=[(0, show_text(invocation=NEW, n_restarts=2)), (0.1, state)])
    result = await run(ns, [(0, None)])
    assert result.outcome == "failed" and result.failure is not None
    assert result.failure.reason == reason
    assert result.failure.node == "n0"


async def test_a_crash_loop_on_node_1_fails_the_target() -> None:
    ns = nodes(
        states0=[(0, show_text(invocation=NEW))],
        states1=[
            (0, show_text(invocation=NEXT)),
            (0.1, show_text(invocation=NEXT, active="activating", sub="auto-restart", status=1)),
        ],
    )
    result = await run(ns, [(0, None)])
    assert result.failure is not None and result.failure.node == "n1"
    assert result.failure.exit_status == 1


async def test_an_unreachable_node_fails_with_its_name() -> None:
    ns = nodes(states0=[(0, show_text(invocation=NEW))])
    ns[1].fail["show"] = UnreachableError("n1", "No route to host")
    result = await run(ns, [(0, None)])
    assert result.failure is not None and result.failure.reason == "unreachable"
    assert "No route to host" in result.failure.message


async def test_timeout_is_an_outcome_not_an_exception() -> None:
    ns = nodes(states0=[(0, show_text(invocation=NEW))])
    started = time.monotonic()
    result = await run(ns, [(0, 503)], timeout=0.4)
    assert result.outcome == "timeout"
    assert result.failure is not None and result.failure.reason == "timeout"
    assert time.monotonic() - started >= 0.4  # it waited its timeout (an upper bound would be the load's)


async def test_the_follower_starts_at_the_new_invocation_on_the_host_clock() -> None:
    ns = nodes(
        states0=[(0, show_text(invocation=NEW, started=1_764_430_000.7))],
        lines=[(0.05, journal_json(READY, invocation=NEW))],
    )
    await run(ns, [(0, 200)], confirm_s=0.05)
    follow = [shell for name, shell in ns[0].calls if name == "journal-follow"]
    assert follow == [
        "journalctl -u sglang-qwen.service --follow --no-pager -o json --all --since @1764429999"
    ]
    assert journal_since(None) is None


def test_backoff_grows_to_its_ceiling_and_resets() -> None:
    backoff = Backoff(0.05, 2.0, 0.25)
    assert [backoff.next() for _ in range(5)] == [0.05, 0.1, 0.2, 0.25, 0.25]
    backoff.reset()
    assert backoff.next() == 0.05


def test_node_state_parses_systemd_show() -> None:
    state = NodeState.parse(show_text(invocation=NEW, n_restarts=4, status=2, started=1.0) + "Junk\n")
    assert (state.invocation, state.n_restarts, state.exit_status, state.started) == (NEW, 4, 2, 1.0)
    empty = NodeState.parse("ExecMainStartTimestamp=\nNRestarts=x\n")
    assert (empty.invocation, empty.n_restarts, empty.started) == (None, 0, None)


async def test_restarts_exhausted_without_start_limit_result_is_read_from_the_journal() -> None:
    """systemd 252 keeps `Result=exit-code` when the automatic restart is the start it refuses."""
    failed = show_text(
        invocation=NEW, active="failed", sub="failed", result="exit-code", n_restarts=3, status=2
    )
    ns = nodes(states0=[(0, failed)])
    ns[0].streams["journal-grep"] = (
        b"2026-11-29T20:32:52.423416+0000 gpu0 systemd[1]: sglang-qwen.service: Start request repeated too quickly.\n"
    )
    result = await run(ns, [(0, None)], previous={})
    assert result.failure is not None and result.failure.reason == "start-limit"
    grep_call = next(shell for name, shell in ns[0].calls if name == "journal-grep")
    assert grep_call.endswith("--grep 'Start request repeated too quickly' --since @1764429999")


# --- a connection lost during the wait (the host still up) ---------------------------------------


@dataclass
class LosingNode(ScriptedNode):
    """A scripted node whose connection is lost: `follows[k]` are the lines the k-th
    `journal-follow` streams before it loses its connection (the last one follows for ever);
    the first `show_losses` polls of `show` lose theirs."""

    follows: list[list[bytes]] = field(default_factory=list)
    show_losses: int = 0
    follow_params: list[dict[str, object]] = field(default_factory=list)

    async def run(self, command: str, /, **kwargs: Any) -> Any:
        if command == "show" and self.show_losses > 0:
            self.show_losses -= 1
            raise ConnectionLostError(self.name, "systemctl show ...", "Connection lost")
        return await super().run(command, **kwargs)

    async def stream(self, command: str, /, **params: object) -> AsyncIterator[bytes]:
        assert command == "journal-follow"
        self._render(command, dict(params))
        self.follow_params.append(dict(params))
        k = len(self.follow_params) - 1
        for line in self.follows[k]:
            await asyncio.sleep(0.02)
            yield line
        if k < len(self.follows) - 1:
            raise ConnectionLostError(self.name, "journalctl ... --follow", "Connection lost")
        await asyncio.sleep(3600)


def entry(message: str, at: float, cursor: str) -> bytes:
    doc = {"__REALTIME_TIMESTAMP": str(int(at * 1e6)), "__CURSOR": cursor, "MESSAGE": message}
    return (json.dumps({**doc, "_SYSTEMD_INVOCATION_ID": NEW, "_PID": "42"}) + "\n").encode()


async def test_the_follower_resumes_after_a_lost_connection_without_losing_or_repeating_lines() -> None:
    args = entry("server_args=ServerArgs(tp_size=2)", 1_764_430_001.25, "s1")
    weights = entry("Load weight end. mem usage=10.00 GB", 1_764_430_001.75, "s2")
    ready = entry(READY, 1_764_430_002.5, "s3")
    node0 = LosingNode(
        "n0", 0, states=[(0, show_text(invocation=NEW))], follows=[[args], [args, weights, ready]]
    )
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    result = await run([node0, node1], [(0, None)], confirm_s=0.3)
    assert result.outcome == "ready" and result.ready_line_at == pytest.approx(1_764_430_002.5)
    assert [e.cursor for e in result.lines] == ["s1", "s2", "s3"]  # s1 streamed twice, counted once
    assert node0.follow_params[1]["since"] == "@1764430000" and "lines" not in node0.follow_params[1]
    [note] = result.reconnects
    assert note.startswith(
        "journal follow on n0 lost its connection (Connection lost); resumed from @1764430000"
    )
    assert result.to_json()["reconnects"] == [note]


async def test_a_fatal_line_after_the_loss_is_still_caught() -> None:
    fatal = "sglang serve: error: unrecognized arguments: --bogus"
    args = entry("server_args=ServerArgs(tp_size=2)", 1_764_430_001.25, "s1")
    node0 = LosingNode(
        "n0",
        0,
        states=[(0, show_text(invocation=NEW))],
        follows=[[args], [], [entry(fatal, 1_764_430_003.0, "s2")]],
    )
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    result = await run([node0, node1], [(0, None)])
    assert result.failure is not None and result.failure.reason == "fatal-line"
    assert result.failure.fatal_line == fatal and len(result.reconnects) == 2


async def test_show_losing_its_connection_a_few_times_is_not_unreachable() -> None:
    node0 = LosingNode("n0", 0, states=[(0, show_text(invocation=NEW))], follows=[[entry(READY, 1.0, "r")]])
    node0.show_losses = RESUMES_IN_A_ROW
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    result = await run([node0, node1], [(0, 200)], confirm_s=0.3)
    assert result.outcome == "ready" and result.failure is None


async def test_show_losing_its_connection_every_time_is_unreachable() -> None:
    node0 = LosingNode("n0", 0, states=[(0, show_text(invocation=NEW))], follows=[[]])
    node0.show_losses = 100
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    result = await run([node0, node1], [(0, None)])
    assert result.failure is not None and result.failure.reason == "unreachable"
    assert "connection lost during" in result.failure.message


async def test_a_follower_that_cannot_reconnect_reports_the_node_unreachable() -> None:
    node0 = LosingNode("n0", 0, states=[(0, show_text(invocation=NEW))], follows=[[], []])
    node0.fail["journal-follow"] = UnreachableError("n0", "no SSH answer within 3 s")
    original = node0.stream

    def stream(command: str, /, **params: object) -> AsyncIterator[bytes]:
        if node0.follow_params:  # the first follow runs, the resumed one cannot connect
            raise node0.fail["journal-follow"]
        return original(command, **params)

    node0.stream = stream  # type: ignore[method-assign]
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    result = await run([node0, node1], [(0, None)])
    assert result.failure is not None and result.failure.reason == "unreachable"
    assert "no SSH answer" in result.failure.message
