"""The command table: its rules, rendering and quoting, and the sudoers file generated from it."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.target.privileged import (
    COMMANDS,
    PROGRAMS,
    NodeCommand,
    Opt,
    ParamError,
    _check_table,
    render,
    unit_bus_path,
)
from bot.target.sudoers import sudoers_text, validate_sudoers

UNIT = "sglang-qwen.service"


@pytest.fixture
def extra_command() -> Iterator[dict[str, NodeCommand]]:
    """Lets a test add a (bad) entry to the table and removes it afterwards."""
    table: dict[str, NodeCommand] = COMMANDS  # type: ignore[assignment]
    added: dict[str, NodeCommand] = {}
    yield added
    for name in added:
        table.pop(name, None)


def _add(extra: dict[str, NodeCommand], command: NodeCommand) -> None:
    extra[command.name] = command
    COMMANDS[command.name] = command  # type: ignore[index]


def test_the_table_keeps_its_rules() -> None:
    _check_table()
    for command in COMMANDS.values():
        assert command.program in PROGRAMS
        if command.privileged:
            assert command.args, command.name
            assert not command.optional and command.required <= {"unit"}, command.name


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (NodeCommand("bad1", "systemctl", ("daemon-reexec",), True, "a literal argument only"), None),
        (
            NodeCommand("bad2", "systemctl", ("start", "{since}"), True, "caller value"),
            "literals and the unit",
        ),
        (NodeCommand("bad3", "systemctl", ("start", Opt("-n", "lines")), True, "option"), "literals"),
        (NodeCommand("bad4", "rm", ("-rf", "{unit}"), True, "no absolute path"), "absolute path"),
        (NodeCommand("bad5", "systemctl", ("show", "{nonsense}"), False, "no validator"), "validator"),
        (NodeCommand("bad6", "systemctl", (), True, "no arguments"), "literals and the unit"),
    ],
)
def test_a_bad_extension_fails_the_table_check(
    extra_command: dict[str, NodeCommand], command: NodeCommand, message: str | None
) -> None:
    if command.program == "rm" and "rm" in PROGRAMS:
        command = NodeCommand(command.name, "shutdown", command.args, True, command.doc)
    _add(extra_command, command)
    if message is None:  # a literal argument only is allowed: one exact line
        _check_table()
        return
    with pytest.raises(AssertionError, match=message):
        _check_table()


def test_privileged_commands_render_with_sudo_and_absolute_paths() -> None:
    assert render("stop", unit=UNIT).argv == ["sudo", "-n", "/usr/bin/systemctl", "stop", UNIT]
    assert render("stop", unit=UNIT, sudo=False).argv == ["/usr/bin/systemctl", "stop", UNIT]
    assert render("write-dropin", unit=UNIT).argv[-1] == f"/etc/systemd/system/{UNIT}.d/50-flagbot.conf"
    assert render("write-dropin-backup", unit=UNIT).argv[-1].endswith("50-flagbot.conf.bak")
    assert render("make-dropin-dir", unit=UNIT).argv[-2:] == ["-p", f"/etc/systemd/system/{UNIT}.d"]


def test_unprivileged_commands_run_by_name_without_sudo() -> None:
    rendered = render("show", unit=UNIT, properties=["ExecStart", "NRestarts"], timestamp="us+utc")
    assert rendered.argv == ["systemctl", "show", UNIT, "-p", "ExecStart,NRestarts", "--timestamp", "us+utc"]
    journal = render("journal", unit=UNIT, output="cat", all=True, lines=5)
    assert journal.argv == ["journalctl", "-u", UNIT, "--no-pager", "-o", "cat", "--all", "-n", "5"]
    assert render("journal", unit=UNIT, all=False).argv == ["journalctl", "-u", UNIT, "--no-pager"]


def test_rendered_shell_text_quotes_for_the_remote_shell() -> None:
    rendered = render("journal", unit=UNIT, since="2026-11-29 17:27:04")
    assert "'2026-11-29 17:27:04'" in rendered.shell
    assert shlex.split(rendered.shell) == rendered.argv


def test_unit_bus_path_is_systemd_escaped() -> None:
    assert unit_bus_path(UNIT) == "/org/freedesktop/systemd1/unit/sglang_2dqwen_2eservice"
    assert unit_bus_path("a@b_1.service") == "/org/freedesktop/systemd1/unit/a_40b_5f1_2eservice"


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "no node command"),
        ("restart", {"unit": UNIT}, "no node command"),  # flagbot restarts as stop, then start
        ("stop", {}, "needs unit"),
        ("stop", {"unit": "x.service; reboot"}, "not a systemd service name"),
        ("stop", {"unit": "sglang-qwen"}, "not a systemd service name"),
        ("stop", {"unit": "../../etc/passwd.service"}, "not a systemd service name"),
        ("show", {"unit": UNIT, "properties": []}, "at least one"),
        ("show", {"unit": UNIT, "properties": ["Exec Start"]}, "not a valid name"),
        ("show", {"unit": UNIT, "properties": ["A"], "timestamp": "now"}, "not one of"),
        ("journal", {"unit": UNIT, "lines": 0}, "count"),
        ("journal", {"unit": UNIT, "lines": True}, "count"),
        ("journal", {"unit": UNIT, "since": "$(reboot)"}, "journalctl time"),
        ("journal-invocation", {"invocation": "xyz"}, "InvocationID"),
        ("unit-property", {"unit": UNIT, "bus_property": "ExecStop"}, "not one of"),
        ("write-dropin", {"unit": UNIT, "dropin": "/etc/passwd"}, "takes no parameter"),
    ],
)
def test_parameters_are_validated(name: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        render(name, **params)


def test_sudoers_names_every_privileged_command_exactly() -> None:
    text = sudoers_text("ops", UNIT)
    rules = [line for line in text.splitlines() if line and not line.startswith("#")]
    privileged_names = [c for c in COMMANDS.values() if c.privileged]
    assert len(rules) == len(privileged_names)
    for command, rule in zip(privileged_names, rules, strict=True):
        argv = (
            render(command.name, unit=UNIT, sudo=False).argv
            if command.required
            else render(command.name, sudo=False).argv
        )
        assert rule == f"ops ALL=(root) NOPASSWD: {' '.join(argv)}"
    assert "*" not in text and "ALL=(ALL)" not in text
    assert "ops ALL=(root) NOPASSWD: /usr/bin/systemctl stop sglang-qwen.service" in rules
    assert "ops ALL=(root) NOPASSWD: /usr/bin/systemctl start sglang-qwen.service" in rules
    assert not [rule for rule in rules if " restart " in f"{rule} "]  # never granted: docs/security.md


def test_sudoers_escapes_sudo_specials_and_refuses_bad_names() -> None:
    text = sudoers_text("ops", "a:b.service")
    assert r"/usr/bin/systemctl stop a\:b.service" in text
    with pytest.raises(ParamError, match="login name"):
        sudoers_text("ops ALL", UNIT)
    with pytest.raises(ParamError):
        sudoers_text("ops", "bad unit.service")


@pytest.mark.skipif(
    shutil.which("visudo") is None and not Path("/usr/sbin/visudo").exists(), reason="no visudo"
)
def test_sudoers_is_accepted_by_visudo() -> None:
    validate_sudoers(sudoers_text("ops", UNIT))
    validate_sudoers(sudoers_text("flagbot", "sglang@0.service"))
    with pytest.raises(ValueError, match="visudo refused"):
        validate_sudoers("ops ALL=(root) NOPASSWD /usr/bin/systemctl\n")
