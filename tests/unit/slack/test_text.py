"""Slack's escaping of typed text, undone before the grammar reads it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bot.commands import parse_command
from bot.slack.render_tables import escape as slack_escape
from bot.slack.text import typed_text


def test_an_expectation_as_slack_delivers_it_parses() -> None:
    delivered = "verify max_running_requests&gt;=48 output_throughput&gt;=-2%"
    invocation = parse_command(typed_text(delivered))
    assert [str(e) for e in invocation.expectations] == ["max_running_requests>=48", "output_throughput>=-2%"]


def test_a_typed_entity_stays_as_typed() -> None:
    assert typed_text(slack_escape("a &lt; b")) == "a &lt; b"
    assert typed_text("x &amp;&amp; y") == "x && y"


@given(st.text(max_size=80))
def test_escape_then_unescape_gives_back_what_was_typed(typed: str) -> None:
    delivered = slack_escape(typed)
    assert "<" not in delivered and ">" not in delivered
    assert typed_text(delivered) == typed
