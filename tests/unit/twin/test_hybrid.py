"""The twin's hybrid-model path against SGLang 0.5.9 / 0.5.10's sources (issue 21, item 2).

Each test names the function of the released wheel it holds the twin to (`engine/hybrid.py`,
docs/twin.md "Hybrid models"): `_handle_mamba_radix_cache`, `handle_max_mamba_cache`,
`_calculate_mamba_ratio` / `init_memory_pool`, `adjust_mem_fraction_for_vlm`.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from bot.sglang.adjustments import flag_of
from bot.sglang.log import parse_log_lines
from bot.sglang.state_cache import explain
from flagbot_lab.twin.engine.hybrid import (
    E_EXTRA_BUFFER_NO_RADIX_0_5_10,
    GIB,
    W_MAMBA_NO_OVERLAP,
    W_MAMBA_SPEC_RADIX_0_5_9,
    adjust_mem_fraction_for_vlm,
    mamba_ratio,
    size_state_cache,
)
from flagbot_lab.twin.engine.releases import release
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import Resolved, resolve, resolve_args
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_launch import pair_argv

ARCH = "Qwen3_5MoeForConditionalGeneration"
REFUSAL_0_5_10 = (
    "ValueError: Speculative decoding for Qwen3_5MoeForConditionalGeneration is not compatible with "
    "radix cache when using --mamba-scheduler-strategy no_buffer.To use radix cache with speculative "
    "decoding, please use --mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
)
"""0.5.10 `srt/server_args.py` `_handle_mamba_radix_cache`, the two literals joined as Python joins them."""
STATE = 52428800
"""seed-gb10's `state_bytes_per_request` (50 MiB)."""


@cache
def _scenario(name: str) -> Scenario:
    return scenario_from_dict(compile_scenario(name))


def _gb10(*extra: str, name: str = "seed-gb10") -> list[str]:
    return pair_argv(_scenario(name).launch, 0, *extra)


def _no_buffer(*extra: str) -> list[str]:
    """seed-gb10's launch line with the default strategy (argparse: the last value wins)."""
    return _gb10("--mamba-scheduler-strategy", "no_buffer", *extra)


def _lines(resolved: Resolved) -> list[str]:
    now, lines = 1_764_000_000.0, []
    for step in resolved.steps:
        now += step.delay_s
        lines.append(step.render(now))
    return lines


# -- _handle_mamba_radix_cache -------------------------------------------------------------------


def test_0_5_10_refuses_eagle_with_the_radix_cache_and_no_buffer() -> None:
    resolved = resolve(_no_buffer(), _scenario("seed-gb10"), start_seed=1)
    assert resolved.failure == REFUSAL_0_5_10
    # raised in the main process's post-init: Python exits 1, no scheduler, no SIGQUIT kill
    assert (resolved.exit_code, resolved.killed_by) == (1, None)
    lines = _lines(resolved)
    assert lines[-1] == REFUSAL_0_5_10
    assert "Traceback (most recent call last):" in lines
    assert not any("server_args=" in line for line in lines)  # refused before it is printed
    assert resolved.effective["max_running_requests"] == 0


def test_the_refusal_is_the_headline_flagbot_reads() -> None:
    report = parse_log_lines(_lines(resolve(_no_buffer(), _scenario("seed-gb10"), start_seed=1)))
    assert report.current.startup_error == REFUSAL_0_5_10
    assert not report.current.has_server_args


def test_0_5_10_refuses_extra_buffer_without_the_radix_cache() -> None:
    resolved = resolve(_gb10("--disable-radix-cache"), _scenario("seed-gb10"), start_seed=1)
    assert resolved.failure == f"ValueError: {E_EXTRA_BUFFER_NO_RADIX_0_5_10}"


def test_0_5_9_turns_the_radix_cache_off_and_sizes_the_state_cache_to_the_request_limit() -> None:
    scenario = _scenario("seed-gb10-0.5.9")  # the seeds' launch line: EAGLE, no_buffer, radix on
    resolved = resolve(_gb10(name="seed-gb10-0.5.9"), scenario, start_seed=1)
    assert resolved.failure is None
    assert W_MAMBA_SPEC_RADIX_0_5_9.format(arch=ARCH) in resolved.warnings
    assert resolved.server_args["disable_radix_cache"] is True
    plan = resolved.memory
    # handle_max_mamba_cache: --disable-radix-cache and max_running_requests 48 -> 48 slots, ratio 1
    assert (plan.max_mamba_cache_size, plan.mamba_ratio, plan.max_running_requests) == (48, 1, 48)
    assert flag_of(W_MAMBA_SPEC_RADIX_0_5_9.format(arch=ARCH)) == "disable_radix_cache"


