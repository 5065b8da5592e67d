"""The generated sudoers file is enough for everything flagbot runs on a node, and nothing more.

The proof (issue 10 item 6, docs/security.md): flagbot's own paths, recorded, use every granted
entry and send nothing outside the table; sudo on each node lists exactly the generated lines for
ops; anything else, `systemctl restart` of the unit included, is refused.
"""

from __future__ import annotations

import re
import shlex

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.dropin import write_dropin
from bot.target.privileged import COMMANDS, dropin_dir, render
from bot.target.restart import apply_and_restart, flags_for_nodes, restart_target, restore_vendor_and_restart
from bot.target.sudoers import sudoers_text, validate_sudoers
from bot.target.table_match import identify
from bot.target.unit import read_unit
from flagbot_lab.testbed import OPS_USER, Testbed
from tests.integration.conftest import NodeShells
from tests.integration.target.support_control import on_baseline, session_for  # noqa: F401
from tests.integration.target.test_restart import trip_start_limit

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


async def _root(bed: Testbed, k: int, *argv: str, input: str = "") -> None:
    """An operator's command as root on node k (not flagbot's, not through ops' sudo)."""
    done = await bed.run_as_root_async(k, list(argv), input=input)
    assert done.returncode == 0, (argv, done.stderr)


@pytest.mark.usefixtures("on_baseline")
async def test_every_grant_is_needed_by_flagbots_own_paths_and_they_send_only_table_commands(
    testbed: Testbed,
) -> None:
    """The proof that the sudoers file grants nothing beyond what flagbot runs: flagbot's own
    paths only (never `node.run(<privileged>)` from the test), every command recorded as sent.

    Node 1 starts without its drop-in directory (removed as root), so the first write creates it;
    a tripped start limit makes the restart reset it. Whatever the directory held is put back."""
    folder = testbed.layout.root(1) / str(dropin_dir(UNIT)).lstrip("/")
    found = sorted(folder.iterdir()) if folder.is_dir() else []
    assert all(path.is_file() for path in found), found
    kept = {path.name: path.read_text() for path in found}
    sent: list[tuple[str, str]] = []
    try:
        await _root(testbed, 1, "rm", "-rf", "--", str(dropin_dir(UNIT)))
        await _root(testbed, 1, "systemctl", "daemon-reload")
        async with session_for(testbed, audit=lambda node, text: sent.append((node, text))) as ts:
            created = await write_dropin(ts.nodes[1], ts.ledger, None, force=True)
            assert created.changed and created.previous is None  # make-dropin-dir
            view = await read_unit(ts.node0)
            flags = flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--log-level", "info"))), 2)
            applied = await apply_and_restart(ts, flags)  # over a drop-in: backup, write, reload; stop, start
            assert applied.ok and all(node.new_invocation for node in applied.nodes), applied
            await trip_start_limit(testbed, ts)
            restarted = await restart_target(ts)
            assert restarted.ok and restarted.nodes[1].reset_failed, restarted
            assert (await restore_vendor_and_restart(ts)).ok
            await testbed.wait_healthy_async(timeout=180)
    finally:  # the directory as found (flagbot's restore left its neutral drop-in and a backup)
        await _root(testbed, 1, "rm", "-rf", "--", str(dropin_dir(UNIT)))
        await _root(testbed, 1, "mkdir", "-p", "--", str(dropin_dir(UNIT)))
        for name, text in kept.items():
            await _root(testbed, 1, "tee", "--", str(dropin_dir(UNIT) / name), input=text)
        await _root(testbed, 1, "systemctl", "daemon-reload")
    matched = [(text, identify(text, unit=UNIT)) for _, text in sent]
    assert [text for text, match in matched if match is None] == []  # nothing outside the table
    privileged = [(text, match[0]) for text, match in matched if match and COMMANDS[match[0]].privileged]
    assert all(shlex.split(text)[:2] == ["sudo", "-n"] for text, _ in privileged), privileged
    granted = {name for name, command in COMMANDS.items() if command.privileged}
    assert {name for _, name in privileged} == granted  # every grant needed, every need granted


def _sudo_list_commands(listing: str, user: str) -> list[str]:
    """The commands of `sudo -l`'s "User <user> may run ..." section; any entry that is not
    `(root) NOPASSWD: <command>` (another run-as user, a password rule, `ALL`) fails."""
    lines = listing.splitlines()
    heads = [
        i
        for i, line in enumerate(lines)
        if re.fullmatch(r"User \S+ may run the following commands on \S+:", line)
    ]
    assert len(heads) == 1 and lines[heads[0]].startswith(f"User {user} may run "), listing
    commands = []
    for line in lines[heads[0] + 1 :]:
        if line.strip():
            entry = re.fullmatch(r" {4}\(root\) NOPASSWD: (/\S.*)", line)
            assert entry is not None and entry[1] != "ALL", f"a grant that is not one exact command: {line!r}"
            commands.append(entry[1])
    return commands


@pytest.mark.parametrize(
    "extra",
    [
        "    (ALL : ALL) ALL",
        "    (root) ALL",
        "    (root) /usr/bin/systemctl restart x.service",
        "    (www) NOPASSWD: /x",
    ],
)
async def test_the_listing_parser_refuses_any_other_grant(extra: str) -> None:
    listing = "User ops may run the following commands on n:\n    (root) NOPASSWD: /usr/bin/systemctl stop x.service\n"
    assert _sudo_list_commands(listing, "ops") == ["/usr/bin/systemctl stop x.service"]
    with pytest.raises(AssertionError, match="not one exact command"):
        _sudo_list_commands(listing + extra + "\n", "ops")


async def test_sudo_lists_exactly_the_generated_lines_for_ops(ssh_ops: NodeShells) -> None:
    """`sudo -n -l` as ops: sudo's own view of every rule that applies to ops on the node (the
    sudoers file, /etc/sudoers, any group rule) is the generated lines and nothing else."""
    rules = [line for line in sudoers_text(OPS_USER, UNIT).splitlines() if line and not line.startswith("#")]
    generated = sorted(line.split(" NOPASSWD: ", 1)[1] for line in rules)
    assert not [command for command in generated if " restart " in f"{command} "]
    for k in range(2):
        result = await ssh_ops.run(k, "sudo -n -l")
        assert result.exit_status == 0, result.stderr
        assert sorted(_sudo_list_commands(result.stdout, OPS_USER)) == generated, result.stdout


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
