"""`wait=DURATION`: taken by the commands that take the target's lease (at most 4 h), refused by
the read-only ones as an option they do not have; `run` (free options) checks it in the app layer."""

from __future__ import annotations

import pytest

from bot.commands import CommandError, parse_command


@pytest.mark.parametrize(
    "words",
    [
        ["try", "--enable-metrics", "wait=30m"],
        ["revert", "wait=2h"],
        ["restart", "wait=90s"],
        ["isolate", "max_running_requests>=48", "wait=10m"],
        ["verify", "max_running_requests>=48", "wait=1h"],
        ["baseline", "pin", "wait=4h"],
    ],
)
def test_lease_taking_commands_take_wait(words: list[str]) -> None:
    assert parse_command(words).options["wait"] == words[-1].split("=", 1)[1]


@pytest.mark.parametrize(
    ("value", "rule"), [("5h", "at most 4h"), ("soon", "not a duration"), ("-1m", "not a duration")]
)
def test_a_bad_or_too_long_wait_is_refused_naming_the_rule(value: str, rule: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(["try", "--enable-metrics", f"wait={value}"])
    assert "wait" in caught.value.render() and rule in caught.value.render()


@pytest.mark.parametrize("words", [["status"], ["log"], ["hypothesis", "list"]])
def test_read_only_commands_refuse_wait(words: list[str]) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command([*words, "wait=10m"])
    assert "wait" in caught.value.render()
