"""The drop-in through real systemd: odd values round-trip, backups, hand edits, the neutral file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore, Store
from bot.target.dropin import NEUTRAL, DropinSpec, HandEditError, read_dropin, write_dropin
from bot.target.privileged import dropin_path
from bot.target.session import TargetSession
from bot.target.unit import read_state, read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target.support_control import on_baseline, target_for  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")

ODD_VALUES = [
    "100%",
    "%n %i",
    "$HOME",
    "${PATH}x",
    "$$",
    "it's",
    'say "hi"',
    "back\\slash\\",
    "two  spaces ",
    "",
    ";",
    "ünïcødé ☃",
    "a=b,c:d",
]


async def _store(tmp_path: Path) -> AsyncStore:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    return AsyncStore(sync)


@pytest.mark.usefixtures("on_baseline")
async def test_odd_values_round_trip_through_systemd(testbed: Testbed) -> None:
    async with TargetSession.open("twin", target_for(testbed)) as ts:
        node = ts.nodes[1]
        view = await read_unit(node)
        invocation = view.state.invocation_id
        extra = tuple(FlagItem(f"--odd-{k}", value) for k, value in enumerate(ODD_VALUES))
        flags = FlagSet(view.flags.items + extra)
        env = {"PYTHONUNBUFFERED": "1", "ODD_DOLLAR": "$HOME 100% \"q\" 'x' \\b", "ODD_EMPTY": ""}
        # verify_loaded inside compares systemd's loaded argv (D-Bus) and `systemctl show`'s text
        await write_dropin(node, ts.ledger, DropinSpec(view.argv_with(flags), env))
        after = await read_unit(node)
    assert after.flags == flags
    assert after.env == env
    assert after.state.invocation_id == invocation  # written and reloaded, not restarted
    assert not after.state.need_daemon_reload
    assert after.flagbot_dropin is not None and after.flagbot_dropin.path == str(dropin_path(ts.unit))
    assert after.vendor is not None and after.vendor.flags == view.flags


@pytest.mark.usefixtures("on_baseline")
async def test_a_reference_word_is_written_as_written_for_systemd_to_expand(testbed: Testbed) -> None:
    """`--api-key ${SGLANG_API_KEY}` (a variable `Environment=` does not set) goes
    into the drop-in unescaped; systemd loads it as written (the write's round-trip check reads
    the loaded argv over D-Bus), and the unit reads back with the reference, not refused."""
    async with TargetSession.open("twin", target_for(testbed)) as ts:
        node = ts.nodes[1]
        view = await read_unit(node)
        flags = FlagSet((*view.flags.items, FlagItem("--api-key", "${SGLANG_API_KEY}")))
        written = await write_dropin(node, ts.ledger, DropinSpec(view.argv_with(flags)))
        after = await read_unit(node)
    assert " --api-key ${SGLANG_API_KEY}" in written.content and "$${" not in written.content
    assert after.flags == flags
    assert "${SGLANG_API_KEY}" in after.exec_argv


@pytest.mark.usefixtures("on_baseline")
async def test_backups_on_the_host_and_in_the_store(testbed: Testbed, tmp_path: Path) -> None:
    store = await _store(tmp_path)
    try:
        async with TargetSession.open("twin", target_for(testbed), store=store) as ts:
            node = ts.node0
            view = await read_unit(node)
            first = DropinSpec(view.argv_with(FlagSet((*view.flags.items, FlagItem("--log-level", "debug")))))
            one = await write_dropin(node, ts.ledger, first, force=True)
            two = await write_dropin(node, ts.ledger, None, reason="back to vendor")
            host_backup = (await node.run("read-dropin-backup")).text
            rows = await ts.ledger.backups(node.name)
            state = await ts.ledger.state()
            now = await read_unit(node)
    finally:
        await store.aclose()
    assert host_backup == one.content and two.previous == one.content
    assert [row.reason for row in rows][:2] == ["back to vendor", "before write"]
    assert rows[0].content == one.content and len(rows[0].sha256) == 64
    assert state.unit_sha256[node.name] == now.sha256
    assert now.flagbot_dropin is not None and now.flagbot_dropin.text == NEUTRAL
    assert now.flags == view.flags


@pytest.mark.usefixtures("on_baseline")
async def test_a_hand_edit_is_detected_and_named(testbed: Testbed) -> None:
    vendor = testbed.layout.root(1) / "etc/systemd/system/sglang-qwen.service"
    original = vendor.read_text()
    async with TargetSession.open("twin", target_for(testbed)) as ts:
        node = ts.nodes[1]
        await write_dropin(node, ts.ledger, None, force=True)  # flagbot leaves the unit: remembered
        vendor.write_text(original.replace("RestartSec=2", "RestartSec=7"))  # an operator's `vi`
        try:
            await node.run("daemon-reload")
            with pytest.raises(HandEditError) as caught:
                await write_dropin(node, ts.ledger, DropinSpec((await read_unit(node)).exec_argv))
            assert "-RestartSec=2" in caught.value.diff and "+RestartSec=7" in caught.value.diff
            assert node.name in str(caught.value)
            forced = await write_dropin(node, ts.ledger, None, force=True)
            assert not forced.changed
        finally:
            vendor.write_text(original)
            await node.run("daemon-reload")
        assert not (await read_state(node)).need_daemon_reload


@pytest.mark.usefixtures("on_baseline")
async def test_the_neutral_drop_in_gives_back_the_vendor_line(testbed: Testbed) -> None:
    async with TargetSession.open("twin", target_for(testbed)) as ts:
        node = ts.node0
        view = await read_unit(node)
        changed = FlagSet((*view.flags.items, FlagItem("--disable-radix-cache")))
        await write_dropin(node, ts.ledger, DropinSpec(view.argv_with(changed), {"X": "1"}), force=True)
        assert (await read_unit(node)).flags == changed
        await write_dropin(node, ts.ledger, None)
        back = await read_unit(node)
        assert await read_dropin(node) == NEUTRAL
    assert back.flags == view.flags and back.env == view.env
