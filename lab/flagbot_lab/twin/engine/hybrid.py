"""SGLang's code path for hybrid linear-attention (mamba-like) models, per release.

Why a module of its own: a hybrid model's effective `max_running_requests` is decided by the
state cache, not by KV memory, and the rules that size it differ between releases in ways a
flag-tuning bot must see (0.5.10 refuses a launch line 0.5.9 accepts). Each function below
follows one function of the released wheels (`pip download sglang==X --no-deps`), cited in its
docstring and in docs/twin.md "Hybrid models"; the twin follows the sources, never the reverse.

The releases modelled here are 0.5.9, 0.5.10 and 0.5.23. 0.5.23 moved each step: the strategy
is resolved by `srt/arg_groups/overrides.py` `_mamba_radix_cache_resolution` (the `*_0_5_23`
names below), the state cache is sized by `srt/mem_cache/kv_cache_configurator.py`
`_handle_max_mamba_cache` with a padding slot and a joint speculative solve, and the slots per
request come from its `_calculate_mamba_ratio`. A scenario whose architecture is not one of the
release's radix-cache architectures skips the strategy step, as SGLang does.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from .releases import Release

GIB = 1 << 30

RADIX_CACHE_ARCHITECTURES = frozenset(
    {"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration"}
)
"""Architectures `_handle_model_specific_adjustments` sends to `_handle_mamba_radix_cache` with
`support_mamba_cache=True, support_mamba_cache_extra_buffer=True` (0.5.9 and 0.5.10
`srt/server_args.py`)."""

MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3
MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP = 2
MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP = 1
"""`model_executor/model_runner_kv_cache_mixin.py` module constants (0.5.9 and 0.5.10)."""

W_MAMBA_NO_OVERLAP = (
    "Disabling overlap schedule since mamba no_buffer is not compatible with "
    "overlap schedule, try to use --disable-radix-cache if overlap schedule is necessary"
)
W_MAMBA_TRTLLM_RADIX = (
    "Disabling radix cache since trtllm_mha does not support page_size = 1, which is required by "
    "MambaRadixCache. Try to use --attention-backend triton if radix cache is necessary."
)
W_MAMBA_SPEC_RADIX_0_5_9 = (
    "Disabling radix cache since speculative decoding for {arch} is not supported with radix cache yet."
)
E_SPEC_RADIX_0_5_10 = (
    "Speculative decoding for {arch} is not compatible with radix cache when using "
    "--mamba-scheduler-strategy no_buffer."
    "To use radix cache with speculative decoding, please use --mamba-scheduler-strategy "
    "extra_buffer and set SGLANG_ENABLE_SPEC_V2=1."
)
"""0.5.10's refusal, byte for byte: the two literals join without a space after `no_buffer.`."""
E_EXTRA_BUFFER_NO_RADIX_0_5_10 = (
    "mamba extra_buffer is not compatible with --disable-radix-cache "
    "Overlap scheduling is already supported with no_buffer + disable_radix_cache. "
    "Please use --mamba-scheduler-strategy no_buffer instead."
)


MAMBA_RADIX_CACHE_ARCHITECTURES_0_5_23 = frozenset(
    {
        "KimiLinearForCausalLM",
        "KimiK3ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM",
        "BailingMoeV3VLForConditionalGeneration",
        "Qwen3NextForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
        "FalconH1ForCausalLM",
        "JetNemotronForCausalLM",
        "JetVLMForConditionalGeneration",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "ZayaForCausalLM",
        "Glm5NextForConditionalGeneration",
    }
)
"""The architectures 0.5.23 `srt/arg_groups/overrides.py` `_MAMBA_RADIX_CACHE_ARCHS` sends
through `_mamba_radix_cache_resolution` (`GraniteMoeHybridForCausalLM` and registry-only specs
are gated by their config, which a scenario does not carry)."""

MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_23 = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM",
        "BailingMoeV3VLForConditionalGeneration",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Glm5NextForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
        "KimiK3ForConditionalGeneration",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
    }
)
"""0.5.23 `overrides.py` `_MAMBA_EXTRA_BUFFER_ARCHS`: `supports_mamba_cache_extra_buffer` is
true for these with `--linear-attn-backend triton` (the default) on a non-XPU platform."""

EXTRA_BUFFER_STRATEGIES = ("extra_buffer", "extra_buffer_lazy")
"""0.5.23 `model_override_base.py` `mamba_extra_buffer_of`: the strategies that keep the ping-pong
state buffers (with the radix cache on)."""

VLM_CACHE_SIZE_MB = 100
"""0.5.23 `srt/environ.py` `SGLANG_VLM_CACHE_SIZE_MB` default."""


class ServerArgsRefusedError(ValueError):
    """`ServerArgs.__post_init__` raised: the launch line is refused before `server_args=` is
    printed. `str()` is SGLang's message; the exception class shown is `ValueError`."""