@pytest.mark.parametrize("version", ["0.5.9", "0.5.10"])
def test_a_hybrid_model_without_speculation_loses_the_overlap_scheduler_with_a_warning(version: str) -> None:
    scenario = _scenario("seed-gb10" if version == "0.5.10" else "seed-gb10-0.5.9")
    argv = ["--model-path", "/m", "--tp", "2"]
    post = resolve_args(argv, scenario, seed=1, env={})
    assert post.refused is None
    assert post.warnings == [W_MAMBA_NO_OVERLAP]
    assert post.server_args["disable_overlap_schedule"] is True
    assert post.server_args["disable_radix_cache"] is False
    assert flag_of(W_MAMBA_NO_OVERLAP) == "disable_overlap_schedule"


# -- handle_max_mamba_cache ----------------------------------------------------------------------


def test_speculative_decoding_reserves_state_per_request_x_requests_x_draft_tokens_first() -> None:
    args = {"speculative_algorithm": "EAGLE", "max_running_requests": 48, "speculative_num_draft_tokens": 4}
    cache_ = size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=1)
    assert cache_.speculative_reservation_gib == pytest.approx(STATE * 48 * 4 / GIB)  # 9.375
    assert cache_.rule == "ratio"
    # the ratio split (0.9 / 1.9) of what the reservation leaves
    assert cache_.max_mamba_cache_size == int((30.0 - 9.375) * 0.9 / 1.9 * GIB) // STATE
    assert cache_.kv_rest_gib == pytest.approx(30.0 - 9.375 - cache_.max_mamba_cache_size * STATE / GIB)
    plain = size_state_cache(30.0, {}, state_bytes_per_request=STATE, dp_size=1)
    assert plain.speculative_reservation_gib == 0.0
    assert plain.max_mamba_cache_size > cache_.max_mamba_cache_size


def test_the_state_pool_holds_one_padding_slot_more_than_the_profile_counts() -> None:
    """0.5.10 `MambaPool.__init__` allocates `(num_layers, size + 1, ...)` tensors (slot 0 pads)
    and its `Mamba Cache is allocated` line prints them; `handle_max_mamba_cache` counts `size`.
    By hand: rest 30 GiB, EAGLE 48 x 4 drafts, 400 slots of 50 MiB: the reservation is
    9.375 GiB, the profile's state 19.53125 GiB, the KV rest 1.09375 GiB, the pool 401 slots."""
    args = {
        "speculative_algorithm": "EAGLE",
        "max_running_requests": 48,
        "speculative_num_draft_tokens": 4,
        "max_mamba_cache_size": 400,
    }
    cache_ = size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=1)
    assert cache_.state_gib == pytest.approx(19.53125)
    assert cache_.kv_rest_gib == pytest.approx(1.09375)
    assert cache_.pool_gib == pytest.approx(401 * 50 / 1024)  # 19.580078125
    scenario = _scenario("seed-gb10")
    assert scenario.model.hybrid is not None
    plan = resolve(_gb10("--max-mamba-cache-size", "400"), scenario, start_seed=1).memory
    assert plan.mamba_state_gib == pytest.approx(
        (400 + 1) * scenario.model.hybrid.state_bytes_per_request / GIB
    )


def test_the_reservation_counts_requests_per_dp_rank_under_dp_attention() -> None:
    args = {
        "speculative_algorithm": "EAGLE",
        "max_running_requests": 48,
        "speculative_num_draft_tokens": 4,
        "enable_dp_attention": True,
    }
    cache_ = size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=2)
    assert cache_.speculative_reservation_gib == pytest.approx(STATE * 24 * 4 / GIB)


def test_disable_radix_cache_with_max_running_requests_sizes_the_state_cache_to_it() -> None:
    argv = _no_buffer("--disable-radix-cache", "--max-running-requests", "32")
    resolved = resolve(argv, _scenario("seed-gb10"), start_seed=1)
    assert resolved.failure is None
    plan = resolved.memory
    assert (plan.max_mamba_cache_size, plan.mamba_ratio, plan.max_running_requests) == (32, 1, 32)
    args = {"disable_radix_cache": True, "max_running_requests": 32, "enable_dp_attention": True}
    assert size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=4).max_mamba_cache_size == 8


def test_an_explicit_max_mamba_cache_size_is_divided_by_dp_under_dp_attention_only() -> None:
    args = {"max_mamba_cache_size": 200, "enable_dp_attention": True}
    assert size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=2).max_mamba_cache_size == 100
    args["enable_dp_attention"] = False
    explicit = size_state_cache(30.0, args, state_bytes_per_request=STATE, dp_size=2)
    assert (explicit.max_mamba_cache_size, explicit.rule) == (200, "explicit")


# -- the ratio: _calculate_mamba_ratio (0.5.10), init_memory_pool (0.5.9) -------------------------


