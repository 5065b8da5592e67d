"""The Slack renderer: Block Kit that Slack accepts whatever the evidence holds.

Every rendered block is checked against slack_sdk's Block Kit models (which know the type keys
and Slack's limits) and against the limits directly; huge inputs come from hypothesis.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_sdk.models.blocks import Block

from bot.loop.table_layout import display_width
from bot.slack.render import (
    INLINE_EXCERPT_LINES,
    MAX_BLOCKS,
    MAX_SECTION,
    CardState,
    Rendered,
    action_value,
    messages,
    parse_action_value,
    render_block,
    status_card,
    verdict_buttons,
)
from bot.slack.render_tables import TABLE_WIDTH, table_lines
from bot.target.evidence import (
    ChartBlock,
    ComparisonRow,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
)
from tests.support.narrow_tables import HYPOTHESIS_COLUMNS, HYPOTHESIS_ROWS, assert_readable

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MENTION = re.compile(r"<[@!#][A-Z0-9]+(\|[^<>]*)?>")
ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")
FENCE = "```"

# -- checking Block Kit ------------------------------------------------------------------------


def texts_of(block: dict[str, Any]) -> list[dict[str, Any]]:
    """Every text object of a block (section text, context elements, header, button labels)."""
    found = [block["text"]] if "text" in block else []
    for element in block.get("elements", []):
        found.append(element["text"] if element.get("type") == "button" else element)
    return found


def check_block(block: dict[str, Any]) -> None:
    """The block is Block Kit Slack accepts: known shape, text objects, every limit."""
    assert block["type"] in {"section", "context", "header", "actions"}, block
    parsed = Block.parse(block)
    assert parsed is not None
    assert parsed.to_dict() == block  # to_dict validates limits and drops unknown keys
    assert len(block.get("block_id", "")) <= 255
    for text in texts_of(block):
        assert text["type"] in {"mrkdwn", "plain_text"}, text
        assert 0 < len(text["text"]) <= MAX_SECTION, len(text["text"])
        if text["type"] == "mrkdwn":
            assert "<" not in MENTION.sub("", text["text"]) and ">" not in MENTION.sub("", text["text"])
            assert not ENTITY.search(text["text"]), text["text"]
    if block["type"] == "header":
        assert block["text"]["type"] == "plain_text" and len(block["text"]["text"]) <= 150
    if block["type"] == "context":
        assert 1 <= len(block["elements"]) <= 10
    if block["type"] == "actions":
        for button in block["elements"]:
            assert button["type"] == "button" and button["action_id"].startswith("flagbot_")
            assert len(button["text"]["text"]) <= 75 and len(button["value"]) <= 2000


def check_rendered(rendered: Rendered, *, closed: bool = True) -> None:
    """Every block valid; `closed`: every section's code blocks are closed (free text may hold
    an odd number of fences of its own, so a TextBlock is not held to it)."""
    assert rendered.blocks or rendered.images
    for block in rendered.blocks:
        check_block(block)
        if closed and block["type"] == "section":
            assert block["text"]["text"].count(FENCE) % 2 == 0, "a code block left open"
    assert 0 < len(rendered.text) <= 300
    for part, text in messages(rendered.blocks, rendered.text):
        assert 1 <= len(part) <= MAX_BLOCKS and len(text) <= 40_000


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def section_texts(rendered: Rendered) -> list[str]:
    return [block["text"]["text"] for block in rendered.blocks if block["type"] == "section"]


def code_lines(text: str) -> list[str]:
    """The lines inside a section's code block."""
    inner = text[text.index(FENCE) + 4 : text.rindex(FENCE) - 1]
    return inner.split("\n")


# -- inputs -------------------------------------------------------------------------------------

ALPHABET = st.characters(codec="utf-8") | st.sampled_from("&<>`*_\n ")


def big_text(max_piece: int = 60, max_repeat: int = 300) -> st.SearchStrategy[str]:
    """Short random text repeated up to hundreds of times: huge inputs without slow generation."""
    return st.builds(
        lambda piece, times: piece * times, st.text(ALPHABET, max_size=max_piece), st.integers(1, max_repeat)
    )


CELLS = st.text(ALPHABET, max_size=12) | st.integers(-(10**9), 10**9).map(str) | big_text(40, 10)

