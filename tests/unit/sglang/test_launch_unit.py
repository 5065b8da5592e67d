"""systemd unit reading: quoting, escapes, specifiers, prefixes, continuations, Environment=, resets."""

from __future__ import annotations

import pytest

from bot.sglang.flagset import FlagItem
from bot.sglang.launch import LaunchParseError, parse_launch_text
from bot.sglang.launch_unit import parse_unit, systemd_split

PY = "/usr/bin/python3 -m sglang.launch_server"


def unit(exec_args: str, *, extra: str = "") -> str:
    return f"[Unit]\nDescription=t\n\n[Service]\n{extra}ExecStart={PY} {exec_args}\n\n[Install]\nWantedBy=multi-user.target\n"


def values(exec_args: str) -> list[object]:
    return [item.value for item in parse_launch_text(unit(exec_args)).flags.items]


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ('"a b"', "a b"),
        ("'x'", "x"),
        ("'a b'", "a b"),
        (r'"say \"hi\""', 'say "hi"'),
        (r"\"bare\"", '"bare"'),
        (r"'it\'s'", "it's"),  # systemd decodes escapes inside single quotes too (unlike sh)
        ('--x="a b"', None),  # checked below: the quote joins the word it opens in
        ("100%%", "100%"),
        ('"%%i and %i"', "%i and %i"),
        ("$VAR", "$VAR"),
        ("${VAR}", "${VAR}"),
        ("$$", "$$"),
        (r"a\tb", "a\tb"),
        (r"\x41\101\u00e9", "AAé"),
        (r"a\sb", "a b"),
        (r"C:\dir", r"C:\dir"),  # unknown escape: systemd warns and keeps it
        (r"\x4", r"\x4"),
        ('""', ""),
    ],
)
def test_systemd_unquoting(written: str, value: str | None) -> None:
    if value is None:
        assert parse_launch_text(unit(written)).flags.items == (FlagItem("--x", "a b"),)
    else:
        assert values(f"--v {written}") == [value]


def test_split_words_directly() -> None:
    assert systemd_split(" a  \"b c\"d 'e'\t\\\\ ", line=1, setting="ExecStart") == ["a", "b cd", "e", "\\"]
    assert systemd_split("", line=1, setting="ExecStart") == []


@pytest.mark.parametrize("prefix", ["-", "@", "+", "!", "!!", ":", "-+", "@-"])
def test_exec_prefixes_are_not_part_of_the_path(prefix: str) -> None:
    argv0 = "sglang-argv0 " if "@" in prefix else ""
    text = f"[Service]\nExecStart={prefix}/usr/bin/python3 {argv0}-m sglang.launch_server --a 1\n"
    line = parse_launch_text(text)
    assert line.entrypoint == PY
    assert line.flags.items == (FlagItem("--a", "1"),)


def test_multi_line_continuation_with_comment_lines_inside() -> None:
    text = (
        "[Service]\n"
        f"ExecStart={PY} \\\n"
        "  --a 1 \\\n"
        "# a comment inside the continuation is skipped\n"
        "; so is this one\n"
        "  --b \\\n"
        "  --c 2 3\n"
        "Restart=always\n"
    )
    line = parse_launch_text(text)
    assert line.flags.to_json() == [
        {"flag": "--a", "value": "1"},
        {"flag": "--b", "value": None},
        {"flag": "--c", "value": ["2", "3"]},
    ]
    assert line.line == 2


def test_escaped_backslash_at_line_end_is_not_a_continuation() -> None:
    text = f"[Service]\nExecStart={PY} --a x\\\\\nRestart=always\n"
    assert values_of(text) == ["x\\"]


def values_of(text: str) -> list[object]:
    return [item.value for item in parse_launch_text(text).flags.items]


def test_crlf_unit() -> None:
    text = unit("--a 1 \\\n  --b").replace("\n", "\r\n")
    assert parse_launch_text(text).flags.items == (FlagItem("--a", "1"), FlagItem("--b"))


def test_environment_lines_several_items_quoted_and_reset() -> None:
    extra = (
        "Environment=\"A=1 2\" B=x 'C=y z'\n"
        "Environment=D=%%d E=$HOME\n"
        "Environment=NOEQUALS F=\n"
        "Environment=B=override\n"
    )
    line = parse_launch_text(unit("--a", extra=extra))
    assert line.env == {"A": "1 2", "B": "override", "C": "y z", "D": "%d", "E": "$HOME", "F": ""}
    reset = parse_launch_text(unit("--a", extra="Environment=A=1\nEnvironment=\nEnvironment=G=2\n"))
    assert reset.env == {"G": "2"}


