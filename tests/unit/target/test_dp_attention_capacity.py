"""DP attention: each DP rank's effective `max_running_requests` against its share of the total.

SGLang divides the parsed total by `dp_size` under DP attention (model_runner_kv_cache_mixin.py
`_resolve_max_num_reqs`), reports one `internal_states` entry per DP rank and prints the capacity
line on DP rank 0 only; a per-rank value next to the total is therefore no difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.sglang.log import parse_log_lines
from bot.target.snapshot_facts import capacity, dp_attention_size, effective_values, per_dp_share

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "sglang-logs"


def _server_args(total: int, dp: int, *, dp_attention: bool) -> str:
    return (
        "[2026-11-29 20:14:39] server_args=ServerArgs(model_path='/m', tokenizer_path='/m', "
        f"tp_size=4, max_running_requests={total}, dp_size={dp}, "
        f"enable_dp_attention={dp_attention}, chunked_prefill_size=8192)"
    )


def _capacity_line(per_dp: int, dp: int) -> str:
    prefix = "DP0 TP0" if dp > 1 else "TP0"
    return (
        f"[2026-11-29 20:14:47 {prefix}] max_total_num_tokens=1833679, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={per_dp}, context_len=262144, "
        "available_gpu_mem=13.26 GB"
    )


def _server_info(total: int, per_rank: list[int]) -> dict[str, Any]:
    """/server_info as SGLang 0.5.10 answers it: post-init args, one internal state per DP rank."""
    return {
        "max_running_requests": total,
        "max_total_num_tokens": 1833679,
        "internal_states": [
            {
                "max_running_requests": total,
                "last_gen_throughput": 0.0,
                "memory_usage": {"weight": 30.1, "kvcache": 40.2, "token_capacity": 1833679, "graph": 1.5},
                "effective_max_running_requests_per_dp": value,
            }
            for value in per_rank
        ],
    }


@pytest.mark.parametrize("dp", [1, 2, 4])
def test_each_rank_at_its_share_of_the_total_is_no_difference(dp: int) -> None:
    share = 48 // dp
    report = parse_log_lines([_server_args(48, dp, dp_attention=dp > 1), _capacity_line(share, dp)])
    cap = capacity(report, _server_info(48, [share] * dp))
    assert cap["notes"] == []
    assert cap["agree"] is True
    assert cap["dp_attention_size"] == dp
    assert cap["parsed_max_running_requests_per_dp"] == share
    assert cap["effective_max_running_requests_total"] == 48


@pytest.mark.parametrize("dp", [2, 4])
def test_one_rank_below_its_share_is_named(dp: int) -> None:
    share = 48 // dp
    per_rank = [share] * (dp - 1) + [share - 2]
    report = parse_log_lines([_server_args(48, dp, dp_attention=True), _capacity_line(share, dp)])
    cap = capacity(report, _server_info(48, per_rank))
    assert cap["agree"] is False
    assert any(f"{share - 2} (DP{dp - 1})" in note for note in cap["notes"])
    assert cap["effective_max_running_requests_total"] == 46


def test_every_rank_below_its_share_differs_from_the_share_not_the_total() -> None:
    report = parse_log_lines([_server_args(48, 2, dp_attention=True), _capacity_line(13, 2)])
    cap = capacity(report, _server_info(48, [13, 13]))
    assert cap["agree"] is True
    assert cap["notes"] == [
        "effective max_running_requests 13 differs from the parsed 24 (its share of the total 48 over "
        "2 DP ranks): the server runs with a different request limit than its arguments say"
    ]


def test_dp_without_dp_attention_keeps_the_whole_limit_per_replica() -> None:
    """Plain DP replicas each run the parsed value: 48 per replica is no difference."""
    report = parse_log_lines([_server_args(48, 2, dp_attention=False), _capacity_line(48, 2)])
    cap = capacity(report, _server_info(48, [48, 48]))
    assert cap["dp_attention_size"] == 1
    assert cap["notes"] == []


def test_real_dp16_log_256_parsed_16_per_rank_is_no_difference() -> None:
    """Corpus 021.log (Ascend, --tp 16 --dp-size 16 --enable-dp-attention): 256 total, 16 per rank."""
    lines = (CORPUS / "021.log").read_text(encoding="utf-8").splitlines()
    report = parse_log_lines(lines)
    assert report.parsed["max_running_requests"] == 256
    assert report.effective["max_running_requests"] == 16
    cap = capacity(report, _server_info(256, [16] * 16))
    assert dp_attention_size(report.server_args) == 16
    assert not any("max_running_requests" in note for note in cap["notes"])
    assert cap["effective_max_running_requests_total"] == 256


def test_share_and_size_follow_sglang() -> None:
    assert per_dp_share(49, 2) == 24
    assert per_dp_share(None, 4) is None
    assert dp_attention_size({"dp_size": 4, "enable_dp_attention": True}) == 4
    assert dp_attention_size({"dp_size": 4, "enable_dp_attention": False}) == 1
    assert dp_attention_size(None) == 1


def test_the_snapshot_keeps_the_total_under_dp_attention_and_the_rank_value_apart() -> None:
    report = parse_log_lines([_server_args(48, 2, dp_attention=True), _capacity_line(24, 2)])
    effective = effective_values(report.effective, capacity(report, _server_info(48, [24, 24])))
    assert (effective["max_running_requests"], effective["max_running_requests_per_dp"]) == (48, 24)
    plain = parse_log_lines([_server_args(48, 1, dp_attention=False), _capacity_line(26, 1)])
    effective = effective_values(plain.effective, capacity(plain, _server_info(48, [26])))
    assert effective["max_running_requests"] == 26 and "max_running_requests_per_dp" not in effective