def handle_mamba_radix_cache(a: MutableMapping[str, Any], arch: str, r: Release) -> list[str]:
    """`ServerArgs._handle_mamba_radix_cache` for the extra-buffer-capable architectures; returns
    the WARNINGs it prints, raises `ServerArgsRefusedError` where 0.5.10 raises ValueError.

    Both releases: `extra_buffer` keeps the radix cache (0.5.10 refuses it with
    `--disable-radix-cache`); `no_buffer` with the radix cache on and no speculative decoding
    turns the overlap scheduler off with a warning (and, on `trtllm_mha`, the radix cache off
    instead). Speculative decoding with `no_buffer` and the radix cache on: 0.5.9 turns the
    radix cache off with a warning, 0.5.10 raises.
    """
    warnings: list[str] = []
    if a.get("mamba_scheduler_strategy") == "extra_buffer":
        if r.mamba_refuses_spec_radix and a.get("disable_radix_cache"):
            raise ServerArgsRefusedError(E_EXTRA_BUFFER_NO_RADIX_0_5_10)
        return warnings
    if a.get("disable_radix_cache"):
        return warnings
    if a.get("speculative_algorithm") is None:
        warnings.append(W_MAMBA_NO_OVERLAP)
        a["disable_overlap_schedule"] = True
        if a.get("attention_backend") == "trtllm_mha":
            warnings.append(W_MAMBA_TRTLLM_RADIX)
            a["disable_radix_cache"] = True
            a["disable_overlap_schedule"] = False
        return warnings
    if not r.mamba_refuses_spec_radix:
        warnings.append(W_MAMBA_SPEC_RADIX_0_5_9.format(arch=arch))
        a["disable_radix_cache"] = True
        return warnings
    raise ServerArgsRefusedError(E_SPEC_RADIX_0_5_10.format(arch=arch))


def resolve_mamba_radix_cache_0_5_23(a: MutableMapping[str, Any], arch: str) -> None:
    """0.5.23 `srt/arg_groups/overrides.py` `_mamba_radix_cache_resolution`, run from
    `model_hook.py` `handle_mamba_radix_cache` before the speculative hook: no warning and no
    refusal of speculative decoding any more.

    With the radix cache off nothing changes. Otherwise `uses_mamba_radix_cache` is set, and an
    `auto` strategy becomes `extra_buffer` when the overlap scheduler is wanted (or
    `page_size > 1`) and the model supports the extra buffer on the `triton` linear-attention
    backend; else `no_buffer`, and the overlap scheduler is turned off silently.
    """
    if arch not in MAMBA_RADIX_CACHE_ARCHITECTURES_0_5_23 or a.get("disable_radix_cache"):
        return
    a["uses_mamba_radix_cache"] = True
    if a.get("mamba_radix_cache_strategy", "auto") != "auto":
        return
    wants_overlap = not a.get("disable_overlap_schedule")
    wants_paging = a.get("page_size") is not None and int(a["page_size"]) > 1
    supports_extra_buffer = (
        arch in MAMBA_EXTRA_BUFFER_ARCHITECTURES_0_5_23 and a.get("linear_attn_backend", "triton") == "triton"
    )
    if (wants_overlap or wants_paging) and supports_extra_buffer:
        a["mamba_radix_cache_strategy"] = "extra_buffer"
    else:
        a["mamba_radix_cache_strategy"] = "no_buffer"
        a["disable_overlap_schedule"] = True


def _mamba_ratio_0_5_23(a: Mapping[str, Any]) -> int:
    """0.5.23 `kv_cache_configurator.py` `_calculate_mamba_ratio` with
    `SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK` at its default (off): 1 without the radix cache, else 3
    plus `allocation_sizing.py` `get_mamba_tracking_slots` for the extra buffer (1 lazy, else 2
    with the overlap scheduler on and 1 with it off)."""
    if a.get("disable_radix_cache"):
        return 1
    additional = 0
    strategy = a.get("mamba_radix_cache_strategy")
    if strategy == "extra_buffer_lazy":
        additional = 1
    elif strategy == "extra_buffer":
        overlap = not a.get("disable_overlap_schedule")
        additional = (
            MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP if overlap else MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP
        )
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + additional


