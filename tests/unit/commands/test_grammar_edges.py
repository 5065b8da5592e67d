"""Grammar edges from chat and habit (issue 22 item 5): backticks, spaces around an expectation's
operator, the CLI's `--dry-run`/`--force` in every front end, a bare flag continuing `set`, and a
flag name written without its dashes refused with the dashed name; `help` defines CHANGE and
EXPECTATION and lists the metrics from the grammar's own table."""

from __future__ import annotations

import pytest

from bot.commands import CommandError, command_words, help_text, normalize_words, parse_command
from bot.sglang.metrics import KNOWN


def refusal(text: str) -> str:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    return info.value.message


@pytest.mark.parametrize(
    "text",
    [
        "try add `--enable-metrics`",
        "try `add` `--enable-metrics`",
        "`try add --enable-metrics`",
        "  `try add --enable-metrics`  ",
    ],
)
def test_one_pair_of_backticks_around_a_word_or_the_text_is_dropped(text: str) -> None:
    [change] = parse_command(text).changes
    assert (change.op, change.flag) == ("add", "--enable-metrics")


def test_backticks_inside_a_word_or_doubled_are_kept_as_written() -> None:
    assert normalize_words(["grep", "a`b`"]) == ["grep", "a`b`"]
    assert normalize_words(["grep", "``x``"]) == ["grep", "``x``"]
    assert normalize_words(["grep", "`"]) == ["grep", "`"]
    assert normalize_words(["grep", "`", "x`"]) == ["grep", "`", "x`"]  # no word is emptied
    assert normalize_words(["grep", "`a", "b`", "c`"]) == ["grep", "a", "b", "c`"]
    words = ["verify", "`max_running_requests", ">=", "48`"]
    assert (
        normalize_words(normalize_words(words))
        == normalize_words(words)
        == ["verify", "max_running_requests>=48"]
    )
    assert "``--enable-metrics``" in refusal("try add ``--enable-metrics``")
    # the text's own pair only when it is the only pair: each word's then goes on its own
    assert command_words("`try` add `--enable-metrics`") == ["try", "add", "--enable-metrics"]


def test_a_backticked_value_and_option_are_read_without_them() -> None:
    invocation = parse_command("try set `--mem-fraction-static` `0.85` `dry-run=yes`")
    assert [(c.op, c.flag, c.value) for c in invocation.changes] == [("set", "--mem-fraction-static", "0.85")]
    assert invocation.options["dry-run"] == "yes"


@pytest.mark.parametrize(
    "text",
    [
        "verify max_running_requests>=48",
        "verify max_running_requests >= 48",
        "verify max_running_requests>= 48",
        "verify max_running_requests >=48",
        "verify `max_running_requests >= 48`",
    ],
)
def test_spaces_around_an_operator_read_as_one_expectation(text: str) -> None:
    assert [str(e) for e in parse_command(text).expectations] == ["max_running_requests>=48"]


def test_spaced_expectations_in_try_hypothesis_and_relative_values() -> None:
    invocation = parse_command("try add --enable-metrics output_throughput >= -2% median_ttft_ms < 500")
    assert [str(e) for e in invocation.expectations] == ["output_throughput>=-2%", "median_ttft_ms<500"]
    hypothesis = parse_command('hypothesis add "fused MoE costs KV" max_running_requests >= 48')
    assert [str(e) for e in hypothesis.expectations] == ["max_running_requests>=48"]


def test_spaces_are_not_joined_where_no_expectation_is_taken() -> None:
    assert normalize_words(["grep", "a", ">=", "b"]) == ["grep", "a", ">=", "b"]


def test_a_spaced_misspelt_metric_is_still_named() -> None:
    assert "unknown metric 'max_runing_requests'" in refusal("verify max_runing_requests >= 48")


