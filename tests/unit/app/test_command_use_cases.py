"""Each command and subcommand of the grammar has exactly one application function (bot/app/commands.py)."""

from __future__ import annotations

import pytest

from bot.app.commands import COMMAND_USE_CASES, use_case
from bot.commands import COMMANDS, parse_command


def _keys() -> list[str]:
    keys: list[str] = []
    for spec in COMMANDS:
        keys += [f"{spec.name} {sub.name}" for sub in spec.subs] if spec.subs else [spec.name]
    return keys


def test_every_command_and_subcommand_has_its_function_and_no_other_key_exists() -> None:
    assert sorted(COMMAND_USE_CASES) == sorted(_keys())


def test_the_functions_live_in_the_application_layer() -> None:
    for key, function in COMMAND_USE_CASES.items():
        module = function.__module__
        assert module.startswith("bot.app.") or key == "help", (key, module)


@pytest.mark.parametrize(
    ("words", "function"),
    [
        ("status", "status"),
        ("checks pause 3", "checks_command"),
        ("checks", "checks_command"),
        ("baseline", "read_records"),
        ("baseline pin", "run_playbook"),
        ("try --enable-metrics", "run_playbook"),
        ("rollback", "rollback_or_reconcile"),
    ],
)
def test_a_parsed_command_finds_its_function(words: str, function: str) -> None:
    assert use_case(parse_command(words)).__name__ == function