def mamba_ratio(a: Mapping[str, Any], r: Release) -> int:
    """How many state slots one running request needs: `max_num_reqs` is capped by
    `max_mamba_cache_size // ratio`.

    1 with `--disable-radix-cache`, else 3, plus for `extra_buffer` the ping-pong buffers:
    0.5.10 `_calculate_mamba_ratio` adds 2 with the overlap scheduler on and 1 with it off;
    0.5.9 `init_memory_pool` adds 1 under speculative decoding and 2 without, whatever the
    overlap scheduler does; 0.5.23 as `_mamba_ratio_0_5_23` says.
    """
    if r.mamba_configurator:
        return _mamba_ratio_0_5_23(a)
    if a.get("disable_radix_cache"):
        return 1
    additional = 0
    if a.get("mamba_scheduler_strategy") == "extra_buffer":
        if not r.mamba_extra_ratio_by_overlap:
            speculative = a.get("speculative_algorithm") is not None
            additional = (
                MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP
                if speculative
                else MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP
            )
        elif a.get("disable_overlap_schedule"):
            additional = MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_OVERLAP
        else:
            additional = MAMBA_CACHE_V2_ADDITIONAL_RATIO_OVERLAP
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + additional


@dataclass(frozen=True)
class StateCache:
    """What `handle_max_mamba_cache` decided (GiB unless named otherwise).

    `rule` names the branch taken: "explicit" (`--max-mamba-cache-size`), "max_running_requests"
    (`--disable-radix-cache` with a known `max_running_requests`) or "ratio" (the
    `--mamba-full-memory-ratio` split of what is left after the speculative reservation).
    """

    speculative_reservation_gib: float
    max_mamba_cache_size: int
    state_gib: float
    kv_rest_gib: float
    rule: str
    pool_gib: float
    """What `MambaPool.__init__` allocates and its `Mamba Cache is allocated` line prints:
    `size + 1` slots' state, slot 0 being the padding slot padded tokens write to (`memory_pool.py`
    0.5.9, 0.5.10 and 0.5.23). 0.5.9 / 0.5.10's profile counts `size` slots only (`state_gib`),
    so the padding slot comes out of the memory left after the pools; 0.5.23's counts it."""


