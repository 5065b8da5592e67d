"""Readiness decisions from scripted nodes: ready (both signals), failures of every kind, timeout."""

from __future__ import annotations

import time

import httpx
import pytest

from bot.target.errors import UnreachableError
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
    assert time.monotonic() - started < 1.5


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
