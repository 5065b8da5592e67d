"""Grep: scopes resolved to journal matches, host-side filtering, bounded output, the exact command."""

from __future__ import annotations

import json

import pytest

from bot.target.grep import GrepError, fixed_pattern, grep, journal_tail, since_from_duration
from bot.target.privileged import ParamError, render
from tests.unit.target.scripted_node import ScriptedNode, show_text

CUR, PREV, OLDER = "a" * 32, "b" * 32, "c" * 32


def starts(*invocations: str) -> bytes:
    return b"".join(
        json.dumps({"INVOCATION_ID": inv, "MESSAGE": "Started"}).encode() + b"\n" for inv in invocations
    )


def matches(n: int, *, start: int = 0) -> bytes:
    return b"".join(
        f"2026-11-29T20:14:{s:02d}.{s:06d}+0000 gpu0 python3[42]: line {s} max_running_requests=48\n".encode()
        for s in range(start, start + n)
    )


def node(**streams: bytes) -> ScriptedNode:
    return ScriptedNode(
        "n0",
        states=[(0, show_text(invocation=CUR))],
        outputs={"journal-starts": starts(CUR, PREV, OLDER)},
        streams=dict(streams),
    )


def test_fixed_strings_escape_only_metacharacters() -> None:
    assert fixed_pattern("max_running_requests=48") == "max_running_requests=48"
    assert (
        fixed_pattern("a.b (x) [y] $z ^w | q? + * {1} \\")
        == "a\\.b \\(x\\) \\[y\\] \\$z \\^w \\| q\\? \\+ \\* \\{1\\} \\\\"
    )
    assert since_from_duration(7200) == "-7200s"
    assert since_from_duration(0.2) == "-1s"


def test_table_entries_quote_for_the_remote_shell_and_refuse_odd_patterns() -> None:
    rendered = render("journal-grep", unit="sglang-qwen.service", pattern="--tp 2; rm -rf /", lines=5)
    assert rendered.argv[-4:] == ["--grep", "--tp 2; rm -rf /", "-n", "5"]
    assert "'--tp 2; rm -rf /'" in rendered.shell
    for bad in ("two\nlines", "", "x" * 513, "nul\x00"):
        with pytest.raises(ParamError):
            render("journal-grep", unit="sglang-qwen.service", pattern=bad)
    with pytest.raises(ParamError):
        render("sglang-help", python="/usr/bin/../bin/sh")
    assert render("sglang-help", python="/opt/venv/bin/python3.11").argv[:2] == [
        "env",
        "/opt/venv/bin/python3.11",
    ]


async def test_this_invocation_counts_all_matches_and_keeps_the_newest() -> None:
    n = node(**{"journal-grep-invocation": matches(30) + b"-- No entries --\n"})
    result = await grep(n, "max_running_requests=", lines=5)
    assert (result.scope, result.invocation, result.count, result.shown, result.complete) == (
        "this",
        CUR,
        30,
        5,
        True,
    )
    assert result.lines[-1].endswith("line 29 max_running_requests=48")
    assert result.command == (
        f"journalctl INVOCATION_ID={CUR} + _SYSTEMD_INVOCATION_ID={CUR} --no-pager --all "
        "-o short-iso-precise --grep max_running_requests="
    )
    assert "30 line(s) match" in result.describe()
    excerpt = result.to_evidence()
    assert excerpt.command == result.command and excerpt.match_count == 30


async def test_previous_is_the_start_before_the_current_one() -> None:
    n = node(**{"journal-grep-invocation": matches(1)})
    result = await grep(n, "x", scope="previous")
    assert result.invocation == PREV
    assert f"INVOCATION_ID={PREV}" in result.command
    assert (
        "journal-starts",
        "journalctl -u sglang-qwen.service MESSAGE_ID=39f53479d3a045ac8e11786248231fbf "
        "--no-pager -o json --output-fields=INVOCATION_ID --reverse -n 20",
    ) in n.calls


async def test_previous_without_an_earlier_start_says_so() -> None:
    n = node()
    n.outputs["journal-starts"] = starts(CUR)
    with pytest.raises(GrepError, match="no start before the current one"):
        await grep(n, "x", scope="previous")


async def test_since_filters_on_the_host_and_output_is_bounded_in_bytes() -> None:
    n = node(**{"journal-grep": matches(50)})
    result = await grep(n, "line", scope="since", since="-7200s", lines=10, max_bytes=800)
    assert result.command.endswith("--grep line --since -7200s")
    assert not result.complete and result.count < 50
    assert "+ line(s) match" in result.describe()
    with pytest.raises(GrepError, match="needs a time"):
        await grep(n, "line", scope="since")


async def test_last_scope_uses_journalctl_n_and_restores_time_order() -> None:
    newest_first = b"".join(reversed(matches(3).splitlines(keepends=True)))
    n = node(**{"journal-grep": newest_first})
    result = await grep(n, "line", scope="last", lines=3)
    assert result.command.endswith("--grep line -n 3")
    assert [line.split()[-2] for line in result.lines] == ["0", "1", "2"]
    assert not result.complete  # as many as asked: older matches may exist
    assert "older matches not counted" in result.describe()


async def test_long_lines_are_clipped_and_carriage_returns_shown() -> None:
    n = node(
        **{"journal-grep-invocation": b"2026-11-29T20:14:00.000001+0000 h p[1]: bar\r" + b"x" * 5000 + b"\n"}
    )
    result = await grep(n, "bar")
    assert "␍" in result.lines[0] and "more characters]" in result.lines[0]


async def test_an_unknown_scope_is_refused() -> None:
    with pytest.raises(GrepError):
        await grep(node(), "x", scope="everything")  # type: ignore[arg-type]


async def test_starts_since_a_moment_leave_out_the_earlier_ones() -> None:
    from bot.target.grep import invocations

    n = node()
    n.outputs["journal-starts"] = b"".join(
        json.dumps({"INVOCATION_ID": inv, "__REALTIME_TIMESTAMP": str(at * 1_000_000)}).encode() + b"\n"
        for inv, at in ((CUR, 1_000_300), (PREV, 1_000_200), (OLDER, 1_000_100))
    )
    assert await invocations(n) == [CUR, PREV, OLDER]
    assert await invocations(n, since=1_000_200) == [CUR, PREV]


async def test_logs_reads_the_latest_lines_bounded_with_the_exact_command() -> None:
    n = node(journal=matches(30) + b"-- No entries --\n")
    result = await journal_tail(n, lines=5)
    assert (result.count, result.shown, result.complete) == (30, 5, True)
    assert result.lines[0].endswith("line 25 max_running_requests=48")
    assert result.command == ("journalctl -u sglang-qwen.service --no-pager -o short-iso --all -n 5")
    assert result.describe() == "the unit's last 5 journal line(s) on n0"
    since = await journal_tail(n, lines=1000, since="-1800s", max_bytes=200)
    assert since.command.endswith("--all --since -1800s -n 1000")
    assert not since.complete and since.describe().endswith(
        " since -1800s on n0 (cut short: output bound reached)"
    )
