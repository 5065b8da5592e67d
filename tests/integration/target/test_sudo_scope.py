"""The generated sudoers file is enough for everything flagbot runs on a node, and nothing more."""

from __future__ import annotations

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.dropin import read_dropin, write_dropin
from bot.target.privileged import COMMANDS, render
from bot.target.restart import apply_and_restart, flags_for_nodes, restore_vendor_and_restart
from bot.target.sudoers import sudoers_text, validate_sudoers
from bot.target.table_match import identify
from bot.target.unit import read_state, read_unit
from bot.testbed import Testbed
from tests.integration.conftest import NodeShells
from tests.integration.target.support_control import on_baseline, session_for  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
UNIT = "sglang-qwen.service"

OUTSIDE = [
    "sudo -n /usr/bin/systemctl restart ssh.service",
    "sudo -n /usr/bin/systemctl restart sglang-qwen",
    "sudo -n /usr/bin/systemctl restart sglang-qwen.service",
    "sudo -n /usr/bin/systemctl stop sglang-qwen.service --no-block",
    "sudo -n /usr/bin/systemctl edit sglang-qwen.service",
    "sudo -n /usr/bin/tee /etc/systemd/system/sglang-qwen.service.d/../../evil.service",
    "sudo -n /usr/bin/tee /etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf /etc/passwd",
    "sudo -n /usr/bin/tee -a /etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf",
    "sudo -n /usr/bin/mkdir -p /etc/systemd/system/other.service.d",
    "sudo -n /usr/bin/cat /etc/shadow",
    "sudo -n /usr/bin/rm /etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf",
    "sudo -n -s",
]


async def test_the_nodes_run_the_generated_sudoers_file(testbed: Testbed) -> None:
    installed = (testbed.layout.root(0) / "etc/sudoers.d/flagbot").read_text()
    assert installed == sudoers_text("ops", UNIT)
    validate_sudoers(installed)


@pytest.mark.usefixtures("on_baseline")
async def test_every_privileged_entry_is_allowed_and_the_layer_runs_only_table_commands(
    testbed: Testbed,
) -> None:
    sent: list[tuple[str, str]] = []
    async with session_for(testbed, audit=lambda node, text: sent.append((node, text))) as ts:
        # the target layer's own paths: read, write, apply + restart, back to vendor
        view = await read_unit(ts.node0)
        await write_dropin(ts.node0, ts.ledger, None, force=True)
        await apply_and_restart(
            ts, flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--log-level", "info"))), 2)
        )
        await restore_vendor_and_restart(ts)
        # then every privileged entry on its own, as ops through `sudo -n`
        for node in ts.nodes:
            await node.run("make-dropin-dir")
            current = await read_dropin(node) or ""
            await node.run("write-dropin-backup", input=current)
            await node.run("write-dropin", input=current)
            await node.run("daemon-reload")
        await ts.each(lambda node: node.run("stop"))
        await ts.each(lambda node: node.run("reset-failed"))
        results = await ts.each(lambda node: node.run("start"))
        assert not [r for r in results if isinstance(r, BaseException)], results
        # and the reading entries flagbot's layer uses
        state = await read_state(ts.node0)
        assert state.invocation_id
        for name, params in [
            ("cat", {}),
            ("show", {"properties": ["ActiveState"], "timestamp": "us+utc"}),
            ("unit-property", {"bus_property": "ExecStart"}),
            ("unit-property", {"bus_property": "Environment"}),
            ("read-dropin", {}),
            ("read-dropin-backup", {}),
            ("journal", {"output": "cat", "lines": 5, "all": True, "since": "-1h"}),
            ("journal-invocation", {"invocation": state.invocation_id, "output": "short-iso", "lines": 5}),
            ("gpu-query", {"gpu_fields": ["name", "memory.total"]}),
            ("gpu-list", {}),
        ]:
            result = await ts.node0.run(name, **params)
            assert result.ok, (name, result)
        await testbed.wait_healthy_async(timeout=180)
    privileged = {name for name, command in COMMANDS.items() if command.privileged}
    used = {match[0] for _, text in sent if (match := identify(text, unit=UNIT))}
    assert privileged <= used
    strays = [text for _, text in sent if identify(text, unit=UNIT) is None]
    assert strays == []


@pytest.mark.parametrize("command", OUTSIDE)
async def test_anything_else_is_refused_by_sudo(ssh_ops: NodeShells, command: str) -> None:
    result = await ssh_ops.run(1, command)
    assert result.exit_status != 0
    assert "a password is required" in result.stderr


async def test_the_table_renderings_match_the_sudoers_lines(ssh_ops: NodeShells) -> None:
    """`sudo -n -l <command>` as ops: sudo itself confirms each rendered privileged line."""
    for name, command in COMMANDS.items():
        if not command.privileged:
            continue
        params = {"unit": UNIT} if command.required else {}
        argv = render(name, **params).argv
        check = ["sudo", "-n", "-l", *argv[2:]]
        result = await ssh_ops.run(0, " ".join(check))
        assert result.exit_status == 0, (name, result.stderr)
