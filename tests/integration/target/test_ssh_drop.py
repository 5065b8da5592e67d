"""An SSH connection dropped mid-restart while the host stays up: reconnected, carried on, said so.

The drop is what a dying sshd does: node k's per-connection sshd processes are SIGKILLed from
the host (`flagbot_lab.testbed.ssh_faults`), the listener stays. Each test checks that the apply is not
marked diverged, both ranks run new invocations with the new flags, the report or the readiness
result names the reconnect, and the time is bounded by the configured timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import httpx
import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.readiness import Backoff, wait_ready
from bot.target.readiness_result import Readiness
from bot.target.restart import RestartReport, apply_and_restart, flags_for_nodes
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from flagbot_lab.testbed.ssh_faults import drop_connections, processes
from tests.integration.target.support_control import (  # noqa: F401
    COMMAND_S,
    CONNECT_S,
    STOP_S,
    on_baseline,
    session_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")

READY_S = 120.0
APPLY_BOUND_S = 2 * STOP_S + CONNECT_S + 1 + COMMAND_S
"""One stop run twice at its full timeout, one reconnect, and a command timeout of slack for the
other dozen commands of an apply (each takes milliseconds)."""
DRAIN_TOKENS = 500
"""A request this long keeps node 0's `systemctl stop` waiting ~4 s for the twin's drain."""


async def _new_flags(ts: TargetSession) -> list[FlagSet]:
    view = await read_unit(ts.node0)
    return flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--log-level", "debug"))), len(ts.nodes))


async def _ready(ts: TargetSession, report: RestartReport, **kwargs: object) -> Readiness:
    previous = {node.node: node.old_invocation for node in report.nodes}
    return await wait_ready(
        ts.nodes, base_url=ts.target.http_base(), timeout=READY_S, previous=previous, **kwargs
    )


async def _check_applied(ts: TargetSession, report: RestartReport, flags: list[FlagSet]) -> None:
    assert report.ok and report.phase == "restarted", report
    assert await ts.ledger.divergence() is None
    assert all(n.new_invocation and n.new_invocation != n.old_invocation for n in report.nodes)
    assert [(await read_unit(node)).flags for node in ts.nodes] == flags


def _drop_at_stop(bed: Testbed, k: int, dropped: list[list[int]]) -> Callable[[str, str], None]:
    """An audit hook that drops node k's connections just before its `systemctl stop` is sent."""

    def audit(node: str, text: str) -> None:
        if node == bed.addresses[k] and "systemctl stop" in text and not dropped:
            dropped.append(drop_connections(bed.layout, k))

    return audit


@pytest.mark.usefixtures("on_baseline")
async def test_a_drop_as_stop_is_sent_is_reconnected_and_the_apply_completes(testbed: Testbed) -> None:
    dropped: list[list[int]] = []
    async with session_for(testbed, audit=_drop_at_stop(testbed, 1, dropped)) as ts:
        flags = await _new_flags(ts)
        started = time.monotonic()
        report = await apply_and_restart(ts, flags)
        assert time.monotonic() - started < APPLY_BOUND_S
        assert dropped, "no connection was dropped"
        await _check_applied(ts, report, flags)
        assert report.nodes[0].reconnects == []
        [reconnect] = report.nodes[1].reconnects
        assert reconnect.command is not None and "systemctl stop" in reconnect.command
        [note] = report.connection_notes()
        assert note.startswith(
            f"connection to {testbed.addresses[1]} lost during `sudo -n /usr/bin/systemctl stop"
        )
        assert note.endswith("reconnected, command re-run")
        assert (await _ready(ts, report)).ready


@pytest.mark.usefixtures("on_baseline")
async def test_a_drop_while_the_remote_stop_runs_is_reconnected_and_the_apply_completes(
    testbed: Testbed,
) -> None:
    """Node 0's stop waits for the twin to drain a long request: the drop hits a running `systemctl stop`
    (node 1's rank exits at once, too fast to catch), whose re-run joins the same stop job."""
    dropped: list[list[int]] = []
    seen_running: list[list[int]] = []

    async def drop_when_running() -> None:
        backoff = Backoff(0.01, 1.5, 0.05)
        deadline = time.monotonic() + STOP_S
        while not (running := processes(testbed.layout, 0, "systemctl stop")):
            assert time.monotonic() < deadline, "node 0's systemctl stop never showed up"
            await backoff.sleep()
        seen_running.append(running)
        dropped.append(drop_connections(testbed.layout, 0))

    watchers: list[asyncio.Task[None]] = []

    def audit(node: str, text: str) -> None:
        if node == testbed.addresses[0] and "systemctl stop" in text and not watchers:
            watchers.append(asyncio.get_running_loop().create_task(drop_when_running()))

    async with httpx.AsyncClient(timeout=READY_S) as client, session_for(testbed, audit=audit) as ts:
        flags = await _new_flags(ts)
        body = {"text": "hi", "sampling_params": {"max_new_tokens": DRAIN_TOKENS, "ignore_eos": True}}
        request = asyncio.ensure_future(client.post(f"{testbed.base_url}/generate", json=body))
        try:
            started = time.monotonic()
            report = await apply_and_restart(ts, flags)
            assert time.monotonic() - started < APPLY_BOUND_S
            await watchers[0]
        finally:
            request.cancel()
            with contextlib.suppress(BaseException):
                await request
            for watcher in watchers:
                watcher.cancel()
        assert seen_running and dropped
        await _check_applied(ts, report, flags)
        [reconnect] = report.nodes[0].reconnects
        assert reconnect.command is not None and "systemctl stop" in reconnect.command
        assert report.nodes[0].timings["stop"] > 1  # it did wait for the drain, across the drop
        assert (await _ready(ts, report)).ready


@pytest.mark.usefixtures("on_baseline")
async def test_a_drop_while_readiness_waits_is_reconnected_and_the_ready_line_still_seen(
    testbed: Testbed,
) -> None:
    dropped: list[list[int]] = []

    def drop_once_following(phase: str, detail: str) -> None:
        if detail.startswith("journal:") and not dropped:  # the follower is streaming node 0's journal
            dropped.append(drop_connections(testbed.layout, 0))

    async with session_for(testbed) as ts:
        flags = await _new_flags(ts)
        report = await apply_and_restart(ts, flags)
        await _check_applied(ts, report, flags)
        result = await _ready(ts, report, on_progress=drop_once_following)
    assert dropped, "the journal never showed a startup stage"
    assert result.ready and result.failure is None, result.to_json()
    assert result.ready_line_at is not None and result.ready_line_seen_at is not None
    assert result.ready_line_seen_at - result.ready_line_at < CONNECT_S + 2  # the follow was resumed
    cursors = [entry.cursor for entry in result.lines]
    assert len(cursors) == len(set(cursors))  # nothing counted twice
    assert any(note.startswith(f"journal follow on {testbed.addresses[0]}") for note in result.reconnects)
