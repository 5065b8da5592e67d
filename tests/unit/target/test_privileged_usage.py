"""Every privileged table entry is run by flagbot's own code: a grant no code path uses fails here,
without the testbed (the testbed proof is tests/integration/target/test_sudo_scope.py).

The scan reads bot/ with `ast` and collects the table names the code passes as a literal first
argument to `.run(...)`/`.stream(...)` (a node session) or `render(...)`/`render_params(...)`.
Left out: the table itself, and the testbed and the twin, which are not flagbot's runtime (a
testbed helper running `start` must not count as flagbot needing it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from bot.target.privileged import COMMANDS, NodeCommand

BOT = Path(__file__).resolve().parents[3] / "bot"
SKIPPED = (BOT / "target/privileged.py", BOT / "testbed", BOT / "twin")
CALLS = {"run", "stream", "render", "render_params"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in CALLS or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def table_calls(sources: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """{literal first argument: ["file:line", ...]} of the table-style calls in `sources`."""
    found: dict[str, list[str]] = {}
    for where, text in sources:
        for node in ast.walk(ast.parse(text, filename=where)):
            if isinstance(node, ast.Call) and (name := _called_name(node)) is not None:
                found.setdefault(name, []).append(f"{where}:{node.lineno}")
    return found


def unused_grants(commands: Mapping[str, NodeCommand], calls: Mapping[str, list[str]]) -> list[str]:
    return sorted(name for name, command in commands.items() if command.privileged and name not in calls)


def bot_sources() -> list[tuple[str, str]]:
    files = [
        path
        for path in sorted(BOT.rglob("*.py"))
        if not any(path == skip or path.is_relative_to(skip) for skip in SKIPPED)
    ]
    return [(str(path.relative_to(BOT.parent)), path.read_text()) for path in files]


def test_every_privileged_entry_is_run_by_flagbots_own_code() -> None:
    calls = table_calls(bot_sources())
    assert unused_grants(COMMANDS, calls) == [], "granted by sudoers but never run by flagbot: drop the entry"
    assert "restart" not in COMMANDS  # flagbot restarts as stop every rank, then start every rank


def test_the_scan_sees_every_table_name_the_code_passes() -> None:
    """The literal names at `.run("...")` in bot/ are all table entries: the scan reads the calls
    that matter (a typo'd or removed name would fail at run time, and here first)."""
    runs = {
        name
        for where, text in bot_sources()
        for node in ast.walk(ast.parse(text, filename=where))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and (name := _called_name(node)) is not None
    }
    assert runs and runs <= COMMANDS.keys(), sorted(runs - COMMANDS.keys())


@pytest.mark.parametrize(
    ("source", "used"),
    [
        ('await node.run("stop", timeout=5)', {"stop"}),
        ('node.stream("journal-follow", unit=u)', {"journal-follow"}),
        ('render("daemon-reload").shell', {"daemon-reload"}),
        ('privileged.render_params("start", {})', {"start"}),
        ("await node.run(name)", set()),  # a variable: not counted as a use
        ('"stop"', set()),  # a string alone is no call
        ('print("reset-failed")', set()),
    ],
)
def test_the_scan_counts_table_calls_only(source: str, used: set[str]) -> None:
    assert set(table_calls([("x.py", source)])) == used


def test_a_grant_no_code_runs_is_reported() -> None:
    extra = NodeCommand("reboot", "systemctl", ("reboot",), True, "never run")
    commands = {**COMMANDS, "reboot": extra}
    assert unused_grants(commands, table_calls(bot_sources())) == ["reboot"]
    calls = table_calls([("x.py", 'await node.run("reboot")'), *bot_sources()])
    assert unused_grants(commands, calls) == []
