"""Bad input through the grammar (issue 10 item 5): ten thousand generated command texts.

Each text ends in one of two ways: a specific error (CommandError from the grammar, a
ChangeConflictError when applying, a SystemdQuoteError when a value cannot be written into a
unit), or flag changes whose every name is a flag of the target's SGLang and whose drop-in line
round-trips through systemd's quoting to exactly the argv flagbot meant. Injection attempts
(`;`, `&&`, `$()`, backticks, newlines, quotes, NUL, `%` and `$`, very long words, look-alike
dashes) are in the vocabulary, so they meet every path.
"""

from __future__ import annotations

import shlex

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.commands import CommandError, parse_command
from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import ChangeConflictError, apply_changes
from bot.sglang.launch import parse_launch_text
from bot.target.systemd_quote import (
    SystemdQuoteError,
    parse_environment,
    parse_exec,
    render_environment,
    render_exec,
)

CATALOG = FlagCatalog.load()
UNIT = """[Service]
Environment=NCCL_DEBUG=WARN
ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /models/q --tp 2 --port 30000 \\
  --mem-fraction-static 0.85 --enable-metrics --cuda-graph-bs 4 8 16
"""
BASE = parse_launch_text(UNIT, kind="unit")
FLAG_NAMES = sorted({option for spec in CATALOG for option in spec.option_strings if option.startswith("--")})
INJECTIONS = [
    ";",
    "; reboot",
    "&&",
    "a && rm -rf /",
    "$(reboot)",
    "`id`",
    "x\ny",
    "\n",
    "'",
    '"',
    'it\'s "quoted"',
    "a\x00b",
    "\x00",
    "%n%h%%",
    "$HOME",
    "$$",
    "${PATH}",
    "\\",
    "|",
    ">",
    "x" * 5000,
    "—enable-metrics",  # em dash
    "–tp",  # en dash
    "−−tp",  # minus signs
    "‐‐tp",  # hyphens
    "--tp\u200b",  # zero-width space
    "ｔｒｙ",
    "--ｔｐ",
    "\t",
    "\r",
    "\v",
    "\f",
    "\x1c",
    "\x1d",
    "\x1e",
    "x\x85y",  # NEL
    "x\u2028y",  # LINE SEPARATOR
    "x\u2029y",  # PARAGRAPH SEPARATOR
    "\x9b31m",  # a C1 control (CSI)
    "=",
    "--=",
    "-",
    "--",
]
VERBS = ["try", "add", "set", "remove", "env", "set", "unset", "target=twin", "force=yes", "because=x"]
VALUES = ["0", "-1", "0.85", "2", "1e9", "nan", "inf", "true", "auto", "NAME=v", "NCCL_DEBUG", "A=$(x)"]
WORD = st.one_of(
    st.sampled_from(VERBS),
    st.sampled_from(FLAG_NAMES),
    st.sampled_from(INJECTIONS),
    st.sampled_from(VALUES),
    st.text(max_size=12),
)
TEXT = st.one_of(
    st.lists(WORD, max_size=10).map(lambda words: " ".join(["try", *words])),
    st.lists(WORD, max_size=10).map(" ".join),
    st.text(max_size=120),
)


def _check(text: str) -> str:
    """Drive one text as far as it goes; return which kind of ending it had."""
    try:
        invocation = parse_command(text, catalog=CATALOG)
    except CommandError as exc:
        assert exc.message.strip()
        return "grammar"
    if not invocation.changes:
        return "no-changes"
    for change in invocation.changes:
        if change.flag is not None:
            assert change.flag in CATALOG, change  # only flags the target's SGLang knows
    try:
        flags, env = apply_changes(BASE.flags, BASE.env, invocation.changes, canonical=CATALOG.canonical)
    except ChangeConflictError as exc:
        assert str(exc).strip()
        return "conflict"
    argv = ["/usr/bin/python3", "-m", "sglang.launch_server", *flags.argv()]
    try:
        exec_line = render_exec(argv)
        env_lines = render_environment(env)
    except SystemdQuoteError as exc:
        assert str(exc).strip()
        return "unquotable"
    assert parse_exec(exec_line) == [argv]  # exactly what flagbot meant, word for word
    assert parse_environment(env_lines) == env
    return "written"


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_ten_thousand_texts_end_in_a_specific_error_or_an_exact_drop_in(text: str) -> None:
    _check(text)


def test_every_injection_as_a_value_is_refused_or_round_trips() -> None:
    endings = {}
    for value in INJECTIONS:
        text = f"try add --served-model-name {shlex.quote(value)}"
        endings[value] = _check(text)
    assert set(endings.values()) <= {"grammar", "unquotable", "written"}, endings
    # control characters never reach a unit
    assert endings["a\x00b"] != "written" and endings["x\ny"] != "written"
    # every line break (all of str.splitlines()'s) ends in the grammar, with its name
    for value in ("x\ny", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "x\x85y", "x\u2028y", "x\u2029y"):
        assert endings[value] == "grammar", value
    assert endings["$(reboot)"] == "written"  # a harmless literal: systemd gets `$$(reboot)`, SGLang the text


def test_look_alike_dashes_are_refused_with_the_plain_spelling() -> None:
    for word in ("—enable-metrics", "–tp", "−−tp", "‐‐tp"):
        try:
            parse_command(f"try add {word}", catalog=CATALOG)
        except CommandError as exc:
            assert "--" in exc.message
        else:
            raise AssertionError(f"{word!r} was accepted")