BLOCKS: list[Evidence] = [
    TextBlock("the server restarted in 41 s", title="restart"),
    TableBlock("flags", ("flag", "value"), (("--tp-size", "2"),), note="node 0"),
    JournalExcerpt(
        "fatal", "node0", "journalctl -u x", ("a", "KV cache pool is full"), 2, False, "KV cache pool is full"
    ),
    MetricComparison(
        "before / after",
        (ComparisonRow("max_running_requests", "48", "26", "-45.8 %", "regressed"),),
        note="3 repeats",
    ),
    ChartBlock("throughput by concurrency", "state/charts/12.png", alt="flat until 32"),
    VerdictBlock("regressed", "capacity fell from 48 to 26", ("effective max_running_requests 26",)),
]


# -- evidence -----------------------------------------------------------------------------------


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.kind)
def test_every_kind_renders_valid_block_kit(block: Evidence) -> None:
    check_rendered(render_block(block))


def test_text_is_escaped_and_titled() -> None:
    rendered = render_block(TextBlock("a <b> & c at <!channel>", title="<restart> & more"))
    [text] = section_texts(rendered)
    assert text == "*&lt;restart&gt; &amp; more*\na &lt;b&gt; &amp; c at &lt;!channel&gt;"
    assert rendered.text == "&lt;restart&gt; &amp; more"


@SETTINGS
@given(text=big_text(), title=st.text(ALPHABET, max_size=400))
def test_huge_text_is_split_within_limits_and_nothing_is_lost(text: str, title: str) -> None:
    rendered = render_block(TextBlock(text, title=title))
    check_rendered(rendered, closed=False)
    body = "\n".join(section_texts(rendered))
    if title.split():
        body = body.split("\n", 1)[1] if "\n" in body else ""
    if text:
        assert unescape(body).replace("\n", "") == text.replace("\n", "")


def test_text_is_cut_on_line_boundaries() -> None:
    lines = [f"line {i:04d} " + "x" * 80 for i in range(200)]
    rendered = render_block(TextBlock("\n".join(lines)))
    texts = section_texts(rendered)
    assert len(texts) > 1
    assert [line for text in texts for line in text.split("\n")] == lines


def test_a_table_is_aligned_with_numbers_to_the_right() -> None:
    table = TableBlock("flags", ("flag", "value", "note"), (("--tp-size", "2", "x"), ("--mem", "0.85", "yy")))
    [text] = section_texts(render_block(table))
    assert text.startswith("*flags*\n```\n") and text.endswith("\n```")
    header, rule, first, second = code_lines(text)
    assert header.split() == ["flag", "value", "note"] and set(rule) <= {"-", " "}
    value_end = header.index("value") + len("value")
    assert first[:value_end].endswith(" 2") and second[:value_end].endswith("0.85")
    note_start = header.index("note")
    assert first[note_start:] == "x" and second[note_start:] == "yy"


@SETTINGS
@given(
    columns=st.lists(CELLS, min_size=1, max_size=8),
    rows=st.lists(st.lists(CELLS, max_size=9), max_size=400),
    title=st.text(ALPHABET, max_size=400),
)
def test_huge_tables_are_split_with_the_header_repeated(
    columns: list[str], rows: list[list[str]], title: str
) -> None:
    rendered = render_block(TableBlock(title, tuple(columns), tuple(tuple(row) for row in rows), note="n"))
    check_rendered(rendered)
    texts = section_texts(rendered)
    header, lines = table_lines(columns, rows)
    if header:  # narrow enough to be a table on a phone: the header is repeated in every section
        headers = {tuple(code_lines(text)[:2]) for text in texts}
        assert len(headers) == 1
        assert sum(len(code_lines(text)) - 2 for text in texts) == max(1, len(rows))
    else:  # stacked: every record, each line of it within the phone's width before escaping
        assert all(display_width(line) <= TABLE_WIDTH for record in lines for line in record.split("\n"))
        shown = [unescape(line) for text in texts for line in code_lines(text)]
        assert len(shown) == sum(len(record.split("\n")) for record in lines) or any("…" in x for x in shown)
    assert sum(len(part) for part, _ in messages(rendered.blocks, rendered.text)) == len(rendered.blocks)


