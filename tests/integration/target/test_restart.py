"""Restarting the two-node target: lockstep apply, rollback of a failed write, link loss, a frozen node."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import bot.target.restart as restart_module
from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.drain import DrainSettings
from bot.target.dropin import DropinVerifyError, read_dropin
from bot.target.errors import DivergedError, UnreachableError
from bot.target.restart import RestartError, apply_and_restart, flags_for_nodes, reconcile, restart_target
from bot.target.session import TargetSession
from bot.target.unit import read_state, read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target.support_control import CONNECT_S, on_baseline, session_for  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")

NAME = 'qwen $HOME 100% "x"'


async def _flags(ts: TargetSession, *extra: FlagItem) -> list[FlagSet]:
    view = await read_unit(ts.node0)
    return flags_for_nodes(FlagSet((*view.flags.items, *extra)), len(ts.nodes))


@pytest.mark.usefixtures("on_baseline")
async def test_apply_restarts_both_ranks_with_the_new_flags(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        flags = await _flags(ts, FlagItem("--served-model-name", NAME))
        report = await apply_and_restart(ts, flags)
        assert report.ok and report.phase == "restarted"
        for node in report.nodes:
            assert node.new_invocation and node.new_invocation != node.old_invocation
            assert node.timings["write"] < 3 and node.timings["start"] < 3
        views = [await read_unit(node) for node in ts.nodes]
        assert [view.flags for view in views] == flags
        await testbed.wait_healthy_async(timeout=180)
    async with httpx.AsyncClient() as client:
        models = (await client.get(f"{testbed.base_url}/v1/models")).json()
    assert [model["id"] for model in models["data"]] == [NAME]  # the process got the literal value


@pytest.mark.usefixtures("on_baseline")
async def test_a_failed_write_restores_every_node_and_restarts_nothing(
    testbed: Testbed, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = restart_module.write_dropin

    async def write_then_fail_on_node_1(node: Any, ledger: Any, spec: Any, **kwargs: Any) -> Any:
        result = await real_write(node, ledger, spec, **kwargs)
        if node.index == 1 and kwargs.get("reason") == "apply":
            raise DropinVerifyError(node.name, "injected after a real write")
        return result

    monkeypatch.setattr(restart_module, "write_dropin", write_then_fail_on_node_1)
    async with session_for(testbed) as ts:
        before = [(await read_state(n)).invocation_id for n in ts.nodes]
        dropins = [await read_dropin(n) for n in ts.nodes]
        with pytest.raises(RestartError, match="every node restored, nothing restarted") as caught:
            await apply_and_restart(ts, await _flags(ts, FlagItem("--log-level", "debug")))
        assert caught.value.report.phase == "rolled-back"
        assert [(await read_state(n)).invocation_id for n in ts.nodes] == before
        assert [await read_dropin(n) for n in ts.nodes] == [d or "" for d in dropins]
        views = [await read_unit(n) for n in ts.nodes]
        assert all(FlagItem("--log-level", "debug") not in view.flags.items for view in views)
        assert await ts.ledger.divergence() is None


@pytest.mark.usefixtures("on_baseline")
async def test_a_node_unreachable_before_the_write_leaves_the_other_untouched(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        flags = await _flags(ts, FlagItem("--log-level", "debug"))
        before = (await read_state(ts.node0)).invocation_id, await read_dropin(ts.node0)
        testbed.set_link(1, False)
        try:
            started = time.monotonic()
            with pytest.raises(UnreachableError) as caught:
                await apply_and_restart(ts, flags)
            assert time.monotonic() - started < CONNECT_S + 10
            assert caught.value.host == testbed.addresses[1]
        finally:
            testbed.set_link(1, True)
        assert ((await read_state(ts.node0)).invocation_id, await read_dropin(ts.node0)) == before
        assert await ts.ledger.divergence() is None


def _cut_at_stop(testbed: Testbed, ts_name: str, fault: Callable[[], None]) -> Callable[[str, str], None]:
    """An audit hook that injects `fault` just before node 1's `systemctl stop` is sent."""
    fired: list[bool] = []

    def audit(node: str, text: str) -> None:
        if node == ts_name and "systemctl stop" in text and not fired:
            fired.append(True)
            fault()

    return audit


@pytest.mark.parametrize("fault", ["link", "freeze"])
@pytest.mark.usefixtures("on_baseline")
async def test_a_node_lost_mid_restart_is_diverged_then_reconciled(testbed: Testbed, fault: str) -> None:
    node1 = testbed.addresses[1]
    inject = {
        "link": (lambda: testbed.set_link(1, False), lambda: testbed.set_link(1, True)),
        "freeze": (lambda: testbed.set_frozen(1, True), lambda: testbed.set_frozen(1, False)),
    }[fault]
    async with session_for(testbed, audit=_cut_at_stop(testbed, node1, inject[0])) as ts:
        flags = await _flags(ts, FlagItem("--log-level", "debug"))
        try:
            with pytest.raises(RestartError, match="diverged") as caught:
                await apply_and_restart(ts, flags)
            report = caught.value.report
            assert report.phase == "diverged"
            assert report.nodes[0].error is None and "stop" in (report.nodes[1].error or "")
            divergence = await ts.ledger.divergence()
            assert divergence is not None and divergence.nodes == [node1]
            with pytest.raises(DivergedError, match="reconcile"):
                await apply_and_restart(ts, flags)
        finally:
            inject[1]()
        fixed = await reconcile(ts)
        assert fixed.phase == "reconciled" and await ts.ledger.divergence() is None
        assert all(n.new_invocation and n.new_invocation != n.old_invocation for n in fixed.nodes)
        views = [await read_unit(node) for node in ts.nodes]
        assert [view.flags for view in views] == flags
        assert all(view.state.active_state in ("active", "activating") for view in views)


async def trip_start_limit(bed: Testbed, ts: TargetSession) -> None:
    """Quick restarts of node 1 until systemd refuses one (its start limit: 5 starts in 10 s).

    An operator's restarts, as root on the node: flagbot's sudo grant has no `systemctl restart`
    (docs/security.md)."""
    node = ts.nodes[1]
    for _ in range(8):
        if (await bed.run_as_root_async(1, ["systemctl", "restart", node.unit])).returncode != 0:
            break
    state = await read_state(node)
    assert (state.result, state.active_state) == ("start-limit-hit", "failed"), state


@pytest.mark.usefixtures("on_baseline")
async def test_a_tripped_start_limit_is_reset(testbed: Testbed) -> None:
    """Quick restarts of node 1 trip systemd's start limit; a restart clears it."""
    async with session_for(testbed) as ts:
        node = ts.nodes[1]
        await trip_start_limit(testbed, ts)
        report = await restart_target(ts, drain=DrainSettings(limit_s=10))
        # node 0 is `failed` after its stop too: after the drain SGLang's main process SIGKILLs
        # itself (Result=signal), so only node 1's reset says anything about the start limit
        assert report.ok and report.nodes[1].reset_failed
        assert report.drain is not None and report.drain.drained
        assert report.drain.source == "journal"  # the twin runs without --enable-metrics
        assert (await read_state(node)).active_state in ("active", "activating")
