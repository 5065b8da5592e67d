"""Launch-line parser: corpus units/scripts, flag grouping rules, refusals and round-trip properties."""

from __future__ import annotations

import contextlib
import json
import shlex
import string
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.sglang.flagset import FlagItem, FlagSet
from bot.sglang.launch import (
    LaunchInScriptError,
    LaunchKind,
    LaunchLine,
    LaunchParseError,
    parse_flags,
    parse_launch_text,
)

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-units"
INDEX: list[dict[str, Any]] = json.loads((CORPUS / "index.json").read_text())
EXPECTED_KIND = {
    "001.service": "unit",
    "005.sh": "script",
    "006.txt": "command",
    "007.txt": "command",
    "009.sh": "docker",
}


def launch(argv: str) -> LaunchLine:
    return parse_launch_text(f"python -m sglang.launch_server {argv}")


def flags(argv: str) -> list[dict[str, Any]]:
    return launch(argv).flags.to_json()


@pytest.mark.parametrize("entry", INDEX, ids=[entry["file"] for entry in INDEX])
def test_corpus_file_matches_index_exactly(entry: dict[str, Any]) -> None:
    line = parse_launch_text((CORPUS / entry["file"]).read_text())
    data = line.to_json()
    assert data.pop("kind") == EXPECTED_KIND[entry["file"]]
    assert data == entry["expected"]
    assert list(data["env"]) == list(entry["expected"]["env"])  # order as written, too


def test_corpus_006_wrapper_and_007_repeated_flag() -> None:
    line = parse_launch_text((CORPUS / "006.txt").read_text())
    assert line.wrapper == ["/opt/mooncake-libs/run-with-new-libstdc.sh"]
    repeated = parse_launch_text((CORPUS / "007.txt").read_text()).flags.items
    assert [item for item in repeated if item.flag == "--device"] == [FlagItem("--device", "npu")] * 2


def test_corpus_docker_wrapper_ends_at_the_image() -> None:
    line = parse_launch_text((CORPUS / "009.sh").read_text())
    assert line.wrapper[:2] == ["docker", "run"]
    assert line.wrapper[-1] == "sglang:blackwell-final-v2"
    assert line.line == 13


def test_to_json_has_exactly_the_agreed_keys() -> None:
    assert set(launch("--a 1").to_json()) == {"entrypoint", "env", "flags", "kind"}


def test_boolean_flag_before_another_flag_and_at_the_end() -> None:
    assert flags("--a --b 1 --c") == [
        {"flag": "--a", "value": None},
        {"flag": "--b", "value": "1"},
        {"flag": "--c", "value": None},
    ]


def test_equals_form_gives_the_value() -> None:
    assert flags("--x=value --y= --z=a=b") == [
        {"flag": "--x", "value": "value"},
        {"flag": "--y", "value": ""},
        {"flag": "--z", "value": "a=b"},
    ]


@pytest.mark.parametrize("value", ["-1", "-0.5", "-.5", "-1e3", "-2"])
def test_negative_numbers_are_values(value: str) -> None:
    assert flags(f"--chunked-prefill-size {value} --b") == [
        {"flag": "--chunked-prefill-size", "value": value},
        {"flag": "--b", "value": None},
    ]


def test_several_values_become_a_list() -> None:
    assert flags("--cuda-graph-bs 4 8 16 --x -1 -2") == [
        {"flag": "--cuda-graph-bs", "value": ["4", "8", "16"]},
        {"flag": "--x", "value": ["-1", "-2"]},
    ]


def test_repeated_flags_stay_separate_and_ordered() -> None:
    assert launch("--device npu --tp 2 --device npu").flags == FlagSet(
        (FlagItem("--device", "npu"), FlagItem("--tp", "2"), FlagItem("--device", "npu"))
    )


def test_positional_argument_is_refused_with_its_line() -> None:
    with pytest.raises(LaunchParseError, match=r"line 1: argument 'model' is not a flag"):
        launch("model --x")


def test_value_after_equals_form_is_refused() -> None:
    with pytest.raises(LaunchParseError, match=r"'2' follows --x=1"):
        launch("--x=1 2")


def test_parse_flags_direct() -> None:
    assert parse_flags(["--a", "1", "-h"]).to_json() == [
        {"flag": "--a", "value": "1"},
        {"flag": "-h", "value": None},
    ]
    assert parse_flags([]) == FlagSet(())


@pytest.mark.parametrize(
    ("text", "entrypoint"),
    [
        ("python3 -m sglang.launch_server --a", "python3 -m sglang.launch_server"),
        (
            "/opt/venv/bin/python3.11 -u -m sglang.launch_server --a",
            "/opt/venv/bin/python3.11 -u -m sglang.launch_server",
        ),
        ("sglang serve --a", "sglang serve"),
        ("/home/x/.venv/bin/sglang serve --a", "/home/x/.venv/bin/sglang serve"),
        ("python -m sglang.srt.server --a", "python -m sglang.srt.server"),
        ("-m sglang.launch_server --a", "-m sglang.launch_server"),
        (
            "numactl --interleave=all python -m sglang.launch_server --a",
            "numactl --interleave=all python -m sglang.launch_server",
        ),
    ],
)
def test_entrypoint_forms(text: str, entrypoint: str) -> None:
    line = parse_launch_text(text)
    assert line.entrypoint == entrypoint
    assert line.flags == FlagSet((FlagItem("--a"),))