def test_a_table_too_wide_for_a_phone_is_stacked_without_a_squeezed_cell() -> None:
    table = TableBlock("Hypotheses on gpu-a", HYPOTHESIS_COLUMNS, HYPOTHESIS_ROWS)
    rendered = render_block(table)
    check_rendered(rendered)
    [text] = section_texts(rendered)
    lines = [unescape(line) for line in code_lines(text)]
    assert lines[0] == "id: 12"
    assert_readable(lines, TABLE_WIDTH, [cell for row in HYPOTHESIS_ROWS for cell in row])


def test_a_wide_comparison_is_stacked_with_its_marks() -> None:
    comparison = MetricComparison(
        "before / after",
        (
            ComparisonRow(
                "median_ttft_ms@c=32", "123.4 ms", "337.6 ms", "+173.6% [-99.6%, +169014.3%]", "regressed"
            ),
            ComparisonRow(
                "output_throughput@c=32", "1,204.5", "1,311.0", "+8.8% [+6.1%, +11.5%]", "improved"
            ),
        ),
    )
    [text] = section_texts(render_block(comparison))
    lines = [unescape(line) for line in code_lines(text)]
    assert lines[0] == "✗ metric: median_ttft_ms@c=32"
    assert "✓ metric: output_throughput@c=32" in lines
    assert_readable(lines, TABLE_WIDTH, [row.change for row in comparison.rows])


def test_a_comparison_marks_worse_and_better_rows() -> None:
    comparison = MetricComparison(
        "before / after",
        (
            ComparisonRow("max_running_requests", "48", "26", "-45.8 %", "regressed"),
            ComparisonRow("output_throughput", "1200.5", "1300.1", "+8.3 %", "improved"),
            ComparisonRow("ttft_p50", "12", "12", "0 %", "no-effect"),
            ComparisonRow("check", "", "", "", "fail"),
            ComparisonRow("check2", "", "", "", "pass"),
        ),
    )
    [text] = section_texts(render_block(comparison))
    header, _, regressed, improved, same, fail, passed = code_lines(text)
    assert header.split() == ["metric", "before", "after", "change", "verdict"]
    assert regressed.startswith("✗") and fail.startswith("✗")
    assert improved.startswith("✓") and passed.startswith("✓")
    assert same.startswith(" ") and not same.strip().startswith(("✓", "✗"))
    after_end = header.index("after") + len("after")
    assert regressed[:after_end].endswith(" 26") and improved[:after_end].endswith("1300.1")


def journal(count: int, **kwargs: Any) -> JournalExcerpt:
    lines = tuple(f"May 01 node0 python[7]: line {i}" for i in range(count))
    return JournalExcerpt("journal", "node0", "journalctl -u sglang -n 400 --grep 'a<b'", lines, **kwargs)


def test_a_short_excerpt_is_inline_with_its_command() -> None:
    rendered = render_block(journal(INLINE_EXCERPT_LINES, match_count=20))
    check_rendered(rendered)
    assert not rendered.files
    context = next(block for block in rendered.blocks if block["type"] == "context")
    assert context["elements"][0]["text"] == "on node0: `journalctl -u sglang -n 400 --grep 'a&lt;b'`"
    assert context["elements"][1]["text"] == "20 matching lines"
    [_, code] = section_texts(rendered)
    assert len(code_lines(code)) == INLINE_EXCERPT_LINES and "attached" not in code


def test_a_long_excerpt_is_attached_whole_with_its_first_lines_inline() -> None:
    block = journal(INLINE_EXCERPT_LINES + 1)
    rendered = render_block(block)
    check_rendered(rendered)
    [upload] = rendered.files
    assert upload.filename == "journal-node0-21.txt"
    assert upload.content.endswith("\n".join(block.lines) + "\n")
    assert block.command in upload.content
    assert "journalctl -u sglang -n 400 --grep 'a&lt;b'" in upload.initial_comment
    code = section_texts(rendered)[-1]
    assert code.endswith("(full excerpt attached)_")
    assert code_lines(code)[0].endswith("line 0")


def test_an_excerpt_too_long_for_a_section_is_attached_even_when_short() -> None:
    block = JournalExcerpt("args", "node 1/x", "journalctl -u s", ("<" * 2000, "ok"))
    rendered = render_block(block)
    check_rendered(rendered)
    assert [upload.filename for upload in rendered.files] == ["journal-node_1_x-2.txt"]
    assert "(full excerpt attached)" in section_texts(rendered)[-1]


