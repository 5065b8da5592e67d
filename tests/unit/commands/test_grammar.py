"""The grammar: changes, expectations, options and specific errors for malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.commands import CommandError, parse_command, tokenize
from bot.sglang.catalog import FlagCatalog
from bot.sglang.change import Change


def changes(text: str) -> list[Change]:
    return list(parse_command(text).changes)


def test_bare_flags_mean_add_and_aliases_become_canonical() -> None:
    got = changes("try --tp 2 --enable-metrics")
    assert [(c.op, c.flag, c.value) for c in got] == [
        ("add", "--tp-size", "2"),
        ("add", "--enable-metrics", None),
    ]
    assert got[0].written == "--tp"


def test_equals_and_space_are_the_same() -> None:
    assert changes("try set --mem-fraction-static=0.85") == changes("try set --mem-fraction-static 0.85")


def test_negative_values_and_multi_values() -> None:
    got = changes("try add --cuda-graph-bs 4 8 16 add --chunked-prefill-size -1")
    assert got[0].value == ("4", "8", "16")
    assert got[1].value == "-1"


def test_a_multi_value_flag_stops_at_an_expectation_and_an_option() -> None:
    invocation = parse_command("try add --cuda-graph-bs 4 8 max_running_requests>=48 target=q")
    assert invocation.changes[0].value == ("4", "8")
    assert [str(e) for e in invocation.expectations] == ["max_running_requests>=48"]
    assert invocation.options == {"target": "q"}


def test_env_changes() -> None:
    got = changes("try env set NCCL_DEBUG=INFO env set EMPTY= env unset OLD")
    assert [(c.op, c.env_name, c.env_value) for c in got] == [
        ("env-set", "NCCL_DEBUG", "INFO"),
        ("env-set", "EMPTY", ""),
        ("env-unset", "OLD", None),
    ]


def test_cli_words_are_not_split_again() -> None:
    invocation = parse_command(["try", "add", "--enable-metrics", "because=two words"])
    assert invocation.options["because"] == "two words"


def test_typographic_quotes_are_mended() -> None:
    assert tokenize("hypothesis add “a b” max_running_requests>=48")[2] == "a b"


def test_a_grep_pattern_may_look_like_an_option_or_a_flag() -> None:
    assert parse_command("grep max_running_requests= since=2h").positionals == {
        "pattern": "max_running_requests="
    }
    assert parse_command("grep max_running_requests= since=2h").options == {"since": "2h"}
    assert parse_command("grep --enable-metrics").positionals == {"pattern": "--enable-metrics"}


def test_ids_and_parsed_fields() -> None:
    invocation = parse_command("hypothesis close #3 refuted")
    assert invocation.positionals == {"id": "3", "verdict": "refuted"}
    assert str(parse_command("verify parsed.max_running_requests==48").expectations[0]) == (
        "parsed.max_running_requests==48"
    )
    assert parse_command("digest week=2026-W53").options == {"week": "2026-W53"}


def test_tiers_follow_subcommands() -> None:
    assert parse_command("checks").tier == "read-only"
    assert parse_command("checks pause 4").tier == "mutating"
    assert parse_command("baseline pin").tier == "mutating"
    assert parse_command("try add --enable-metrics").tier == "mutating"


def test_a_catalog_of_another_version_is_used_for_names() -> None:
    full = FlagCatalog.load()
    small = FlagCatalog.from_specs("9.9", [full.resolve("--enable-metrics")])
    with pytest.raises(CommandError, match="unknown flag --tp"):
        parse_command("try add --tp 2", catalog=small)


def test_a_flag_the_list_lacks_can_still_be_removed_as_written_with_a_note() -> None:
    """0.5.10 dropped `--disable-hicache-numa-detect` (0.5.9 has it): a unit that carries it must
    stay removable; whether the unit has it is checked where the unit is read (preflight)."""
    invocation = parse_command("try remove --disable-hicache-numa-detect")
    assert invocation.changes == (
        Change("remove", "--disable-hicache-numa-detect", written="--disable-hicache-numa-detect"),
    )
    assert len(invocation.notes) == 1
    assert "not a flag of SGLang 0.5.10's list" in invocation.notes[0]
    known = parse_command("try remove --tp")  # a flag the list has: canonical, no note
    assert [c.flag for c in known.changes] == ["--tp-size"] and known.notes == ()


def test_a_revert_may_take_out_a_flag_the_list_lacks_with_a_note() -> None:
    invocation = parse_command("revert flags=--disable-hicache-numa-detect,--tp")
    assert invocation.options["flags"] == "--disable-hicache-numa-detect,--tp-size"
    [note] = invocation.notes
    assert note.startswith("flags=--disable-hicache-numa-detect: not a flag of SGLang 0.5.10's list")
    assert note.endswith("; taken as written")
    typo = parse_command("try remove --enable-metricz").notes[0]
    assert "(did you mean --enable-metrics" in typo  # a typo is still pointed out
    with pytest.raises(CommandError, match="unknown flag --x;id"):
        parse_command("revert flags=--x;id")


@pytest.mark.parametrize(
    "text", ["try remove --enable-metrics;id", "try remove --x$(id)", "try remove --enable"]
)
def test_a_removal_no_list_could_mean_is_still_refused(text: str) -> None:
    with pytest.raises(CommandError):
        parse_command(text)


def test_a_refusal_says_whether_another_list_could_take_the_words() -> None:
    for text in ("try add --enable-metricz", "try add --max-running-requests abc", "try add --enable"):
        with pytest.raises(CommandError) as refused:
            parse_command(text)
        assert refused.value.flag_list, text
    for text in ("try add --enable-metrics;id", "try add --enable-metrics frobnicate=1", "try"):
        with pytest.raises(CommandError) as refused:
            parse_command(text)
        assert not refused.value.flag_list, text


MALFORMED = [
    ("", "no command given"),
    ("tyr add --x", "did you mean `try`"),
    ("try", "needs at least one change"),
    ("try add", "expects an SGLang flag"),
    (
        "try add enable-metrics",
        "add enable-metrics: an SGLang flag is written with its dashes; did you mean `--enable-metrics`?",
    ),
    ("try add --enable-metricz", "unknown flag --enable-metricz"),
    ("try add --enable", "ambiguous"),
    ("try add --max-running-requests abc", "invalid int value: 'abc'"),
    ("try add --max-running-requests", "expected one argument"),
    ("try add --speculative-algorithm FOO", "invalid choice"),
    ("try add --enable-metrics=1", "takes no value"),
    ("try set --enable-metrics", "is a switch"),
    ("try remove --enable-metrics=1", "takes no value"),
    ("try add --tp 2 add --tp-size 4", "appears twice"),
    ("try env set 1BAD=x", "not a variable name"),
    ("try env set NAME", "write NAME=VALUE"),
    ("try env unset NAME=1", "takes a name only"),
    ("try env frob", "env needs"),
    ("try —enable-metrics", "typographic dash"),
    ("try add –enable-metrics", "typographic dash"),
    ("try add --enable-metrics frobnicate=1", "unknown option 'frobnicate'"),
    ("try add --enable-metrics target=a target=b", "given twice"),
    ("try add --enable-metrics keep=sometimes", "expected one of auto, always, never"),
    ("try add --enable-metrics stray", "unexpected 'stray'"),
    ("verify", "needs an expectation"),
    ("verify max_running_requests=48", "compares with =="),
    ("verify max_running_requests=>48", "did you mean >="),
    ("verify output_throughput>=fast", "needs a number"),
    ("grep", "needs PATTERN"),
    ("grep x since=soon", "not a duration"),
    ("log limit=0", "positive whole number"),
    ("digest week=2026-48", "ISO week"),
    ("digest --wek 2026-W48", "unknown option '--wek'"),
    ("digest --week", "needs a value"),
    ("bench concurrency=1,x", "comma-separated"),
    ("hypothesis close", "needs ID"),
    ("hypothesis frobnicate", "needs one of"),
    ("revert 1 2", "unexpected '2'"),
    ('grep "unclosed', "quote is not closed"),
    ("status \x00", "NUL"),
    ("verify max_runing_requests>=48", "did you mean max_running_requests"),
    ("try add --enable-metrics throughput>=1", "unknown metric 'throughput'"),
    ("hypothesis close 3 maybe", "expected one of confirmed, refuted, inconclusive"),
    ("revert abc", "expected an id"),
    ("checks run -1", "expected an id"),
    ("run ../../etc/passwd", "expected a name"),
    ("digest week=2025-W53", "ISO week"),
]


@pytest.mark.parametrize(("text", "says"), MALFORMED)
def test_malformed_input_gets_a_specific_error(text: str, says: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text)
    assert says in caught.value.message
    rendered = caught.value.render()
    assert rendered.startswith("error: ")


def test_usage_errors_carry_usage_and_a_correct_example() -> None:
    with pytest.raises(CommandError) as caught:
        parse_command("try add --enable-metricz")
    assert caught.value.usage is not None and caught.value.usage.startswith("try ")
    assert caught.value.example is not None
    parse_command(caught.value.example)  # the example itself is correct


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_parses_or_fails_with_a_command_error(text: str) -> None:
    try:
        parse_command(text)
    except CommandError as exc:
        assert exc.message


WORDS = st.sampled_from(
    [
        "try",
        "add",
        "set",
        "remove",
        "env",
        "--tp",
        "--enable-metrics",
        "-1",
        "4",
        "x=1",
        "target=q",
        "max_running_requests>=48",
        "--cuda-graph-bs",
        "unset",
        "A=1",
        "—x",
        "--mem-fraction-static=0.9",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=12))
def test_arbitrary_word_sequences_parse_or_fail_cleanly(words: list[str]) -> None:
    try:
        invocation = parse_command(["try", *words])
    except CommandError as exc:
        assert exc.message
    else:
        assert invocation.changes
