"""systemd quoting: what flagbot writes is read back by the foundation's unit parser as the same argv."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sglang.launch import parse_launch_text
from bot.target.systemd_quote import (
    SystemdQuoteError,
    env_references,
    parse_environment,
    parse_exec,
    quote_exec_word,
    render_environment,
    render_exec,
    substitute_env,
)

# printable text: no control characters or line breaks (refused) and no lone surrogates (not text)
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=40)
tricky = st.text(st.sampled_from(list("%$\"'\\ ;a-=é{}`#")), max_size=12)
words = st.one_of(printable, tricky)


@given(st.lists(words, max_size=8))
def test_exec_round_trip(args: list[str]) -> None:
    argv = ["/usr/bin/python3", *args]
    assert parse_exec(render_exec(argv)) == [argv]


@given(st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True), words, max_size=5))
def test_environment_round_trip(env: dict[str, str]) -> None:
    assert parse_environment(render_environment(env)) == env


@given(st.lists(words, max_size=6))
def test_a_drop_in_line_parses_back_through_the_launch_parser(values: list[str]) -> None:
    """The whole foundation path: unit text -> LaunchLine -> flags, `$$` resolved by systemd."""
    argv = ["/usr/bin/python3", "-m", "sglang.launch_server"]
    for index, value in enumerate(values):
        argv += [f"--flag-{index}", value if value and not value.startswith("-") else f"v{value}"]
    text = f"[Service]\nExecStart=\nExecStart={render_exec(argv)}\n"
    line = parse_launch_text(text, kind="unit")
    assert [word.replace("$$", "$") for word in line.flags.argv()] == argv[3:]


@pytest.mark.parametrize(
    ("word", "written"),
    [
        ("plain-word_1.0/x:y,z=@+", "plain-word_1.0/x:y,z=@+"),
        ("a b", '"a b"'),
        ("100%", '"100%%"'),
        ("$HOME", '"$$HOME"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("it's", '"it\'s"'),
        ("", '""'),
        (";", '";"'),
        ("ünï", '"ünï"'),
    ],
)
def test_quoting_examples(word: str, written: str) -> None:
    assert quote_exec_word(word) == written


@pytest.mark.parametrize(
    "bad",
    [
        "a\nb",
        "tab\there",
        "cr\r",
        "nul\x00",
        "del\x7f",
        "esc\x1b[0m",
        "vt\v",
        "ff\f",
        "fs\x1c",
        "gs\x1d",
        "rs\x1e",
        "nel\x85",
        "csi\x9b",
        "ls\u2028ActiveState=failed",
        "ps\u2029",
    ],
)
def test_control_characters_are_refused(bad: str) -> None:
    with pytest.raises(SystemdQuoteError, match="refuses"):
        render_exec(["/usr/bin/python3", "--x", bad])
    with pytest.raises(SystemdQuoteError, match="refuses"):
        render_environment({"X": bad})


def test_environment_is_not_dollar_escaped_but_percent_is() -> None:
    assert render_environment({"A": "$HOME 100%"}) == ['"A=$HOME 100%%"']
    with pytest.raises(SystemdQuoteError, match="name"):
        render_environment({"BAD NAME": "x"})


def test_program_with_an_exec_prefix_is_refused() -> None:
    with pytest.raises(SystemdQuoteError, match="prefix"):
        render_exec(["-/usr/bin/python3"])
    with pytest.raises(SystemdQuoteError):
        render_exec([])


def test_references_and_substitution() -> None:
    assert env_references("${A}/x$B$$C") == ["A", "B"]
    assert substitute_env("${A}/x$B$$C", {"A": "1", "B": "2"}) == "1/x2$C"
    with pytest.raises(KeyError):
        substitute_env("$MISSING", {})


@pytest.mark.parametrize(("char", "name"), [("\x85", "U+0085"), ("\u2028", "U+2028"), ("\u2029", "U+2029")])
def test_a_unicode_line_break_is_refused_by_name(char: str, name: str) -> None:
    for write in (lambda v: render_exec(["/usr/bin/python3", v]), lambda v: render_environment({"X": v})):
        with pytest.raises(SystemdQuoteError, match=re.escape(name) + ".*a line break"):
            write(f"a{char}b")
    assert len(f"a{char}b".splitlines()) == 2  # why: Python's readers would see two lines