def test_the_fatal_line_is_marked_inline_even_deep_in_a_long_excerpt() -> None:
    lines = [f"line {i}" for i in range(300)]
    lines[250] = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    block = JournalExcerpt("failed start", "node0", "journalctl -u s", tuple(lines), highlight=lines[250])
    rendered = render_block(block)
    shown = code_lines(section_texts(rendered)[-1])
    assert [line for line in shown if line.startswith("&gt;&gt; ")] == [f"&gt;&gt; {lines[250]}"]
    assert "line 0" in shown[0] and any(line.startswith("⋮") for line in shown)
    assert len(shown) <= INLINE_EXCERPT_LINES


def test_an_empty_excerpt_with_a_huge_command_is_attached_whole() -> None:
    command = "journalctl --grep " + "x" * 3000
    rendered = render_block(JournalExcerpt("t", "node0", command, ()))
    check_rendered(rendered)
    assert command in rendered.files[0].content
    assert "(no lines)" in section_texts(rendered)[-1]


def test_a_command_with_a_backtick_is_shown_without_a_code_span() -> None:
    rendered = render_block(JournalExcerpt("t", "n", "echo `date`", ("x",)))
    context = next(block for block in rendered.blocks if block["type"] == "context")
    assert context["elements"][0]["text"] == "on n: echo `date`"


@SETTINGS
@given(
    lines=st.lists(big_text(80, 60), max_size=120),
    pick=st.integers(0, 10**6),
    command=big_text(40, 120),
    node=st.text(ALPHABET, max_size=50),
)
def test_random_excerpts_stay_within_limits_and_mark_the_fatal_line(
    lines: list[str], pick: int, command: str, node: str
) -> None:
    highlight = lines[pick % len(lines)] if lines and lines[pick % len(lines)] else None
    rendered = render_block(JournalExcerpt("t", node, command, tuple(lines), highlight=highlight))
    check_rendered(rendered)
    texts = section_texts(rendered)
    assert len(code_lines(texts[-1])) <= max(INLINE_EXCERPT_LINES, 1)
    if rendered.files:
        assert "(full excerpt attached)" in texts[-1]
        assert rendered.files[0].content.endswith("\n".join(lines) + "\n")
    else:
        assert len(lines) <= INLINE_EXCERPT_LINES
    if highlight:
        assert any(line.startswith("&gt;&gt; ") for line in code_lines(texts[-1]))


def test_a_chart_is_an_image_with_its_alt_text() -> None:
    rendered = render_block(ChartBlock("throughput", "state/charts/12.png", alt="flat until 32 <x>"))
    check_rendered(rendered)
    assert rendered.images == [Path("state/charts/12.png")]
    [context] = rendered.blocks
    assert context["elements"][1]["text"] == "flat until 32 &lt;x&gt;"


@pytest.mark.parametrize(
    ("verdict", "emoji"),
    [
        ("improved", "✅"),
        ("regressed", "🔻"),
        ("no-effect", "➖"),
        ("failed-to-start", "💥"),
        ("pass", "✅"),
        ("fail", "❌"),
        ("found", "🔎"),
        ("inconclusive", "❔"),
        ("pinned", "ℹ️"),
    ],
)
def test_a_verdict_leads_with_its_emoji_and_lists_its_details(verdict: str, emoji: str) -> None:
    rendered = render_block(VerdictBlock(verdict, "capacity fell from 48 to 26", ("a < b", "c")))
    check_rendered(rendered)
    [text] = section_texts(rendered)
    assert text == f"{emoji} *{verdict.upper()}* capacity fell from 48 to 26\n• a &lt; b\n• c"


@SETTINGS
@given(headline=big_text(), details=st.lists(big_text(), max_size=30))
def test_huge_verdicts_stay_within_limits(headline: str, details: list[str]) -> None:
    check_rendered(render_block(VerdictBlock("regressed", headline, tuple(details))))


def test_messages_split_at_fifty_blocks() -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": str(i)}} for i in range(120)]
    parts = messages(blocks, "evidence")
    assert [len(part) for part, _ in parts] == [50, 50, 20]
    assert [text for _, text in parts] == ["evidence (1/3)", "evidence (2/3)", "evidence (3/3)"]
    assert [block for part, _ in parts for block in part] == blocks
    assert messages(blocks[:3], "x") == [(blocks[:3], "x")]
    assert messages([], "only text") == [([], "only text")]
    assert messages([], "") == []
    assert len(messages(blocks, "y" * 50_000)[0][1]) <= 40_000


