"""Two-phase restart on two fake nodes: lockstep flags, rollback, divergence, reconcile, start limit,
a dropped connection (reconnected, or diverged when the reconnect fails)."""

from __future__ import annotations

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.dropin import HandEditError, render_dropin
from bot.target.errors import DivergedError
from bot.target.restart import (
    RestartError,
    apply_and_restart,
    check_lockstep,
    flags_for_nodes,
    reconcile,
    restart_target,
    restore_vendor_and_restart,
)
from bot.target.unit import read_unit
from tests.unit.target.conftest import FakeTarget
from tests.unit.target.dropping_node import dropper, dropping_target_fixture  # noqa: F401

EXTRA = FlagItem("--enable-torch-compile")


def test_flags_for_nodes_sets_the_rank_only() -> None:
    base = FlagSet((FlagItem("--tp", "2"), FlagItem("--node-rank", "0"), FlagItem("--port", "1")))
    per_node = flags_for_nodes(base, 2)
    assert [f.argv() for f in per_node] == [
        ["--tp", "2", "--node-rank", "0", "--port", "1"],
        ["--tp", "2", "--node-rank", "1", "--port", "1"],
    ]
    check_lockstep(per_node)
    with pytest.raises(ValueError, match="more than --node-rank"):
        check_lockstep([per_node[0], FlagSet((*per_node[1].items, EXTRA))])
    assert flags_for_nodes(FlagSet((FlagItem("--tp", "2"),)), 1)[0].argv() == ["--tp", "2"]


async def _new_flags(fake: FakeTarget) -> list[FlagSet]:
    async with fake.open() as ts:
        view = await read_unit(ts.node0)
    return flags_for_nodes(FlagSet((*view.flags.items, EXTRA)), 2)


