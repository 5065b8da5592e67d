"""The twin's hybrid-model path against SGLang 0.5.23's sources (issue 21, item 2).

0.5.23 moved every step of 0.5.9 / 0.5.10's path (`test_hybrid.py`): the strategy resolves in
`srt/arg_groups/overrides.py` `_mamba_radix_cache_resolution`, the state cache is sized by
`srt/mem_cache/kv_cache_configurator.py` `_handle_max_mamba_cache` and capped by its
`_calculate_mamba_ratio` / `resolve_max_num_reqs`. Each test names the function it holds the twin
to (`engine/hybrid.py`, docs/twin.md "Hybrid models").
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

import pytest

from flagbot_lab.twin.engine.hybrid import (
    GIB,
    W_MAMBA_NO_OVERLAP,
    mamba_ratio,
    no_request_fits_0_5_23,
    resolve_mamba_radix_cache_0_5_23,
    size_state_cache_0_5_23,
    state_cache_too_small_0_5_23,
    vlm_reservation_line_0_5_23,
)
from flagbot_lab.twin.engine.memory import mamba_cap_warning, plan_memory
from flagbot_lab.twin.engine.releases import release
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import Resolved, resolve, resolve_args
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_launch import pair_argv

ARCH = "Qwen3_5MoeForConditionalGeneration"
STATE = 55050240
"""seed-gb10-0.5.23's `state_bytes_per_request` (52.5 MiB)."""
R = release("0.5.23")
MAMBA_CAP = (
    "max_running_requests is capped to %d by the mamba state cache (max_mamba_cache_size=%d, %d state "
    "slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or "
    "halve the state size with --mamba-ssm-dtype bfloat16."
)
"""0.5.23 `kv_cache_configurator.py` `resolve_max_num_reqs`' logger.warning format, joined as Python joins it."""


@cache
def _scenario() -> Scenario:
    return scenario_from_dict(compile_scenario("seed-gb10-0.5.23"))


def _start(*extra: str, seed: int = 1) -> Resolved:
    return resolve(pair_argv(_scenario().launch, 0, *extra), _scenario(), start_seed=seed, env={})


def _lines(resolved: Resolved) -> list[str]:
    return [step.message for step in resolved.steps]


# -- _mamba_radix_cache_resolution ---------------------------------------------------------------


def test_eagle_with_the_radix_cache_is_accepted_and_resolves_to_extra_buffer() -> None:
    """0.5.10 refuses this launch line (no_buffer, radix on, EAGLE); 0.5.23's `auto` sees the
    overlap scheduler wanted (spec v2 keeps it on) and the model supporting the extra buffer."""
    resolved = _start()
    assert resolved.failure is None
    a = resolved.server_args
    assert (a["mamba_radix_cache_strategy"], a["uses_mamba_radix_cache"]) == ("extra_buffer", True)
    assert (a["disable_overlap_schedule"], a["disable_radix_cache"]) == (False, False)
    assert resolved.memory.mamba_ratio == 5  # 3 + 2 ping-pong slots with the overlap scheduler on


def test_without_the_overlap_scheduler_auto_becomes_no_buffer_silently() -> None:
    post = resolve_args(
        ["--model-path", "/m", "--tp", "2", "--disable-overlap-schedule"], _scenario(), seed=1, env={}
    )
    a = post.server_args
    assert (a["mamba_radix_cache_strategy"], a["uses_mamba_radix_cache"]) == ("no_buffer", True)
    assert W_MAMBA_NO_OVERLAP not in [*post.warnings, *post.logged_warnings]  # 0.5.23 has no such warning
    plain = resolve_args(["--model-path", "/m", "--tp", "2"], _scenario(), seed=1, env={})
    # no speculation, overlap wanted: extra_buffer, and the overlap scheduler stays on (0.5.10 turns it off)
    assert plain.server_args["mamba_radix_cache_strategy"] == "extra_buffer"
    assert plain.server_args["disable_overlap_schedule"] is False


