"""Every text a user can type is answered before Slack's ack (issue 17 item 9): a property test
over the whole grammar.

For every command and subcommand of the registry, texts are generated from the command's own
options, positionals, flag changes and expectations, with values that broke flagbot after the
ack before (`since=99999999999d` raised OverflowError, a lone surrogate UnicodeEncodeError) and
their relatives: huge and negative numbers, NUL, every line break `str.splitlines()` knows, lone
surrogates, very long words, unbalanced quotes, unknown options, look-alike digits. Each text
goes through what the Slack handler does before it acks (`dispatch.parse` and `dispatch.check`)
and ends one of two ways: a CommandError with a specific message, or an invocation whose every
value the application layer then accepts without raising: durations become a `timedelta` and
a journal time, numbers are within their limits, ids fit the database's columns, weeks have a
start and an end, every text encodes as UTF-8 and holds no line break, flag changes render into
a drop-in, and the playbook's parameters or the grep and bench requests are built. Never any
other exception. The CLI's words (a list, no tokenizer) take the same path.
"""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.app.bench import BenchRequest
from bot.app.digest import week_of
from bot.app.playbooks import builtin_params, runs_playbook
from bot.app.target_commands import GrepRequest
from bot.app.validate import check_invocation
from bot.commands import COMMANDS, CommandError, Invocation, describe_invocation, parse_command
from bot.commands.registry import CommandSpec, Positional
from bot.commands.target_catalog import catalog_for
from bot.commands.tokens import LINE_BREAKS
from bot.commands.values import MAX_DURATION_S, MAX_ID, MAX_INT
from bot.config.loader import settings_from_mapping
from bot.config.section_base import parse_duration
from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import ChangeConflictError, apply_changes
from bot.sglang.launch import parse_launch_text
from bot.slack.dispatch import check, parse
from bot.target.grep import since_from_duration
from bot.target.systemd_quote import render_environment, render_exec

SETTINGS = settings_from_mapping(
    {
        "default_target": "lab",
        "targets": {
            name: {
                "unit": "sglang.service",
                "base_url": "http://127.0.0.1:9",
                "nodes": [{"host": "127.0.0.1", "port": 9}],
            }
            for name in ("lab", "prod")
        },
    },
    source="test",
)
CATALOG = FlagCatalog.load()
BASE = parse_launch_text(
    "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path /m --tp 2\n", kind="unit"
)
BREAKS = sorted({*LINE_BREAKS, "\t"})
NASTY = [
    "99999999999d",
    "99999999999",
    "9" * 400,
    "1" + "0" * 30,
    "2147483648",
    "2147483647",
    "#99999999999",
    "-1",
    "-5d",
    "0",
    "00",
    "0.5",
    "1e999",
    "nan",
    "inf",
    "-inf",
    "366d",
    "367d",
    "8784h",
    "527041m",
    "1.5d",
    "999999999999.999999999d",
    "25h",
    "١٢",  # Arabic-Indic digits: `\d` in Python, not a number a user meant
    "１２",  # fullwidth digits
    "9999-W52",
    "0000-W01",
    "1999-W01",
    "2026-W53",
    "2026-W48",
    "\ud800",
    "a\udfffb",
    "\udcff",  # what a non-UTF-8 byte in a CLI argument becomes (surrogateescape)
    "\x00",
    "a\x00b",
    *(f"a{char}b" for char in BREAKS),
    *BREAKS,
    "\x1b[31m",
    "\x7f",
    "x" * 5000,
    "x" * 200,
    '"',
    "'",
    'a"b',
    "'open",
    '"open',
    "“curly”",
    "",
    "=",
    "--",
    "—tp",
    "baseline",
    "open",
    "quick",
    "nope",
    "$(id)",
    "%n",
]


def _option_words(spec: CommandSpec) -> st.SearchStrategy[str]:
    names = [opt.name for opt in spec.options] + ["bogus", "target", "since", "limit"]
    value = st.one_of(st.sampled_from(NASTY), st.text(max_size=8))
    return st.one_of(
        st.tuples(st.sampled_from(names), value).map(lambda pair: f"{pair[0]}={pair[1]}"),
        st.tuples(st.sampled_from(names), value).map(lambda pair: f"--{pair[0]} {shlex.quote(pair[1])}"),
    )


