"""Slack's `status` line names a node's unit only where it is not node 0's (a head/worker layout)."""

from __future__ import annotations

from bot.slack.dispatch import _own_unit


def test_a_node_with_another_unit_than_node_0_is_named_with_it() -> None:
    assert _own_unit({"node": "b", "unit": "sglang-worker.service"}, "sglang-head.service") == (
        " (sglang-worker.service)"
    )
    assert _own_unit({"node": "a", "unit": "sglang-head.service"}, "sglang-head.service") == ""
    assert _own_unit({"node": "a"}, "sglang-head.service") == ""
