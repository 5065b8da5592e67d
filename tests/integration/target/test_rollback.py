"""Rollback on the two-node testbed: a flag the twin rejects, a tripped start limit, and on demand."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.dropin import remember_unit
from bot.target.evidence import JournalExcerpt
from bot.target.nodestate import Backoff, node_state, probe_health
from bot.target.observe import observe
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.rollback import ensure_ready, rollback
from bot.target.session import TargetSession
from bot.target.systemd_quote import render_exec
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target import support

pytestmark = pytest.mark.asyncio(loop_scope="session")
baseline_after, store, ts = support.baseline_after, support.store, support.ts  # fixtures used by this module
BAD = "--enable-nonexistent-flag"
FATAL = f"sglang serve: error: unrecognized arguments: {BAD}"


async def healthy_everywhere(ts: TargetSession) -> None:
    import httpx

    async with httpx.AsyncClient(timeout=3, trust_env=False) as client:
        assert await probe_health(client, ts.target.http_base() + "/health") == 200
    for node in ts.nodes:
        state = await node_state(node)
        assert (state.active, state.sub) == ("active", "running"), (node.name, state)


async def test_a_rejected_flag_is_detected_in_seconds_and_rolled_back(
    ts: TargetSession, tmp_path: Path, baseline_after: None
) -> None:
    baseline = await observe(ts, cache_dir=tmp_path)
    assert baseline.known_good
    view = await read_unit(ts.node0)
    bad = FlagSet((*view.flags.items, FlagItem(BAD)))
    report = await apply_and_restart(ts, flags_for_nodes(bad, len(ts.nodes)), reason="test: a rejected flag")
    previous = {node.node: node.old_invocation for node in report.nodes}
    outcome = await ensure_ready(ts, previous=previous, timeout=120, cache_dir=tmp_path)
    readiness = outcome.readiness
    assert readiness.outcome == "failed" and readiness.failure is not None
    assert readiness.failure.reason in ("crash-loop", "fatal-line", "unit-failed")
    assert readiness.noticed_at >= readiness.started_at  # type: ignore[operator]  # noticed, not timed out (no upper bound: load)
    result = outcome.rollback
    assert result is not None and result.ok, result.to_json() if result else None
    assert result.trigger == "failed-start" and result.fatal_line == FATAL
    assert result.snapshot_id == baseline.snapshot_id
    excerpts = [block for block in result.evidence if isinstance(block, JournalExcerpt)]
    assert excerpts and excerpts[0].highlight is not None and FATAL in excerpts[0].highlight
    assert excerpts[0].command.startswith("journalctl _SYSTEMD_INVOCATION_ID=")
    assert any("status=2/INVALIDARGUMENT" in line for block in excerpts for line in block.lines)
    assert result.observation is not None and result.observation.effective["max_running_requests"] == 48
    assert BAD not in str(result.observation.requested)
    await healthy_everywhere(ts)


async def test_a_crash_loop_that_tripped_the_start_limit_is_rolled_back(
    ts: TargetSession, testbed: Testbed, tmp_path: Path, baseline_after: None
) -> None:
    """systemd's start limit (StartLimitBurst) trips when the unit restarts fast; the drop-in of
    this test sets RestartSec=100ms so it does (the testbed's own 2 s never reaches 5 starts in
    10 s). It is written with the table's tee entry, then accepted as what flagbot left; the unit
    is restarted by hand, as root on the node."""
    await observe(ts, cache_dir=tmp_path)
    for node in ts.nodes:
        view = await read_unit(node)
        argv = view.argv_with(FlagSet((*view.flags.items, FlagItem(BAD))))
        text = (
            "[Unit]\nStartLimitIntervalSec=30\nStartLimitBurst=3\n"
            f"[Service]\nExecStart=\nExecStart={render_exec(argv)}\nRestartSec=100ms\n"
        )
        await node.run("write-dropin", input=text)
        await node.run("daemon-reload")
        await remember_unit(node, ts.ledger)
    for node in ts.nodes:  # started by hand, as root: flagbot's sudo grant has no restart
        restarted = await testbed.run_as_root_async(node.index, ["systemctl", "restart", node.unit])
        assert restarted.returncode == 0, restarted.stderr
    backoff, deadline = Backoff(0.1, 1.5, 0.5), time.monotonic() + 60
    # Every node's restarts exhausted: a node still between restarts would read as a crash loop.
    while True:
        states = [await node_state(node) for node in ts.nodes]
        if all(state.active == "failed" for state in states):
            break
        assert time.monotonic() < deadline, states
        await backoff.sleep()
    assert all(state.n_restarts >= 2 for state in states), states
    outcome = await ensure_ready(ts, previous={}, timeout=120, cache_dir=tmp_path)
    assert outcome.readiness.failure is not None and outcome.readiness.failure.reason == "start-limit"
    result = outcome.rollback
    assert result is not None and result.ok, result.to_json() if result else None
    assert result.restart is not None and result.restart.nodes[0].reset_failed
    assert result.fatal_line == FATAL
    assert any(
        "repeated too quickly" in line
        for b in result.evidence
        if isinstance(b, JournalExcerpt)
        for line in b.lines
    )
    await healthy_everywhere(ts)


async def test_on_demand_rollback_returns_to_the_known_good_flags(
    ts: TargetSession, tmp_path: Path, baseline_after: None
) -> None:
    baseline = await observe(ts, cache_dir=tmp_path)
    view = await read_unit(ts.node0)
    changed = FlagSet((*view.flags.items, FlagItem("--enable-fused-moe-sum-all-reduce")))
    report = await apply_and_restart(ts, flags_for_nodes(changed, len(ts.nodes)), reason="test")
    previous = {node.node: node.old_invocation for node in report.nodes}
    outcome = await ensure_ready(ts, previous=previous, timeout=120, cache_dir=tmp_path, promote=False)
    assert outcome.observation is not None and outcome.observation.effective["max_running_requests"] == 26
    result = await rollback(ts, cache_dir=tmp_path, timeout=120)
    assert result.ok and result.trigger == "on-demand" and result.snapshot_id == baseline.snapshot_id
    assert result.to.startswith("the vendor ExecStart")  # the known-good flags are the vendor line's
    assert result.observation is not None and result.observation.effective["max_running_requests"] == 48
    await healthy_everywhere(ts)