def test_empty_exec_start_resets_and_the_last_after_the_reset_wins() -> None:
    text = f"[Service]\nExecStart={PY} --first\n[Service]\nExecStart=\nExecStart={PY} --second\n"
    assert parse_launch_text(text).flags.items == (FlagItem("--second"),)
    with pytest.raises(LaunchParseError, match="no ExecStart="):
        parse_launch_text(f"[Service]\nExecStart={PY} --a\nExecStart=\n")


def test_last_sglang_exec_start_wins_over_earlier_ones() -> None:
    text = f"[Service]\nType=oneshot\nExecStart={PY} --one\nExecStart={PY} --two\nExecStart=/bin/true\n"
    line = parse_launch_text(text)
    assert line.flags.items == (FlagItem("--two"),)
    assert line.line == 4


def test_settings_outside_service_are_ignored() -> None:
    text = f"[Unit]\nExecStart=/bin/false\nEnvironment=X=1\n[Service]\nExecStart={PY} --a\n"
    line = parse_launch_text(text)
    assert line.env == {}
    assert line.flags.items == (FlagItem("--a"),)


def test_bare_exec_start_paste_without_sections() -> None:
    line = parse_launch_text(f"Environment=A=1\nExecStart={PY} --a")
    assert line.kind == "unit"
    assert line.env == {"A": "1"}


def test_semicolon_separates_commands_and_escaped_one_does_not() -> None:
    line = parse_launch_text(f"[Service]\nExecStart=/bin/echo hi ; {PY} --a \\;\n")
    assert line.flags.items == (FlagItem("--a", ";"),)


def test_env_program_in_exec_start_gives_env() -> None:
    line = parse_launch_text(f"[Service]\nExecStart=/usr/bin/env A=1 B=2 {PY} --a\n")
    assert line.env == {"A": "1", "B": "2"}
    assert line.entrypoint == PY


def test_inline_assignment_is_not_env_in_a_unit() -> None:
    line = parse_launch_text(f"[Service]\nExecStart=A=1 {PY} --a\n")
    assert line.env == {}
    assert line.wrapper == ["A=1"]


def test_docker_in_exec_start_takes_container_env_only() -> None:
    text = (
        "[Service]\nEnvironment=DOCKER_HOST=unix:///x\n"
        "ExecStart=/usr/bin/docker run --rm -e HF_TOKEN_FILE=/t --gpus all lmsysorg/sglang:v0.5.10 "
        "python3 -m sglang.launch_server --model-path /m\n"
    )
    line = parse_launch_text(text)
    assert line.kind == "unit"
    assert line.env == {"HF_TOKEN_FILE": "/t"}
    assert line.entrypoint == "docker run ... lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (f'ExecStart={PY} --x "abc', r"line 2: unterminated double quote in ExecStart="),
        (f"ExecStart={PY} --x 'abc", r"line 2: unterminated single quote in ExecStart="),
        ('Environment="A=1\nExecStart=' + PY, r"line 2: unterminated double quote in Environment="),
        ("ExecStart=- --a", r"line 2: ExecStart= has no executable after the prefix '-'"),
    ],
)
def test_malformed_unit_names_problem_and_line(body: str, message: str) -> None:
    with pytest.raises(LaunchParseError, match=message):
        parse_launch_text(f"[Service]\n{body}\n")


def test_unterminated_quote_line_points_at_the_start_of_a_continued_setting() -> None:
    text = f"[Unit]\nDescription=x\n[Service]\nExecStart={PY} \\\n  --a \\\n  --b 'oops\n"
    with pytest.raises(LaunchParseError, match=r"^line 4: unterminated single quote"):
        parse_launch_text(text)


def test_parse_unit_exposes_commands_and_env() -> None:
    service = parse_unit("[Service]\nEnvironment=A=1\nExecStart=/bin/a x\nExecStart=/bin/b\n")
    assert [command.argv for command in service.commands] == [["/bin/a", "x"], ["/bin/b"]]
    assert [command.line for command in service.commands] == [3, 4]
    assert service.env == {"A": "1"}
