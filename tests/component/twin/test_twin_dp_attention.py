"""DP attention through a twin process: per-rank capacity against the share of the parsed total.

The twin runs `--tp 2 --dp 2 --enable-dp-attention` as SGLang 0.5.10 does: one capacity line
(DP rank 0) and one `/server_info` internal state per DP rank, each with `total // 2`.
"""

from __future__ import annotations

import copy
from typing import Any

import httpx

from bot.sglang.log import parse_log_text
from bot.target.observe import max_running_rows
from bot.target.snapshot_facts import capacity
from tests.support.twin_process import TwinFactory, tiny

DP_ATTENTION = ("--tp", "2", "--dp", "2", "--enable-dp-attention")


def _two_gpu_scenario() -> dict[str, Any]:
    scenario = tiny()
    scenario["gpu"]["gpus_per_node"] = 2
    return scenario


def _observe(twins: TwinFactory, max_running: str) -> tuple[str, dict[str, Any]]:
    twin = twins.start(*DP_ATTENTION, "--max-running-requests", max_running, scenario=_two_gpu_scenario())
    twin.wait_ready()
    info = httpx.get(twin.base + "/server_info", timeout=5).json()
    return twin.stderr(), info


def test_each_rank_at_half_the_total_is_no_difference_and_a_lowered_rank_is(twins: TwinFactory) -> None:
    log, info = _observe(twins, "48")
    report = parse_log_text(log)
    capacity_lines = [line for line in log.splitlines() if "max_total_num_tokens=" in line]
    assert len(capacity_lines) == 1 and "DP0 TP0]" in capacity_lines[0]  # SGLang: tp_rank 0 only
    cap = capacity(report, info)
    assert (cap["parsed_max_running_requests"], cap["server_info_effective_per_dp"]) == (48, [24, 24])
    assert cap["notes"] == [] and cap["agree"] is True
    rows = max_running_rows(cap)
    assert rows == (
        ("max_running_requests per DP rank (DP0)", "24 = 48 // 2", "24", "24"),
        ("max_running_requests per DP rank (DP1)", "24 = 48 // 2", "—", "24"),
        ("max_running_requests total (2 DP ranks)", "48", "—", "48"),
    )

    lowered = copy.deepcopy(info)
    lowered["internal_states"][1]["effective_max_running_requests_per_dp"] = 20
    cap = capacity(report, lowered)
    assert cap["agree"] is False
    assert any("24 (DP0), 20 (DP1)" in note for note in cap["notes"])
    assert cap["effective_max_running_requests_total"] == 44


def test_a_share_the_server_cannot_grant_is_still_a_difference(twins: TwinFactory) -> None:
    """10000 // 2 = 5000 per rank, but 0.5.10 caps each rank at its pool estimate."""
    log, info = _observe(twins, "10000")
    cap = capacity(parse_log_text(log), info)
    granted = cap["effective_max_running_requests"]
    assert granted is not None and granted < 5000
    assert any(
        f"effective max_running_requests {granted} differs from the parsed 5000 (its share of the total "
        "10000 over 2 DP ranks)" in note
        for note in cap["notes"]
    )