# -- buttons ------------------------------------------------------------------------------------

ACTIONS = ("revert", "keep", "rerun", "isolate", "cancel", "approve", "deny")


@SETTINGS
@given(
    experiment_id=st.integers(1, 2**62),
    action=st.sampled_from(ACTIONS),
    nonce=st.text(st.sampled_from("abcXYZ019_.:-"), min_size=1, max_size=128),
)
def test_an_action_value_round_trips(experiment_id: int, action: str, nonce: str) -> None:
    value = action_value(experiment_id, action, nonce)
    assert len(value) <= 2000 and " " not in value
    parsed = parse_action_value(value)
    assert (parsed.experiment_id, parsed.action, parsed.nonce) == (experiment_id, action, nonce)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "not JSON"),
        ("revert", "not JSON"),
        ("[1, 2]", "JSON object"),
        ('{"experiment_id": 1, "action": "revert"}', "exactly the keys"),
        ('{"experiment_id": 1, "action": "revert", "nonce": "n", "x": 1}', "exactly the keys"),
        ('{"experiment_id": "1", "action": "revert", "nonce": "n"}', "positive integer"),
        ('{"experiment_id": true, "action": "revert", "nonce": "n"}', "positive integer"),
        ('{"experiment_id": 0, "action": "revert", "nonce": "n"}', "positive integer"),
        ('{"experiment_id": 1, "action": "drop-tables", "nonce": "n"}', "unknown action"),
        ('{"experiment_id": 1, "action": "revert", "nonce": ""}', "nonce"),
        ('{"experiment_id": 1, "action": "revert", "nonce": "a b"}', "nonce"),
        ("x" * 2001, "more than Slack's 2000"),
    ],
)
def test_garbage_action_values_are_refused_clearly(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_action_value(value)


def test_action_value_refuses_what_it_could_not_read_back() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        action_value(1, "explode", "n")
    with pytest.raises(ValueError, match="positive integer"):
        action_value(-1, "keep", "n")


def buttons(blocks: list[dict[str, Any]]) -> list[str]:
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def test_verdict_buttons_while_running_and_after() -> None:
    running = verdict_buttons(12, running=True)
    assert running is not None
    done = verdict_buttons(12, running=False, after=("revert", "keep", "rerun", "isolate"), primary="revert")
    assert done is not None
    check_block(running)
    check_block(done)
    assert verdict_buttons(12, running=False) is None  # no outcome chose any: no buttons at all
    assert buttons([running]) == ["flagbot_cancel"]
    assert buttons([done]) == ["flagbot_revert", "flagbot_keep", "flagbot_rerun", "flagbot_isolate"]
    labels = [e["text"]["text"] for e in done["elements"]]
    assert labels == ["Revert", "Keep", "Re-run benchmark", "Isolate"]
    assert [e.get("style") for e in done["elements"]] == ["primary", None, None, None]
    values = [parse_action_value(e["value"]) for e in done["elements"]]
    assert [(v.experiment_id, v.action) for v in values] == [
        (12, "revert"),
        (12, "keep"),
        (12, "rerun"),
        (12, "isolate"),
    ]
    assert len({v.nonce for v in values}) == 4


# -- the status card ----------------------------------------------------------------------------


def card(**changes: Any) -> CardState:
    state = CardState(
        experiment_id=12,
        playbook="try",
        target="gb10-pair",
        actor="<@U123ABC>",
        command="/flagbot try --enable-foo 'max_running_requests>=48'",
        steps=[("preflight", "ok"), ("apply", "running"), ("measure", "pending")],
        status="running",
        verdict=None,
        summary=None,
    )
    for key, value in changes.items():
        setattr(state, key, value)
    return state


def all_text(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(text["text"] for block in blocks for text in texts_of(block))


def test_a_running_card_shows_command_actor_steps_and_cancel() -> None:
    blocks, text = status_card(card())
    for block in blocks:
        check_block(block)
    assert blocks[0]["text"]["text"] == (
        "🔄 try on gb10-pair: step 2 of 3, apply the change and restart every rank"
    )
    shown = all_text(blocks)
    assert "`/flagbot try --enable-foo 'max_running_requests&gt;=48'`" in shown
    assert "try on gb10-pair · #12 · asked by <@U123ABC>" in shown
    assert "✅ 1. preflight checks\n🔄 2. apply the change and restart every rank\n⏳ 3. benchmark" in shown
    assert "Status" not in shown and "Verdict" not in shown
    assert buttons(blocks) == ["flagbot_cancel"]
    assert text == "flagbot try #12 on gb10-pair: running"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("pending", ["flagbot_cancel"]),
        ("running", ["flagbot_cancel"]),
        ("awaiting-approval", ["flagbot_approve", "flagbot_deny"]),
        ("succeeded", ["flagbot_revert", "flagbot_rerun"]),
        ("failed", ["flagbot_revert", "flagbot_rerun"]),
        ("refused", []),
    ],
)
def test_card_buttons_follow_the_status(status: str, expected: list[str]) -> None:
    """While it runs: Cancel; finished: only the buttons chosen for its outcome (`next_actions`)."""
    shown = card(status=status)
    shown.next_actions = ("revert", "rerun")
    blocks, _ = status_card(shown)
    assert buttons(blocks) == expected


