"""The renderers on hand-made digests: escaping, Slack's limits with a huge week, an empty week."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from bot.digest.markdown import MAX_ROWS, render_markdown
from bot.digest.model import (
    ChartData,
    CheckLine,
    Digest,
    ExperimentLine,
    HypothesisLine,
    Learned,
    TargetFlags,
    ThreadLink,
)
from bot.digest.week import IsoWeek
from bot.digest.words import glance
from bot.slack.digest_blocks import MAX_LINES, render_blocks
from bot.slack.render import MAX_BLOCKS, MAX_FALLBACK_TEXT, MAX_SECTION, messages
from flagbot_lab.standin.blocks import block_errors

WEEK = IsoWeek(2026, 48)
TZ = ZoneInfo("Europe/Berlin")
NASTY = "a <b> & c | d * e _ f ` g [h](i) " + "x" * 5000


def digest(experiments: int = 2, *, text: str = "fine", checks: list[CheckLine] | None = None) -> Digest:
    start = WEEK.start(TZ)
    lines = [
        ExperimentLine(
            id=i + 1,
            target="sglang-qwen",
            playbook="try",
            what=f"add --flag-{i} {text}",
            status="succeeded",
            verdict="regressed" if i % 2 else "improved",
            summary=text,
            actor="slack:U0OPER",
            at=start + timedelta(minutes=i),
            kept=bool(i % 2 == 0),
            capacity_before=48,
            capacity_after=26 if i % 2 else 48,
            thread=ThreadLink(
                "C0FLAGBOT", f"1764000000.{i:06d}", f"https://x.slack.com/archives/C0FLAGBOT/p{i}"
            ),
        )
        for i in range(experiments)
    ]
    hypothesis = HypothesisLine(1, "sglang-qwen", f"statement {text}", "confirmed", text, start)
    return Digest(
        week=WEEK,
        timezone="Europe/Berlin",
        start=start,
        end=WEEK.end(TZ),
        target=None,
        experiments=lines,
        confirmed=[hypothesis] * experiments,
        refuted=[],
        inconclusive=[],
        still_open=[],
        kept=[],
        reverted=[],
        targets=[TargetFlags("sglang-qwen", 1, 1, 9, (f"add --x {text}",), 48, 26)],
        failed_starts=[],
        rollbacks=[],
        checks=checks,
        learned=[Learned("--x", "note", text, "sglang-qwen", 1, start)] * experiments,
        chart=ChartData(),
    )


def _all_text(blocks: list[dict[str, object]]) -> str:
    out = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            out.append(str(text["text"]))
        for element in block.get("elements", []) or []:  # type: ignore[attr-defined]
            out.append(str(element["text"]))
    return "\n".join(out)


def test_a_huge_week_stays_within_slacks_limits_and_counts_what_it_leaves_out() -> None:
    big = digest(3000, text=NASTY)
    rendered = render_blocks(big)
    parts = messages(rendered.blocks, rendered.text)
    for blocks, fallback in parts:
        assert block_errors(blocks) == []
        assert len(blocks) <= MAX_BLOCKS
        assert len(fallback) <= MAX_FALLBACK_TEXT
    assert all(len(b["text"]["text"]) <= MAX_SECTION for b in rendered.blocks if b["type"] == "section")
    shown = _all_text(rendered.blocks)
    assert f"…and {3000 - MAX_LINES} more" in shown
    assert "flagbot digest --week 2026-W48 --markdown" in shown
    assert "<b>" not in shown and "&lt;b&gt;" in shown  # store text escaped, links kept
    assert "<https://x.slack.com/archives/C0FLAGBOT/p1|#2>" in shown


def test_the_markdown_lists_everything_and_escapes_store_text() -> None:
    big = digest(60, text="a <b> | c * d")
    text = render_markdown(big)
    assert text.count("| try |") == 60
    assert "a \\<b> \\| c \\* d" in text  # cannot open HTML, split a table cell or start emphasis
    assert "[thread](https://x.slack.com/archives/C0FLAGBOT/p59)" in text
    assert "Checks: not recorded" not in text and "No checks recorded." in text


def test_a_huge_weeks_markdown_shows_what_matters_most_and_counts_the_rest() -> None:
    big = digest(3 * MAX_ROWS)
    quiet = [dataclasses.replace(line, verdict="no-change", kept=None) for line in big.experiments]
    quiet[-1] = dataclasses.replace(quiet[-1], verdict="regressed")  # the newest: only one that matters
    quiet[-2] = dataclasses.replace(quiet[-2], status="failed", verdict=None)
    week = dataclasses.replace(big, experiments=quiet)
    text = render_markdown(week)
    assert text.count("| try |") == MAX_ROWS
    assert f"| {len(quiet)} | " in text and f"| {len(quiet) - 1} | " in text  # listed first, though last
    assert f"| {MAX_ROWS - 2} | " in text and f"| {MAX_ROWS - 1} | " not in text  # then the oldest others
    assert f"…and {2 * MAX_ROWS:,} more experiments, not shown" in text
    assert f"…and {2 * MAX_ROWS:,} more hypotheses, not shown" in text
    assert "`flagbot digest --week 2026-W48 --markdown --all` lists every one" in text
    whole = render_markdown(week, limit=None)
    assert whole.count("| try |") == len(quiet) and "not shown" not in whole


def test_failed_checks_are_listed_when_there_are_some() -> None:
    failed = [
        CheckLine(
            "sglang-qwen", "check #3", "max_running_requests 26 < 48", datetime(2026, 11, 24, tzinfo=UTC), 5
        )
    ]
    one = digest(checks=failed)
    assert (
        "- check #3 on sglang-qwen (#5), Tue 24 Nov 01:00: max\\_running\\_requests 26 \\< 48"
        in render_markdown(one)
    )
    assert "1 failed check" in glance(one)
    assert "check #3 on sglang-qwen (#5): max_running_requests 26 &lt; 48" in _all_text(
        render_blocks(one).blocks
    )
    none_failed = digest(checks=[])
    assert "None failed." in render_markdown(none_failed)
    assert "0 failed checks" in glance(none_failed)


def test_an_empty_week_says_so_everywhere() -> None:
    empty = digest(0)
    assert empty.empty
    assert "Nothing happened in 2026-W48" in render_markdown(empty)
    rendered = render_blocks(empty)
    assert block_errors(rendered.blocks) == []
    assert "Nothing happened in 2026-W48" in _all_text(rendered.blocks)
    assert "_no experiments this week_" in _all_text(rendered.blocks)