def test_bench_serving_is_not_a_server() -> None:
    with pytest.raises(LaunchParseError, match="no SGLang launch command"):
        parse_launch_text("python -m sglang.bench_serving --backend sglang")


def test_unit_running_a_script_is_refused_with_the_agreed_message() -> None:
    unit = "[Unit]\nDescription=x\n[Service]\nExecStart=/opt/run_sglang.sh --port 30000\n"
    with pytest.raises(LaunchInScriptError) as info:
        parse_launch_text(unit)
    message = str(info.value)
    assert message.startswith("line 4: ExecStart= runs /opt/run_sglang.sh")
    assert "the launch line is in a script the unit calls" in message
    assert "flags can only be edited when ExecStart runs sglang directly" in message
    assert isinstance(info.value, LaunchParseError)


def test_unit_running_bash_c_is_refused_as_a_shell_command() -> None:
    unit = '[Service]\nExecStart=/bin/bash -c "source /v/bin/activate && python -m sglang.launch_server"\n'
    with pytest.raises(LaunchInScriptError, match=r"runs a shell command \(bash -c \.\.\.\)"):
        parse_launch_text(unit)


def test_explicit_kind_selects_the_parser() -> None:
    text = "python -m sglang.launch_server --a"
    assert parse_launch_text(text, kind="script").kind == "script"
    assert parse_launch_text("ExecStart=" + text, kind="unit").kind == "unit"
    with pytest.raises(LaunchParseError, match="does not run docker"):
        parse_launch_text(text, kind="docker")


def test_summary_mentions_kind_entrypoint_and_flags() -> None:
    summary = launch("--tp 2 --a --b 1 --c 2 --d").summary()
    assert summary.startswith("command launch line: python -m sglang.launch_server; 5 flags, 0 env vars")
    assert "--tp 2, --a, --b 1, --c 2 (+1 more)" in summary


@settings(max_examples=400)
@given(st.text())
def test_random_text_raises_only_launch_parse_error(text: str) -> None:
    kinds: tuple[LaunchKind | Literal["auto"], ...] = ("auto", "unit", "script")
    for kind in kinds:
        try:
            line = parse_launch_text(text, kind=kind)
        except LaunchParseError:
            continue
        json.dumps(line.to_json())
        line.summary()


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(
            [
                "python",
                "-m",
                "sglang.launch_server",
                "--x",
                "-1",
                "'",
                '"',
                "\\",
                "\n",
                "[Service]",
                "ExecStart=",
                "docker",
                "run",
                "$(",
                "#",
                ";",
                " ",
                "a=b",
                '"$@"',
            ]
        ),
        max_size=30,
    )
)
def test_launch_like_token_soup_raises_only_launch_parse_error(parts: list[str]) -> None:
    with contextlib.suppress(LaunchParseError):
        parse_launch_text(" ".join(parts))


FLAG_NAMES = st.from_regex(r"--[a-z][a-z-]{0,15}", fullmatch=True)


def items(alphabet: st.SearchStrategy[str]) -> st.SearchStrategy[FlagSet]:
    """FlagSets over `alphabet`. Values never start with "-": such a token reads as a flag
    (argparse has the same ambiguity; negative numbers aside, which have their own test above).
    A one-element tuple is left out because it renders exactly like a single value."""
    values = st.text(alphabet=alphabet, max_size=20).filter(lambda value: not value.startswith("-"))
    value = st.one_of(st.none(), values, st.lists(values, min_size=2, max_size=4).map(tuple))
    return st.lists(st.builds(FlagItem, FLAG_NAMES, value), max_size=8).map(
        lambda found: FlagSet(tuple(found))
    )


ANY_TEXT = st.characters(exclude_categories=["Cs"])


@settings(max_examples=300)
@given(items(ANY_TEXT))
def test_rendered_flagset_parses_back_to_itself(flagset: FlagSet) -> None:
    text = "python -m sglang.launch_server " + " ".join(shlex.quote(token) for token in flagset.argv())
    line = parse_launch_text(text)
    assert line.flags == flagset
    assert line.entrypoint == "python -m sglang.launch_server"
    assert line.env == {}


def systemd_quote(token: str) -> str:
    """Double quotes with `\\`, `"`, newline and CR escaped and `%` doubled spell any value in a unit."""
    escaped = token.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r") + '"'


@settings(max_examples=300)
@given(items(st.sampled_from(string.printable)))
def test_printable_values_round_trip_through_a_systemd_unit(flagset: FlagSet) -> None:
    argv = " ".join(map(systemd_quote, flagset.argv()))
    text = f"[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server {argv}\n"
    assert parse_launch_text(text).flags == flagset
