"""Try's "Capacity: before vs after" when the change turns DP attention on: totals compare."""

from __future__ import annotations

from bot.loop.steps.measure_steps import _capacity_rows


def test_turning_dp_attention_on_keeps_the_same_total_and_shows_the_rank_share() -> None:
    before = {"server_args": {"max_running_requests": 48}, "effective": {"max_running_requests": 48}}
    after = {
        "server_args": {"max_running_requests": 48, "dp_size": 2, "enable_dp_attention": True},
        "effective": {"max_running_requests": 48, "max_running_requests_per_dp": 24},
    }
    rows = {row.metric: row for row in _capacity_rows(before, after)}
    assert rows["max_running_requests (effective)"].verdict == "same"
    assert rows["max_running_requests (parsed, server_args)"].verdict == "same"
    shown = rows["max_running_requests per DP rank (effective, DP attention)"]
    assert (shown.before, shown.after) == ("-", "24")