async def test_apply_writes_everywhere_then_restarts_all(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    before = [n.systemd.invocation for n in fake_target.nodes]
    async with fake_target.open() as ts:
        report = await apply_and_restart(ts, flags)
        views = [await read_unit(node) for node in ts.nodes]
    assert report.ok and report.phase == "restarted"
    assert [n.old_invocation for n in report.nodes] == before
    assert all(n.new_invocation and n.new_invocation not in before for n in report.nodes)
    assert all({"write", "stop", "start"} <= n.timings.keys() for n in report.nodes)
    assert [v.flags for v in views] == flags
    sent = [text.split()[-2] for _, text in fake_target.audit]
    order = [word for word in sent if word in ("stop", "start")]
    assert order == ["stop", "stop", "start", "start"]  # every rank stopped before any starts


async def test_apply_reads_each_unit_once_before_writing(fake_target: FakeTarget) -> None:
    """The hand-edit check and the old invocation come from the apply's own read of the unit:
    one `systemctl cat` per node before the write, one after the reload (what flagbot left)."""
    flags = await _new_flags(fake_target)
    for node in fake_target.nodes:
        node.received.clear()
    async with fake_target.open() as ts:
        report = await apply_and_restart(ts, flags)
    assert report.ok
    for node in fake_target.nodes:
        cats = [text for text in node.received if text.startswith("systemctl cat")]
        assert len(cats) == 2, node.received


async def test_phase_one_failure_restores_every_node_and_restarts_nothing(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    fake_target.nodes[1].fail_once["daemon-reload"] = "Failed to reload daemon: boom\n"
    invocations = [n.systemd.invocation for n in fake_target.nodes]
    async with fake_target.open() as ts:
        with pytest.raises(RestartError, match="every node restored, nothing restarted") as caught:
            await apply_and_restart(ts, flags)
        views = [await read_unit(node) for node in ts.nodes]
    report = caught.value.report
    assert report.phase == "rolled-back"
    assert "boom" in (report.nodes[1].error or "") and report.nodes[0].error is None
    assert all(n.restored for n in report.nodes)
    assert [n.systemd.invocation for n in fake_target.nodes] == invocations
    assert all(EXTRA not in v.flags.items for v in views)
    assert not any("systemctl st" in text for text in fake_target.received)


async def test_hand_edit_on_one_node_stops_before_any_write(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    async with fake_target.open() as ts:
        await apply_and_restart(ts, flags)
        node = fake_target.nodes[1].systemd
        node.files[node.vendor] += "Nice=5\n"
        node.reload()
        written = dict(fake_target.nodes[0].systemd.files)
        with pytest.raises(HandEditError, match="Nice=5"):
            await restore_vendor_and_restart(ts)
    assert fake_target.nodes[0].systemd.files == written


async def test_a_node_lost_in_phase_two_leaves_the_target_diverged_until_reconciled(
    fake_target: FakeTarget,
) -> None:
    flags = await _new_flags(fake_target)
    fake_target.nodes[1].hang.add("stop")
    async with fake_target.open() as ts:
        with pytest.raises(RestartError, match="diverged") as caught:
            await apply_and_restart(ts, flags)
        report = caught.value.report
        assert report.phase == "diverged" and "stop" in (report.nodes[1].error or "")
        divergence = await ts.ledger.divergence()
        assert divergence is not None and divergence.nodes == [ts.nodes[1].name]
        with pytest.raises(DivergedError, match="reconcile"):
            await apply_and_restart(ts, flags)
        with pytest.raises(DivergedError):
            await restart_target(ts)
        fake_target.nodes[1].hang.clear()
        fake_target.nodes[1].systemd.files[fake_target.nodes[1].systemd.dropin] = "# lost write\n"
        fixed = await reconcile(ts)
        assert fixed.phase == "reconciled" and fixed.nodes[1].written
        assert await ts.ledger.divergence() is None
        assert [(await read_unit(node)).flags for node in ts.nodes] == flags
    assert fake_target.nodes[1].signals == ["TERM"]


async def test_reset_failed_when_the_start_limit_tripped(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    node.active, node.result = "failed", "start-limit-hit"
    async with fake_target.open() as ts:
        report = await restart_target(ts)
    assert report.nodes[0].reset_failed and not report.nodes[1].reset_failed
    assert node.active == "active"


async def test_a_restore_that_fails_too_marks_the_target_diverged(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    fake_target.nodes[1].fail["daemon-reload"] = "Failed to reload daemon: boom\n"
    async with fake_target.open() as ts:
        with pytest.raises(RestartError, match="could not be undone") as caught:
            await apply_and_restart(ts, flags)
        assert caught.value.report.phase == "diverged"
        assert (await ts.ledger.divergence()) is not None
        fake_target.nodes[1].fail.clear()
        assert (await reconcile(ts)).phase == "reconciled"
        views = [await read_unit(node) for node in ts.nodes]
        assert all(EXTRA not in view.flags.items for view in views)


def test_neutral_dropin_has_no_service_section() -> None:
    assert "[Service]" not in render_dropin(None)


@pytest.mark.parametrize("command", ["stop", "start", "daemon-reload", "write-dropin"])
async def test_a_connection_dropped_mid_apply_is_reconnected_and_the_apply_completes(
    dropping_target: FakeTarget, command: str
) -> None:
    flags = await _new_flags(dropping_target)
    node = dropper(dropping_target, 1)
    node.drop[command] = ("after", 1)
    async with dropping_target.open() as ts:
        report = await apply_and_restart(ts, flags)
        views = [await read_unit(n) for n in ts.nodes]
        assert await ts.ledger.divergence() is None
    assert report.ok and report.phase == "restarted" and node.dropped == [command]
    assert report.nodes[0].reconnects == [] and len(report.nodes[1].reconnects) == 1
    [note] = report.connection_notes()
    assert f"connection to {report.nodes[1].node} lost during `" in note and note.endswith("command re-run")
    assert [v.flags for v in views] == flags
    assert all(n.new_invocation and n.new_invocation != n.old_invocation for n in report.nodes)


async def test_a_drop_whose_reconnect_fails_leaves_the_target_diverged(dropping_target: FakeTarget) -> None:
    flags = await _new_flags(dropping_target)
    node = dropper(dropping_target, 1)
    node.drop["stop"] = ("before", 1)
    node.refuse_after_drop = True
    async with dropping_target.open() as ts:
        with pytest.raises(RestartError, match="diverged") as caught:
            await apply_and_restart(ts, flags)
        divergence = await ts.ledger.divergence()
    report = caught.value.report
    assert report.phase == "diverged" and report.nodes[1].reconnects == []
    assert "lost during `sudo -n /usr/bin/systemctl stop" in (report.nodes[1].error or "")
    assert "reconnect failed" in (report.nodes[1].error or "")
    assert divergence is not None and divergence.nodes == [report.nodes[1].node]
