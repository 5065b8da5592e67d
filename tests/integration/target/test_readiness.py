"""Readiness on the two-node testbed: both ranks restarted together, phases seen, both ready signals;
a server that dies while loading under Restart=on-failure."""

from __future__ import annotations

import asyncio

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
    assert (
        result.timings["loading_s"] > 1 and result.timings["warming_s"] >= 0
    )  # how long: bench/readiness_lag.py
    pid = next(entry.pid for entry in result.lines if entry.pid and not entry.systemd)
    truth = await await_truth_ready(testbed, pid)
    assert truth is not None
    lag = result.noticed_at - truth  # type: ignore[operator]
    assert lag > -0.05, (
        lag,
        result.to_json(),
    )  # never before it was ready; how soon after: bench/readiness_lag.py
    assert abs(result.ready_line_at - truth) < 0.5


async def test_the_server_already_up_is_ready_at_once(ts: TargetSession) -> None:
    running = await invocations_now(ts)
    result = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=30, confirm_s=0.1)
    assert result.ready and result.health_ready_at is not None
    assert "warming" not in result.phases, result.to_json()  # its first /health answer was already 200
    assert result.invocation == running[ts.node0.name]  # the server that was running: no new start


async def test_a_short_timeout_while_loading_is_a_timeout(ts: TargetSession, testbed: Testbed) -> None:
    previous = await invocations_now(ts)
    await restart_target(ts)
    result = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=1.5, previous=previous)
    assert result.outcome == "timeout" and result.failure is not None
    assert result.phase == "failed" and "loading" in result.phases
    again = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=120, previous=previous)
    assert again.ready  # nothing was wrong: the same start goes on to ready
    await asyncio.sleep(0)


async def test_a_server_killed_while_loading_is_a_crash_loop_with_its_end(
    ts: TargetSession, testbed: Testbed
) -> None:
    """The twin's unit has `Restart=on-failure`: a SIGKILL while loading (what the kernel's OOM
    killer sends, and what SGLang's own SIGQUIT handler sends itself on a failed start) starts a
    restart loop, which readiness reports as a failed start with systemd's `code=killed,
    status=9/KILL` instead of waiting it out."""
    previous = await invocations_now(ts)
    await restart_target(ts)
    kills: list[int] = []

    async def kill_once_loading(phase: str, detail: str) -> None:
        """The moment node 0's new invocation is known, SIGKILL its main process (the twin)."""
        if phase == "loading" and detail.startswith("new invocation") and not kills:
            killed = await testbed.run_as_root_async(
                0, ["systemctl", "kill", "--kill-who=main", "--signal=SIGKILL", ts.node0.unit]
            )
            kills.append(killed.returncode)

    result = await wait_ready(
        ts.nodes,
        base_url=ts.target.http_base(),
        timeout=300,
        previous=previous,
        on_progress=kill_once_loading,
    )
    assert kills == [0]
    assert result.outcome == "failed" and result.failure is not None, result.to_json()
    failure = result.failure
    assert (failure.reason, failure.node) == ("crash-loop", ts.node0.name), result.to_json()
    assert failure.main_exit == "code=killed, status=9/KILL"
    assert failure.restart == "on-failure"
    assert "Restart=on-failure restarts it" in failure.message
    assert "ready" not in result.phases

    # systemd's restart (RestartSec=2) loads the same flags again: the target comes back by itself
    again = await wait_ready(
        ts.nodes, base_url=ts.target.http_base(), timeout=300, previous=result.invocations
    )
    assert again.ready, again.to_json()
    assert again.invocation != result.invocation
