"""Readiness on the testbed when the server dies while loading: the twin's unit has
`Restart=on-failure`, so a SIGKILL (what the kernel's OOM killer sends, and what SGLang's own
SIGQUIT handler sends itself on a failed start) starts a restart loop, which readiness reports
as a failed start with systemd's `code=killed, status=9/KILL` instead of waiting it out."""

from __future__ import annotations

import pytest

from bot.target.readiness import wait_ready
from bot.target.restart import restart_target
from bot.target.session import TargetSession
from flagbot_lab.testbed import Testbed
from tests.integration.target import support
from tests.integration.target.support import invocations_now

pytestmark = pytest.mark.asyncio(loop_scope="session")
store, ts = support.store, support.ts  # fixtures used by this module


async def test_a_server_killed_while_loading_is_a_crash_loop_with_its_end(
    ts: TargetSession, testbed: Testbed
) -> None:
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
