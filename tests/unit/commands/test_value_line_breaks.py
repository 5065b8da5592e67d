"""Flag and environment values are one line (bot/commands/values.py `value_problem`): every line
break `str.splitlines()` knows, and every other control character, is refused by the grammar
with its name, before anything else sees the value."""

from __future__ import annotations

import pytest

from bot.commands import CommandError, parse_command
from bot.commands.tokens import LINE_BREAKS, value_problem
from bot.sglang.catalog import FlagCatalog

CATALOG = FlagCatalog.load()


def test_the_list_is_every_line_break_python_knows() -> None:
    splitting = {chr(code) for code in range(0x110000) if len(f"a{chr(code)}b".splitlines()) == 2}
    assert splitting == set(LINE_BREAKS)


@pytest.mark.parametrize("char", sorted(LINE_BREAKS))
def test_a_line_break_in_a_flag_value_or_an_env_value_is_refused_by_name(char: str) -> None:
    for words in (
        ["try", "set", "--served-model-name", f"a{char}b"],
        ["try", "add", "--cuda-graph-bs", "4", f"8{char}"],
        ["try", "env", "set", f"NCCL_DEBUG=INFO{char}ActiveState=failed"],
    ):
        with pytest.raises(CommandError) as raised:
            parse_command(words, catalog=CATALOG)
        assert f"{LINE_BREAKS[char]}, a line break; a value must be one line" in raised.value.message, words


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("a\x00b", "control character U+0000"),
        ("a\x1bb", "control character U+001B"),
        ("a\x7fb", "control character U+007F"),
        ("a\x9bb", "control character U+009B"),
        ("a\ud800b", "lone surrogate (U+D800)"),
    ],
)
def test_other_control_characters_and_surrogates_are_named(value: str, says: str) -> None:
    problem = value_problem(value)
    assert problem is not None and says in problem
    with pytest.raises(CommandError) as raised:  # the word check, before the grammar reads the value
        parse_command(["try", "env", "set", f"NCCL_DEBUG={value}"], catalog=CATALOG)
    assert says in raised.value.message


def test_ordinary_values_pass() -> None:
    for value in ("INFO", "a b", "é", "100%", "$HOME", "--not-a-flag"):
        assert value_problem(value) is None
    invocation = parse_command(["try", "env", "set", "NCCL_DEBUG=INFO"], catalog=CATALOG)
    assert invocation.changes[0].env_value == "INFO"
