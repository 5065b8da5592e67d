"""Grep on the two-node testbed: each scope, the count, bounded output, and a command that re-runs."""

from __future__ import annotations

import pytest

from bot.target.grep import grep
from bot.target.readiness import wait_ready
from bot.target.restart import restart_target
from bot.target.session import TargetSession
from tests.integration.conftest import NodeShells
from tests.integration.target import support
from tests.integration.target.support import invocations_now

pytestmark = pytest.mark.asyncio(loop_scope="session")
store, ts = support.store, support.ts  # fixtures used by this module
READY = "fired up and ready"


async def test_this_start_has_one_ready_line_and_the_command_reruns_to_the_same_lines(
    ts: TargetSession, ssh_ops: NodeShells
) -> None:
    result = await grep(ts.node0, READY)
    assert (result.scope, result.count, result.complete) == ("this", 1, True)
    assert result.lines[0].endswith("The server is fired up and ready to roll!")
    assert result.command.startswith(
        f"journalctl INVOCATION_ID={result.invocation} + _SYSTEMD_INVOCATION_ID="
    )
    rerun = await ssh_ops.run(0, result.command)
    assert rerun.exit_status == 0
    assert [line for line in rerun.stdout.splitlines() if line] == result.lines
    node1 = await grep(ts.nodes[1], READY)
    assert node1.count == 0  # rank 1 serves only the dummy health check: no ready line there


async def test_this_scope_includes_systemds_lines_about_the_start(ts: TargetSession) -> None:
    result = await grep(ts.node0, "Started sglang")
    assert result.count == 1 and "systemd[1]: Started sglang-qwen.service" in result.lines[0]


async def test_previous_since_and_last_scopes(ts: TargetSession) -> None:
    previous = await invocations_now(ts)
    await restart_target(ts)
    ready = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=120, previous=previous)
    assert ready.ready
    before = await grep(ts.node0, READY, scope="previous")
    assert before.invocation == previous[ts.node0.name] and before.count == 1
    now = await grep(ts.node0, READY)
    assert now.invocation == ready.invocation and now.count == 1 and now.lines != before.lines
    since = await grep(ts.node0, READY, scope="since", since="-3600s")
    assert since.count >= 2 and since.lines[-1] == now.lines[0]
    last = await grep(ts.node0, READY, scope="last", lines=2)
    assert last.lines == [before.lines[0], now.lines[0]]  # time order, though journalctl prints newest first
    assert last.command.endswith("--grep 'fired up and ready' -n 2")


async def test_output_is_bounded_but_the_count_is_not(ts: TargetSession) -> None:
    result = await grep(ts.node0, "TP0", lines=3)
    assert result.count > 10 and result.shown == 3 and result.complete
    assert "showing 3" in result.describe()
    regex = await grep(ts.node0, r"max_running_requests=\d+,", regex=True)
    assert regex.count == 2 and "server_args=" in regex.lines[0] and "max_total_num_tokens=" in regex.lines[1]
    literal = await grep(ts.node0, "max_running_requests=48, context_len")
    assert literal.count == 1