@pytest.mark.parametrize(
    ("args", "arch", "strategy", "overlap_off"),
    [
        ({"disable_overlap_schedule": True, "page_size": 16}, ARCH, "extra_buffer", True),  # paging wants it
        ({"linear_attn_backend": "flashinfer"}, ARCH, "no_buffer", True),  # extra buffer needs triton
        ({}, "Lfm2ForCausalLM", "no_buffer", True),  # radix-cache arch without extra-buffer support
        ({"mamba_radix_cache_strategy": "no_buffer"}, ARCH, "no_buffer", False),  # explicit: kept as given
    ],
)
def test_the_auto_strategy_per_condition(
    args: dict[str, Any], arch: str, strategy: str, overlap_off: bool
) -> None:
    a: dict[str, Any] = {"mamba_radix_cache_strategy": "auto", "disable_overlap_schedule": False, **args}
    resolve_mamba_radix_cache_0_5_23(a, arch)
    assert (a["mamba_radix_cache_strategy"], a["disable_overlap_schedule"]) == (strategy, overlap_off)
    assert a["uses_mamba_radix_cache"] is True


def test_the_radix_cache_off_or_another_architecture_leaves_everything_as_it_was() -> None:
    for a, arch in (({"disable_radix_cache": True}, ARCH), ({}, "Qwen3MoeForCausalLM")):
        before = {"mamba_radix_cache_strategy": "auto", "disable_overlap_schedule": False, **a}
        after = dict(before)
        resolve_mamba_radix_cache_0_5_23(after, arch)
        assert after == before


# -- _calculate_mamba_ratio -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "ratio"),
    [
        ({"disable_radix_cache": True, "mamba_radix_cache_strategy": "extra_buffer"}, 1),
        ({"mamba_radix_cache_strategy": "no_buffer"}, 3),
        ({"mamba_radix_cache_strategy": "extra_buffer", "disable_overlap_schedule": False}, 5),
        ({"mamba_radix_cache_strategy": "extra_buffer", "disable_overlap_schedule": True}, 4),
        ({"mamba_radix_cache_strategy": "extra_buffer_lazy"}, 4),
    ],
)
def test_the_slots_per_request(args: dict[str, Any], ratio: int) -> None:
    assert mamba_ratio(args, R) == ratio


# -- _handle_max_mamba_cache ----------------------------------------------------------------------