def size_state_cache(
    rest_gib: float, a: Mapping[str, Any], *, state_bytes_per_request: int, dp_size: int
) -> StateCache:
    """`ModelRunner.handle_max_mamba_cache` (0.5.9 and 0.5.10 `model_runner_kv_cache_mixin.py`,
    the same code in both), called from `profile_max_num_token` with the memory left for caches.

    1. Speculative decoding first reserves the intermediate states it verifies with:
       `mamba_cache_per_req x (max_running_requests // dp) x speculative_num_draft_tokens`
       (dp only under DP attention).
    2. `max_mamba_cache_size` is then an explicit `--max-mamba-cache-size // dp`, else with
       `--disable-radix-cache` and a known `max_running_requests` that value `// dp`, else
       `int(rest x r / (1 + r) x 2^30) // mamba_cache_per_req` (r = `--mamba-full-memory-ratio`).
    3. The KV pool gets what is left: `rest - max_mamba_cache_size x mamba_cache_per_req`.
    4. `MambaPool` then allocates `max_mamba_cache_size + 1` slots (`pool_gib`), one more than
       the profile counted.
    """
    divisor = dp_size if a.get("enable_dp_attention") else 1
    per_request_gib = state_bytes_per_request / GIB
    total = rest_gib
    reservation = 0.0
    if a.get("speculative_algorithm") is not None:
        running = int(a.get("max_running_requests") or 0) // divisor
        drafts = int(a.get("speculative_num_draft_tokens") or 0)
        reservation = state_bytes_per_request * running * drafts / GIB
        total -= reservation
    if a.get("max_mamba_cache_size") is not None:
        size, rule = int(a["max_mamba_cache_size"]) // divisor, "explicit"
    elif a.get("disable_radix_cache") and a.get("max_running_requests") is not None:
        size, rule = int(a["max_running_requests"]) // divisor, "max_running_requests"
    else:
        ratio = float(a.get("mamba_full_memory_ratio") or 0.9)
        raw = total * ratio / (1 + ratio)
        size, rule = max(0, int(raw * GIB) // state_bytes_per_request), "ratio"
    state = size * per_request_gib
    return StateCache(
        speculative_reservation_gib=reservation,
        max_mamba_cache_size=size,
        state_gib=state,
        kv_rest_gib=total - state,
        rule=rule,
        pool_gib=(size + 1) * per_request_gib,
    )


def size_state_cache_0_5_23(
    rest_gib: float, a: Mapping[str, Any], *, state_bytes_per_request: int, dp_size: int, ratio: int
) -> StateCache:
    """0.5.23 `srt/mem_cache/kv_cache_configurator.py` `_handle_max_mamba_cache`, called from
    `_profile_available_bytes` with the memory left for caches (`ratio` is
    `_calculate_mamba_ratio`'s). Every pool has one padding slot, so the state cache holds
    `max_mamba_cache_size + 1` requests' state; `dp` divides only under DP attention
    (`attn_dp_size`).

    * `--max-mamba-cache-size` N: `N // dp` slots; speculative decoding reserves
      `per_req x (min(max(1, max_running_requests // dp), size // ratio) + 1) x draft tokens`.
    * `--disable-radix-cache` with a known `max_running_requests`: `max(1, mrr // dp)` slots,
      the reservation `per_req x (size + 1) x draft tokens`.
    * else the budget `rest x r/(1+r)` (r = `--mamba-full-memory-ratio`, resolved to 0.9) holds
      the slots and, under speculative decoding, their intermediate states, solved jointly:
      `size = (budget - per_req x (1 + D)) // (per_req x (1 + D / ratio))`, the reservation as in
      the first branch; without it `size = (budget - per_req) // per_req`.

    The KV pool gets `rest - reservation - (size + 1) x per_req`.
    """
    divisor = dp_size if a.get("enable_dp_attention") else 1
    per_req = state_bytes_per_request
    speculative = a.get("speculative_algorithm") is not None
    drafts = int(a.get("speculative_num_draft_tokens") or 0) if speculative else 0
    requests = max(1, int(a.get("max_running_requests") or 0) // divisor)
    reservation_bytes = 0
    if a.get("max_mamba_cache_size") is not None:
        size, rule = int(a["max_mamba_cache_size"]) // divisor, "explicit"
        if speculative:
            reservation_bytes = per_req * (min(requests, size // ratio) + 1) * drafts
    elif a.get("disable_radix_cache") and a.get("max_running_requests") is not None:
        size, rule = requests, "max_running_requests"
        if speculative:
            reservation_bytes = per_req * (size + 1) * drafts
    else:
        full_ratio = float(a.get("mamba_full_memory_ratio") or 0.9)
        budget_bytes = rest_gib * full_ratio / (1 + full_ratio) * GIB
        rule = "ratio"
        if speculative:
            size = int((budget_bytes - per_req * (1 + drafts)) // (per_req * (1 + drafts / ratio)))
            reservation_bytes = per_req * (min(requests, size // ratio) + 1) * drafts
        else:
            size = int((budget_bytes - per_req) // per_req)
    reservation = reservation_bytes / GIB
    state = (size + 1) * per_req / GIB
    return StateCache(
        speculative_reservation_gib=reservation,
        max_mamba_cache_size=size,
        state_gib=state,
        kv_rest_gib=rest_gib - reservation - state,
        rule=rule,
        pool_gib=state,
    )


def state_cache_too_small_0_5_23(size: int, rest_gib: float, state_bytes_per_request: int) -> str:
    """0.5.23 `_handle_max_mamba_cache`'s RuntimeError text when no state slot is left
    (`rest_gib` is what remained after the speculative reservation)."""
    return (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
        f"Computed max_mamba_cache_size={size} "
        f"(total_rest_memory={rest_gib:.2f} GB, "
        f"mamba_cache_per_req={state_bytes_per_request / (1 << 20):.2f} MB). "
        "Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, "
        "(3) reduce --speculative-num-draft-tokens, or "
        "(4) use GPUs with more memory."
    )


def no_request_fits_0_5_23(size: int, ratio: int, max_num_reqs: int) -> str:
    """0.5.23 `KVCacheConfigurator.resolve_max_num_reqs`' RuntimeError text when the state cache
    holds fewer slots than one request needs."""
    return (
        "Hybrid (mamba/linear-attention) state cache is too small to serve "
        f"any requests. max_mamba_cache_size={size}, "
        f"mamba_ratio={ratio}, resulting max_num_reqs={max_num_reqs}. "
        "Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, or "
        "(3) use GPUs with more memory."
    )


def vlm_reservation_line_0_5_23() -> str:
    """0.5.23 `kv_cache_configurator.py` `mm_runtime_reservation_gb`'s INFO line: a multimodal
    model's embedding cache (`SGLANG_VLM_CACHE_SIZE_MB`, 100) is taken from the memory that
    sizes the caches, before the state cache."""
    return (
        f"Reserving {VLM_CACHE_SIZE_MB / 1024:.2f} GB of the KV budget for post-sizing multimodal "
        "allocations (feature-transport pools + embedding cache)."
    )


def adjust_mem_fraction_for_vlm(mem_fraction_static: float, vit_layers: int, vit_hidden_size: int) -> float:
    """`ServerArgs.adjust_mem_fraction_for_vlm` (0.5.9 and 0.5.10 `srt/server_args.py`; 0.5.23
    `srt/arg_groups/memory_hook.py`, without post-capture KV sizing), applied
    to an automatic `mem_fraction_static` of a multimodal model: 0.95 times a factor that falls
    10 % per doubling of the vision tower's `layers x hidden^2` over ViT-L/14 (24 x 1024^2),
    clamped to [0.8, 1.05]."""
    complexity_ratio = (vit_layers * vit_hidden_size**2) / (24 * 1024**2)
    factor = max(0.8, min(1.05, 1.0 - 0.1 * (complexity_ratio - 1.0)))
    return mem_fraction_static * (0.95 * factor)