@pytest.mark.parametrize(
    ("text", "option"),
    [
        ("try add --enable-metrics --dry-run", "dry-run"),
        ("try --dry-run add --enable-metrics", "dry-run"),
        ("try add --enable-metrics --force", "force"),
        ("revert --force", "force"),
        ("revert 12 --force", "force"),
    ],
)
def test_the_cli_switches_are_options_in_every_front_end(text: str, option: str) -> None:
    invocation = parse_command(text)
    assert invocation.options[option] == "yes"
    assert all(change.flag not in ("--dry-run", "--force") for change in invocation.changes)
    assert parse_command(text.split()) == invocation  # the CLI's word list reads the same


def test_a_switch_where_a_change_verb_asks_for_a_flag_is_not_taken_for_the_option() -> None:
    assert "--dry-run" in refusal("try add --dry-run")


def test_a_bare_flag_continues_set_and_remove() -> None:
    got = parse_command("try set --tp 4 --mem-fraction-static 0.8").changes
    assert [(c.op, c.flag, c.value) for c in got] == [
        ("set", "--tp-size", "4"),
        ("set", "--mem-fraction-static", "0.8"),
    ]
    removed = parse_command("try remove --enable-metrics --disable-cuda-graph").changes
    assert [(c.op, c.flag) for c in removed] == [
        ("remove", "--enable-metrics"),
        ("remove", "--disable-cuda-graph"),
    ]
    mixed = parse_command(
        "try --enable-metrics set --tp 4 add --disable-cuda-graph env set X=1 --log-requests"
    )
    assert [c.op for c in mixed.changes] == ["add", "set", "add", "env-set", "add"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("try add enable-metrics", "add enable-metrics: an SGLang flag is written with its dashes"),
        (
            "try set mem-fraction-static 0.8",
            "set mem-fraction-static: an SGLang flag is written with its dashes",
        ),
        ("try remove enable-metrics", "remove enable-metrics: an SGLang flag is written with its dashes"),
        ("try enable-metrics", "enable-metrics: an SGLang flag is written with its dashes"),
        ("revert flags=enable-metrics", "flags=enable-metrics: an SGLang flag is written with its dashes"),
        (
            "revert flags=--tp,enable-metrics",
            "flags=enable-metrics: an SGLang flag is written with its dashes",
        ),
        ("isolate max_running_requests>=48 flags=enable-metrics", "unknown option 'flags'"),
    ],
)
def test_a_flag_name_without_dashes_is_refused_naming_the_dashed_one(text: str, says: str) -> None:
    message = refusal(text)
    assert message.startswith(says), message
    if "enable-metrics" in text and "unknown option" not in says:
        assert message.endswith("did you mean `--enable-metrics`?")


def test_a_dashless_word_no_list_knows_gets_no_guess() -> None:
    assert refusal("try add frobnicate-x") == (
        "add frobnicate-x: an SGLang flag is written with its dashes, and SGLang 0.5.10's list has no "
        "--frobnicate-x either"
    )
    assert refusal("revert flags=frobnicate-x").startswith("flags=frobnicate-x: an SGLang flag is written")
    assert refusal("try add --enable-metrics frobnicate") == (
        "unexpected 'frobnicate'; flag changes start with add, set, remove or env"
    )


def test_help_defines_change_and_expectation_and_lists_every_metric() -> None:
    for text in (help_text(), help_text("try")):
        assert "CHANGE (try): `add --x [VALUE ...]`" in text and "e.g. `add --enable-metrics`" in text
        assert "EXPECTATION: METRIC OP VALUE with OP one of >= <= == != > <" in text
        assert "e.g. `max_running_requests>=48`" in text
        listed = text.split("metrics an EXPECTATION may name:", 1)[1]
        assert all(metric in listed for metric in KNOWN)
        assert "parsed.FIELD" in listed
    verify = help_text("verify")
    assert "EXPECTATION: METRIC OP VALUE" in verify and "CHANGE (try)" not in verify
    assert "EXPECTATION" not in help_text("status")
    assert "EXPECTATION: METRIC OP VALUE" in help_text("hypothesis")  # `hypothesis add` takes one
