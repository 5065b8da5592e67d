"""Writing flagbot's drop-in on a fake node: backup, round trip, hand edits, neutral drop-in, store."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store import AsyncStore, Store
from bot.target.dropin import (
    NEUTRAL,
    DropinSpec,
    DropinVerifyError,
    HandEditError,
    render_dropin,
    write_dropin,
)
from bot.target.ledger import Ledger
from bot.target.privileged import dropin_backup_path
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from tests.unit.target.conftest import FakeTarget

ARGV = [
    "/usr/bin/python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/qwen",
    "--name",
    "a b $x 5%",
]


def test_render_dropin_resets_and_sets() -> None:
    text = render_dropin(DropinSpec(ARGV, {"A": "1"}))
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == [
        "[Service]",
        "ExecStart=",
        'ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /models/qwen --name "a b $$x 5%%"',
        "Environment=",
        'Environment="A=1"',
    ]
    assert "Environment" not in render_dropin(DropinSpec(ARGV))
    assert render_dropin(None) == NEUTRAL and "[Service]" not in NEUTRAL


async def test_write_backs_up_reloads_and_verifies(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    async with fake_target.open() as ts:
        first = await write_dropin(ts.node0, ts.ledger, DropinSpec(ARGV, {"A": "x y"}))
        assert first.changed and first.previous is None
        view = await read_unit(ts.node0)
        assert view.flags.argv()[-2:] == ["--name", "a b $x 5%"]
        assert view.env == {"A": "x y"}
        second = await write_dropin(ts.node0, ts.ledger, None, reason="back to vendor")
        assert second.previous == first.content
        again = await write_dropin(ts.node0, ts.ledger, None)
        assert not again.changed
        backups = await ts.ledger.backups(ts.node0.name)
    assert node.files[str(dropin_backup_path(node.unit))] == first.content
    assert node.files[node.dropin] == NEUTRAL
    assert [b.reason for b in backups] == ["back to vendor", "before write"]
    assert backups[0].content == first.content and len(backups[0].sha256) == 64
    assert "make-dropin-dir" in " ".join(fake_target.received) or any(
        "mkdir -p" in text for text in fake_target.received
    )


async def test_a_hand_edit_is_refused_with_a_diff_unless_forced(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[1].systemd
    async with fake_target.open() as ts:
        await write_dropin(ts.nodes[1], ts.ledger, DropinSpec(ARGV))
        node.files[node.vendor] = node.files[node.vendor].replace("--tp 2", "--tp 4")
        node.reload()
        with pytest.raises(HandEditError) as caught:
            await write_dropin(ts.nodes[1], ts.ledger, None)
        assert "-    --tp 2 \\" in caught.value.diff and "+    --tp 4 \\" in caught.value.diff
        assert ts.nodes[1].name in str(caught.value)
        await write_dropin(ts.nodes[1], ts.ledger, None, force=True)
        await write_dropin(ts.nodes[1], ts.ledger, DropinSpec(ARGV))  # flagbot's view is current again


async def test_a_unit_never_seen_with_a_pending_reload_is_refused(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    node.files[node.vendor] += "\n# edited, not reloaded\n"
    async with fake_target.open() as ts:
        with pytest.raises(HandEditError, match="not reloaded"):
            await write_dropin(ts.node0, ts.ledger, DropinSpec(ARGV))
    assert node.dropin not in node.files


async def test_a_write_systemd_does_not_take_is_reported(fake_target: FakeTarget) -> None:
    fake_target.nodes[0].fail["daemon-reload"] = "Failed to reload daemon\n"
    async with fake_target.open() as ts:
        with pytest.raises(Exception, match="Failed to reload daemon"):
            await write_dropin(ts.node0, ts.ledger, DropinSpec(ARGV))
    fake_target.nodes[0].fail.clear()
    async with fake_target.open() as ts:
        # disk and loaded state disagree now: systemd did not load what flagbot wrote
        node = fake_target.nodes[0].systemd
        node.files[node.dropin] = render_dropin(DropinSpec(ARGV))
        node.reload()
        node.exec_argv = lambda: [[*ARGV[:-1], "a b $$y 5%"]]  # type: ignore[method-assign]
        from bot.target.dropin import verify_loaded

        with pytest.raises(DropinVerifyError, match="ExecStart is"):
            await verify_loaded(ts.node0, DropinSpec(ARGV))


async def test_the_store_keeps_backups_and_the_unit_as_left(fake_target: FakeTarget, tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    store.upgrade()
    astore = AsyncStore(store)
    try:
        async with TargetSession.open("fake", fake_target.target, store=astore) as ts:
            await write_dropin(ts.node0, ts.ledger, DropinSpec(ARGV))
        node = fake_target.nodes[0].systemd
        node.files[node.vendor] = node.files[node.vendor].replace("--tp 2", "--tp 8")
        node.reload()
        # a new session (a restarted bot) still knows what flagbot left, and shows the diff
        fresh = Ledger("fake", astore)
        async with TargetSession.open("fake", fake_target.target, store=astore) as ts:
            with pytest.raises(HandEditError, match=r"\+    --tp 8"):
                await write_dropin(ts.node0, fresh, None)
            state = await fresh.state()
            assert set(state.unit_sha256) == {ts.node0.name}
            assert [b.reason for b in await fresh.backups()] == ["before write"]
    finally:
        await astore.aclose()