def test_speculative_decoding_is_solved_jointly_with_the_state_cache_in_the_ratio_budget() -> None:
    args = {"speculative_algorithm": "EAGLE", "max_running_requests": 48, "speculative_num_draft_tokens": 4}
    got = size_state_cache_0_5_23(30.0, args, state_bytes_per_request=STATE, dp_size=1, ratio=5)
    budget = 30.0 * 0.9 / 1.9 * GIB
    size = int((budget - STATE * (1 + 4)) // (STATE * (1 + 4 / 5)))
    assert (got.max_mamba_cache_size, got.rule) == (size, "ratio")
    # the intermediate states of min(48, size // 5) requests + the padding slot, per draft token
    assert got.speculative_reservation_gib == pytest.approx(STATE * (min(48, size // 5) + 1) * 4 / GIB)
    assert got.state_gib == pytest.approx((size + 1) * STATE / GIB)  # + the pool's padding slot
    assert got.kv_rest_gib == pytest.approx(30.0 - got.speculative_reservation_gib - got.state_gib)
    plain = size_state_cache_0_5_23(30.0, {}, state_bytes_per_request=STATE, dp_size=1, ratio=5)
    assert plain.max_mamba_cache_size == int((budget - STATE) // STATE)
    assert plain.speculative_reservation_gib == 0.0
    ratio = size_state_cache_0_5_23(
        30.0, {"mamba_full_memory_ratio": 0.5}, state_bytes_per_request=STATE, dp_size=1, ratio=3
    )
    assert ratio.max_mamba_cache_size == int((30.0 * 0.5 / 1.5 * GIB - STATE) // STATE)


def test_disable_radix_cache_with_max_running_requests_sizes_the_state_cache_per_dp_rank() -> None:
    args = {
        "disable_radix_cache": True,
        "max_running_requests": 48,
        "enable_dp_attention": True,
        "speculative_algorithm": "EAGLE",
        "speculative_num_draft_tokens": 4,
    }
    got = size_state_cache_0_5_23(30.0, args, state_bytes_per_request=STATE, dp_size=4, ratio=1)
    assert (got.max_mamba_cache_size, got.rule) == (12, "max_running_requests")
    assert got.speculative_reservation_gib == pytest.approx(STATE * 13 * 4 / GIB)
    resolved = _start("--disable-radix-cache", "--max-running-requests", "32")
    plan = resolved.memory
    assert (plan.max_mamba_cache_size, plan.mamba_ratio, plan.max_running_requests) == (32, 1, 32)
    assert resolved.server_args["uses_mamba_radix_cache"] is False


def test_an_explicit_max_mamba_cache_size_is_divided_by_dp_under_dp_attention_only() -> None:
    args: dict[str, Any] = {"max_mamba_cache_size": 200, "enable_dp_attention": True}
    assert (
        size_state_cache_0_5_23(
            30.0, args, state_bytes_per_request=STATE, dp_size=2, ratio=3
        ).max_mamba_cache_size
        == 100
    )
    args["enable_dp_attention"] = False
    explicit = size_state_cache_0_5_23(30.0, args, state_bytes_per_request=STATE, dp_size=2, ratio=3)
    assert (explicit.max_mamba_cache_size, explicit.rule) == (200, "explicit")
    spec = {
        **args,
        "speculative_algorithm": "EAGLE",
        "max_running_requests": 48,
        "speculative_num_draft_tokens": 4,
    }
    capped = size_state_cache_0_5_23(30.0, spec, state_bytes_per_request=STATE, dp_size=1, ratio=5)
    assert capped.speculative_reservation_gib == pytest.approx(STATE * (40 + 1) * 4 / GIB)  # 200 // 5 < 48


def test_no_state_slot_left_is_0_5_23s_runtime_error() -> None:
    resolved = _start("--max-mamba-cache-size", "2")
    assert resolved.failure == "RuntimeError: " + no_request_fits_0_5_23(2, 5, 0)
    assert resolved.failure.startswith(
        "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size=2, mamba_ratio=5, resulting max_num_reqs=0. Try: (1) reduce"
    )
    starved = _start("--mem-fraction-static", "0.515")
    assert starved.failure is not None
    assert starved.failure.startswith(
        "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache."
    )
    assert state_cache_too_small_0_5_23(-3, 1.5, STATE) == (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=-3 "
        "(total_rest_memory=1.50 GB, mamba_cache_per_req=52.50 MB). Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) use GPUs with "
        "more memory."
    )


# -- the seed on 0.5.23, and what it prints ----------------------------------------------------------


def test_the_seed_is_capped_by_the_state_cache_and_the_fused_workspace_cuts_it_further() -> None:
    base, fused = _start(), _start("--enable-fused-moe-sum-all-reduce")
    assert base.server_args["max_running_requests"] == fused.server_args["max_running_requests"] == 48
    for resolved, slots, effective in ((base, 172, 34), (fused, 124, 24)):
        plan = resolved.memory
        assert (plan.max_mamba_cache_size, plan.mamba_ratio) == (slots, 5)
        assert resolved.effective["max_running_requests"] == slots // 5 == effective
        # the warning of resolve_max_num_reqs, in logging's %d form, on every rank
        assert _lines(resolved).count(MAMBA_CAP % (effective, slots, 5)) == 1  # node 0 has one rank
        assert mamba_cap_warning(effective, slots, 5) == MAMBA_CAP % (effective, slots, 5)


@pytest.mark.parametrize("jitter", [-0.03, 0.0, 0.03])
def test_34_and_24_hold_at_both_ends_of_the_jitter(jitter: float) -> None:
    scenario = _scenario()
    assert scenario.noise.restart_memory_jitter_gib == 0.03
    for extra, effective in (((), 34), (("--enable-fused-moe-sum-all-reduce",), 24)):
        post = resolve_args(pair_argv(scenario.launch, 0, *extra), scenario, seed=1, env={})
        assert plan_memory(post.server_args, scenario, jitter_gib=jitter).max_running_requests == effective


def test_the_multimodal_reservation_is_logged_before_the_state_cache() -> None:
    lines = _lines(_start())
    assert vlm_reservation_line_0_5_23() == (
        "Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations "
        "(feature-transport pools + embedding cache)."
    )
    reserve = lines.index(vlm_reservation_line_0_5_23())
    mamba = next(i for i, line in enumerate(lines) if line.startswith("Mamba Cache is allocated."))
    assert reserve < mamba
    text_only = dataclasses.replace(
        _scenario(), model=dataclasses.replace(_scenario().model, multimodal=False, vision=None)
    )
    plain = resolve(pair_argv(text_only.launch, 0), text_only, start_seed=1, env={})
    assert vlm_reservation_line_0_5_23() not in _lines(plain)
    for plan, reserved in ((_start().memory, 100 / 1024), (plain.memory, 0.0)):
        profiled = plan.post_model_load_gib - plan.pre_model_load_gib * (1 - plan.mem_fraction_static)
        assert plan.rest_memory_gib == pytest.approx(profiled - reserved)