def test_a_finished_card_without_chosen_buttons_has_none() -> None:
    blocks, _ = status_card(card(status="succeeded"))
    assert buttons(blocks) == []


def test_a_card_without_an_experiment_has_no_buttons() -> None:
    blocks, text = status_card(card(experiment_id=None, status="pending"))
    assert buttons(blocks) == [] and "#" not in blocks[0]["text"]["text"]
    assert text == "flagbot try on gb10-pair: pending"


def test_a_finished_card_shows_every_step_and_opens_with_its_verdict_and_summary() -> None:
    steps = [(name, name) for name in ("ok", "failed", "skipped", "stopped", "pending", "running")]
    blocks, text = status_card(
        card(steps=steps, status="succeeded", verdict="regressed", summary="48 -> 26 <bad>")
    )
    shown = all_text(blocks)
    assert "✅ 1. ok\n❌ 2. failed\n⏭ 3. skipped\n⏹ 4. stopped\n⏳ 5. pending\n🔄 6. running" in shown
    assert blocks[0]["text"]["text"] == "🔻 try on gb10-pair → *regressed*: 48 -&gt; 26 &lt;bad&gt;"
    assert "succeeded" not in shown and "Status" not in shown  # the outcome is stated once
    assert text == "flagbot try #12 on gb10-pair: regressed - 48 -&gt; 26 &lt;bad&gt;"


def test_a_plain_user_id_becomes_a_mention_and_a_name_is_escaped() -> None:
    assert "asked by <@U999>" in all_text(status_card(card(actor="U999"))[0])
    assert "asked by alice &lt;ops&gt;" in all_text(status_card(card(actor="alice <ops>"))[0])


def without_ids(blocks: list[dict[str, Any]]) -> str:
    return json.dumps([{k: v for k, v in block.items() if k != "block_id"} for block in blocks])


def test_every_render_has_fresh_block_ids_and_nothing_else_changes() -> None:
    state = card(status="succeeded", verdict="improved", summary="better")
    first, first_text = status_card(state)
    second, second_text = status_card(state)
    ids = [block["block_id"] for block in first]
    assert len(set(ids)) == len(ids) == len(first)
    assert not set(ids) & {block["block_id"] for block in second}
    assert without_ids(first) == without_ids(second) and first_text == second_text


@SETTINGS
@given(
    steps=st.lists(st.tuples(big_text(30, 20), st.sampled_from(["ok", "failed", "weird"])), max_size=500),
    summary=big_text(),
    command=big_text(),
    playbook=st.text(ALPHABET, max_size=300),
    actor=st.text(ALPHABET, max_size=300),
)
def test_a_card_stays_within_limits_whatever_it_holds(
    steps: list[tuple[str, str]], summary: str, command: str, playbook: str, actor: str
) -> None:
    blocks, text = status_card(
        card(steps=steps, summary=summary, command=command, playbook=playbook, actor=actor, status="failed")
    )
    assert len(blocks) <= MAX_BLOCKS and len(text) <= 300
    for block in blocks:
        check_block(block)