@pytest.mark.parametrize(
    ("version", "args", "ratio"),
    [
        ("0.5.10", {"disable_radix_cache": True, "mamba_scheduler_strategy": "extra_buffer"}, 1),
        ("0.5.10", {"mamba_scheduler_strategy": "no_buffer"}, 3),
        ("0.5.10", {"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": False}, 5),
        ("0.5.10", {"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": True}, 4),
        ("0.5.9", {"mamba_scheduler_strategy": "extra_buffer", "speculative_algorithm": "EAGLE"}, 4),
        ("0.5.9", {"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": True}, 5),
    ],
)
def test_the_extra_buffer_ratio_per_release(version: str, args: dict[str, object], ratio: int) -> None:
    assert mamba_ratio(args, release(version)) == ratio


def test_spec_v2_keeps_the_overlap_scheduler_so_the_seed_needs_five_slots_per_request() -> None:
    scenario = _scenario("seed-gb10")
    v1 = resolve(_gb10(), scenario, start_seed=1, env={})
    v2 = resolve(_gb10(), scenario, start_seed=1, env={"SGLANG_ENABLE_SPEC_V2": "1"})
    assert (v1.server_args["disable_overlap_schedule"], v1.memory.mamba_ratio) == (True, 4)
    assert (v2.server_args["disable_overlap_schedule"], v2.memory.mamba_ratio) == (False, 5)


# -- the seed, re-based ------------------------------------------------------------------------


def test_seed_gb10_48_to_26_is_the_fused_workspace_shrinking_what_sizes_the_state_cache() -> None:
    scenario = _scenario("seed-gb10")
    base = resolve(_gb10(), scenario, start_seed=3)
    fused = resolve(_gb10("--enable-fused-moe-sum-all-reduce"), scenario, start_seed=3)
    assert base.server_args["max_running_requests"] == fused.server_args["max_running_requests"] == 48
    assert base.effective["max_running_requests"] == 48
    assert fused.effective["max_running_requests"] == 26
    size = fused.memory.max_mamba_cache_size
    assert size is not None and size // 4 == 26
    report = parse_log_lines(_lines(fused)).current
    assert report.state_cache is not None and report.state_cache["max_mamba_cache_size"] == size
    sentence = explain(26, 48, report.state_cache, report.mamba_cap, report.server_args, "0.5.10")
    assert sentence is not None and sentence.startswith(f"26 = max_mamba_cache_size {size} // 4:")


# -- adjust_mem_fraction_for_vlm -----------------------------------------------------------------


def test_the_vlm_adjustment_follows_the_vision_tower() -> None:
    assert adjust_mem_fraction_for_vlm(0.9, 24, 1024) == pytest.approx(0.9 * 0.95)  # ViT-L/14: 0.95
    assert adjust_mem_fraction_for_vlm(0.9, 27, 1152) == pytest.approx(
        0.9 * 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))
    )
    assert adjust_mem_fraction_for_vlm(0.9, 64, 4096) == pytest.approx(0.9 * 0.95 * 0.8)  # clamped low
    assert adjust_mem_fraction_for_vlm(0.9, 1, 64) == pytest.approx(0.9 * 0.95 * 1.05)  # clamped high


def test_an_explicit_mem_fraction_static_is_not_adjusted_and_a_text_model_is_not_either() -> None:
    scenario = _scenario("seed-gb10")
    given = resolve_args(_gb10("--mem-fraction-static", "0.8"), scenario, seed=1, env={})
    assert given.server_args["mem_fraction_static"] == 0.8
    model = dataclasses.replace(scenario.model, multimodal=False)
    text_only = dataclasses.replace(scenario, model=model)
    vlm = resolve_args(_gb10(), scenario, seed=1, env={}).server_args["mem_fraction_static"]
    plain = resolve_args(_gb10(), text_only, seed=1, env={}).server_args["mem_fraction_static"]
    assert plain == 0.856 and vlm == pytest.approx(adjust_mem_fraction_for_vlm(0.856, 27, 1152))


def test_0_5_9_caps_speculative_requests_per_dp_rank_under_dp_attention() -> None:
    """0.5.9 `init_memory_pool`: `min(max_num_reqs, max_running_requests // dp_size)` for a hybrid
    model with speculative decoding and DP attention (0.5.10 divides the explicit value anyway)."""
    scenario = _scenario("seed-gb10-0.5.9")
    flags = ("--mamba-scheduler-strategy", "extra_buffer", "--enable-dp-attention", "--dp-size", "2")
    argv = _gb10(*flags, "--max-running-requests", "40", name="seed-gb10-0.5.9")
    resolved = resolve(argv, scenario, start_seed=1)
    assert resolved.failure is None
    plan = resolved.memory
    assert plan.mamba_ratio == 4 and plan.max_mamba_cache_size is not None
    assert plan.max_mamba_cache_size // 4 > 40  # the state cache alone would allow all 40
    assert plan.max_running_requests == 20
