"""SGLang's state-cache cap on max_running_requests, per release (bot/sglang/state_cache.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sglang.state_cache import explain, slots_per_request

NO_BUFFER: dict[str, Any] = {"disable_radix_cache": False, "mamba_scheduler_strategy": "no_buffer"}
EXTRA: dict[str, Any] = {"disable_radix_cache": False, "mamba_scheduler_strategy": "extra_buffer"}


@pytest.mark.parametrize(
    ("args", "version", "ratio"),
    [
        (NO_BUFFER, "0.5.10", 3),
        ({**NO_BUFFER, "disable_radix_cache": True}, "0.5.9", 1),
        ({**EXTRA, "disable_overlap_schedule": False}, "0.5.10", 5),  # 3 + 2 with overlap
        ({**EXTRA, "disable_overlap_schedule": True}, "0.5.10", 4),  # 3 + 1 without
        ({**EXTRA, "speculative_algorithm": "EAGLE", "disable_overlap_schedule": False}, "0.5.9", 4),
        ({**EXTRA, "speculative_algorithm": None}, "0.5.9", 5),
        ({**EXTRA, "disable_overlap_schedule": True}, "not-a-version", 4),
    ],
)
def test_state_slots_per_request_follow_each_release(args: dict[str, Any], version: str, ratio: int) -> None:
    assert slots_per_request(args, version)[0] == ratio


def test_the_seeds_numbers_say_the_state_cache_caps_not_kv_memory() -> None:
    state = {"max_mamba_cache_size": 79}
    text = explain(26, 48, state, None, NO_BUFFER, "0.5.10")
    assert text is not None
    assert text.startswith("26 = max_mamba_cache_size 79 // 3: the hybrid state cache, not KV memory")


def test_the_0_5_23_warning_numbers_are_taken_as_printed() -> None:
    cap = {"max_running_requests": 26, "max_mamba_cache_size": 79, "ratio": 3}
    text = explain(26, 48, None, cap, {}, "0.5.23")
    assert text is not None and text.startswith("26 = max_mamba_cache_size 79 // 3")


@pytest.mark.parametrize(
    ("effective", "parsed", "state"),
    [
        (30, 48, {"max_mamba_cache_size": 79}),  # 79 // 3 is 26: another limit binds
        (26, 26, {"max_mamba_cache_size": 79}),  # what was asked: nothing capped it
        (26, 48, None),  # no state cache: not a hybrid model
        (None, 48, {"max_mamba_cache_size": 79}),
    ],
)
def test_no_state_cache_explanation_when_it_does_not_bind(
    effective: int | None, parsed: int, state: dict[str, Any] | None
) -> None:
    assert explain(effective, parsed, state, None, NO_BUFFER, "0.5.10") is None
