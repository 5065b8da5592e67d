"""Readiness on the two-node testbed: both ranks restarted together, phases seen, both ready signals."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.target.readiness import wait_ready
from bot.target.restart import restart_target
from bot.target.session import TargetSession
from flagbot_lab.testbed import Testbed
from tests.integration.target import support
from tests.integration.target.support import await_truth_ready, invocations_now

pytestmark = pytest.mark.asyncio(loop_scope="session")
store, ts = support.store, support.ts  # fixtures used by this module


async def test_a_restart_is_followed_to_ready_through_loading_and_warming(
    ts: TargetSession, testbed: Testbed
) -> None:
    previous = await invocations_now(ts)
    report = await restart_target(ts)
    phases: list[str] = []
    result = await wait_ready(
        ts.nodes,
        base_url=ts.target.http_base(),
        timeout=120,
        previous=previous,
        on_progress=lambda phase, detail: phases.append(phase),
    )
    assert result.ready, result.to_json()
    assert result.invocation == report.nodes[0].new_invocation != previous[ts.node0.name]
    assert list(result.phases) == ["loading", "warming", "ready"]
    assert result.health_ready_at is not None and result.ready_line_at is not None
    assert result.stage == "capacity"
    assert 1 < result.timings["loading_s"] < 60 and result.timings["warming_s"] < 10
    pid = next(entry.pid for entry in result.lines if entry.pid and not entry.systemd)
    truth = await await_truth_ready(testbed, pid)
    assert truth is not None
    lag = result.noticed_at - truth  # type: ignore[operator]
    assert -0.05 < lag < 1.0, (lag, result.to_json())
    assert abs(result.ready_line_at - truth) < 0.5


async def test_the_server_already_up_is_ready_at_once(ts: TargetSession) -> None:
    started = time.monotonic()
    result = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=30, confirm_s=0.1)
    assert result.ready and result.health_ready_at is not None
    assert time.monotonic() - started < 2.0


async def test_a_short_timeout_while_loading_is_a_timeout(ts: TargetSession, testbed: Testbed) -> None:
    previous = await invocations_now(ts)
    await restart_target(ts)
    result = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=1.5, previous=previous)
    assert result.outcome == "timeout" and result.failure is not None
    assert result.phase == "failed" and "loading" in result.phases
    again = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=120, previous=previous)
    assert again.ready  # nothing was wrong: the same start goes on to ready
    await asyncio.sleep(0)