def _change_words() -> st.SearchStrategy[str]:
    flags = [
        "--tp",
        "--mem-fraction-static",
        "--max-running-requests",
        "--served-model-name",
        "--cuda-graph-bs",
    ]
    value = st.sampled_from(NASTY).map(shlex.quote)
    return st.one_of(
        st.tuples(st.sampled_from(["add", "set"]), st.sampled_from(flags), value).map(" ".join),
        st.tuples(st.sampled_from(flags), value).map(lambda pair: f"{pair[0]}={pair[1]}"),
        st.sampled_from(["NCCL_DEBUG", "X"]).flatmap(lambda name: value.map(lambda v: f"env set {name}={v}")),
    )


def _expectation_words() -> st.SearchStrategy[str]:
    metric = st.sampled_from(["max_running_requests", "output_throughput", "startup_error", "bogus_metric"])
    op = st.sampled_from([">=", "<=", "==", "!=", ">", "<", "=>", "="])
    return st.tuples(metric, op, st.sampled_from([*NASTY, "-2%", "48", "none"])).map(
        lambda parts: parts[0] + parts[1] + shlex.quote(parts[2])
    )


def _texts(spec: CommandSpec) -> st.SearchStrategy[str]:
    head = [spec.name] if not spec.subs else [spec.name, *(f"{spec.name} {sub.name}" for sub in spec.subs)]
    word = st.one_of(
        _option_words(spec),
        st.sampled_from(NASTY).map(shlex.quote),
        st.sampled_from(NASTY),  # unquoted: quotes left open, words split where the text says
        _change_words(),
        _expectation_words(),
        st.text(max_size=10),
    )
    return st.tuples(st.sampled_from(head), st.lists(word, max_size=5)).map(
        lambda parts: " ".join([parts[0], *parts[1]])
    )


TEXTS = st.sampled_from(COMMANDS).flatmap(_texts)


def _before_the_ack(text: str) -> Invocation | None:
    """What on_command does before its ack: None for a specific refusal."""
    try:
        invocation = parse(SETTINGS, text)
        check(SETTINGS, invocation)
    except CommandError as exc:
        _specific(exc)
        return None
    return invocation


def _specific(exc: CommandError) -> None:
    assert exc.message.strip() and "something went wrong" not in exc.message
    exc.render().encode("utf-8")  # the ack's text can be sent


def _accepted(invocation: Invocation) -> None:
    """What the application does with the values after the ack, done here: none may raise."""
    described = json.dumps(describe_invocation(invocation), ensure_ascii=False)
    described.encode("utf-8")
    for value in _strings(invocation):
        value.encode("utf-8")
        assert not set(value) & set(LINE_BREAKS), value
    for option in invocation.spec.options:
        value = invocation.options.get(option.name)
        if value is None:
            continue
        if option.kind == "duration":
            window = parse_duration(value)
            assert isinstance(window, timedelta)
            assert window.total_seconds() <= (option.maximum or MAX_DURATION_S)
            assert datetime.now(UTC) - window < datetime.now(UTC) + timedelta(seconds=1)
            since_from_duration(window.total_seconds())
        elif option.kind == "int":
            assert 1 <= int(value) <= (option.maximum or MAX_INT)
        elif option.kind == "id" and value not in option.choices:
            assert 1 <= int(value) <= MAX_ID
        elif option.kind == "list":
            assert all(1 <= int(part) <= (option.maximum or MAX_INT) for part in value.split(","))
        elif option.kind == "week":
            week = week_of(SETTINGS, value)
            assert week.start(UTC) < week.end(UTC)
            week.previous()
    for key, value in invocation.positionals.items():
        slot = next(s for s in invocation.spec.positionals + _sub_positionals(invocation) if s.name == key)
        if slot.kind == "id" and value not in slot.choices:
            assert 1 <= int(str(value)) <= MAX_ID
    if invocation.changes:
        try:
            flags, env = apply_changes(BASE.flags, BASE.env, invocation.changes, canonical=CATALOG.canonical)
        except ChangeConflictError:
            pass  # found when the change is applied, with its own message (issue 10)
        else:
            render_exec(["/usr/bin/python3", "-m", "sglang.launch_server", *flags.argv()])
            render_environment(env)
    if invocation.name == "grep":
        GrepRequest.of(invocation)
    if invocation.name == "bench":
        BenchRequest.of(SETTINGS, invocation)
    if runs_playbook(invocation) and invocation.name != "run":
        json.dumps(builtin_params(invocation)[1], ensure_ascii=False).encode("utf-8")


def _sub_positionals(invocation: Invocation) -> tuple[Positional, ...]:
    sub = invocation.spec.sub(invocation.sub) if invocation.sub else None
    return sub.positionals if sub else ()


def _strings(invocation: Invocation) -> list[str]:
    found: list[str] = [*invocation.options.values()]
    for value in invocation.positionals.values():
        found.extend([value] if isinstance(value, str) else value)
    for change in invocation.changes:
        found.extend(v for v in (change.flag, change.env_name, change.env_value) if v is not None)
        value = change.value
        found.extend([] if value is None else [value] if isinstance(value, str) else value)
    found.extend(str(e) for e in invocation.expectations)
    return found


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_every_text_is_refused_specifically_or_accepted_by_the_application(text: str) -> None:
    invocation = _before_the_ack(text)
    if invocation is not None:
        _accepted(invocation)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(COMMANDS).flatmap(
        lambda spec: st.lists(st.sampled_from(NASTY), max_size=4).map(lambda words: [spec.name, *words])
    )
)
def test_the_cli_words_take_the_same_checks(words: list[str]) -> None:
    """The CLI hands its raw words over (no tokenizer): a surrogate-escaped byte, a newline in a
    quoted argument, a huge number are refused there too."""
    try:
        invocation = parse_command(words, catalog=catalog_for(SETTINGS, words).catalog)
        check_invocation(SETTINGS, invocation)
    except CommandError as exc:
        _specific(exc)
        return
    _accepted(invocation)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("grep x since=99999999999d", "at most 366d"),
        ("log since=367d", "at most 366d"),
        ("bench wait=25h", "at most 1d"),
        ("grep x lines=1001", "at most 1000"),
        ("log limit=99999999999", "expected a positive whole number"),
        ("bench repeats=101", "at most 100"),
        ("bench concurrency=1,5000", "at most 4096"),
        ("hypothesis show 2147483648", "at most 2147483647"),
        ("revert 99999999999", "at most 2147483647"),
        ("try add --tp 2 hypothesis=2147483648", "at most 2147483647"),
        ("digest week=9999-W52", "from 2000 to 2100"),
        ("log limit=١٢", "expected a positive whole number"),
        ("grep \ud800", "lone surrogate (U+D800)"),
        ('hypothesis add "a\u2028b"', "a line separator (U+2028)"),
        ('grep "a\x85b"', "a next-line character (U+0085)"),
        ('try add --served-model-name "a\u2029b"', "a paragraph separator (U+2029)"),
        ("try env set NCCL_DEBUG='a\vb'", "a vertical tab"),
        ('grep "a\fb"', "a form feed"),
        ('grep "a\rb"', "a carriage return"),
        ('grep "a\nb"', "a line feed (\\n)"),
        ('grep "a\x1bb"', "control character U+001B"),
        ("grep a\x00b", "NUL"),
        ('grep "open', "a quote is not closed"),
        ("status --target nope", "unknown target 'nope'"),
        ("grep x scope=since", "scope=since needs since=DURATION"),
        ("log bogus=1", "unknown option 'bogus'"),
        ("grep " + "x" * 5000, "the limit is 4000"),
        ("isolate max_running_requests>=48 since=yesterday", "expected an id such as 12 or `baseline`"),
        (
            "revert flags=enable-metrics",
            "flags=enable-metrics: an SGLang flag is written with its dashes; did you mean `--enable-metrics`?",
        ),
        # a well-formed name the list lacks is taken as written (a unit may carry a flag its SGLang
        # dropped; the revert's plan refuses a name the unit does not carry): only a non-name here
        ("revert flags=--enable-metrics;id", "--enable-metrics;id"),
    ],
)
def test_nasty_texts_get_a_specific_refusal_before_the_ack(text: str, says: str) -> None:
    with pytest.raises(CommandError) as caught:
        check(SETTINGS, parse(SETTINGS, text))
    assert says in caught.value.render(), caught.value.render()


def test_the_limits_themselves_are_accepted() -> None:
    for text in (
        "grep x since=366d",
        "grep x since=8784h lines=1000",
        "log since=366d limit=1000",
        "bench wait=1d repeats=100 concurrency=1,4096",
        "hypothesis show 2147483647",
        "digest week=2100-W52",
        "digest week=2000-W01",
        "isolate max_running_requests>=48 since=#12",
        "isolate max_running_requests>=48 since=baseline",
        "revert flags=--enable-metrics,--tp",
    ):
        invocation = parse(SETTINGS, text)
        check(SETTINGS, invocation)
        _accepted(invocation)
