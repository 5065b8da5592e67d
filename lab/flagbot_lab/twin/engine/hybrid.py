"""SGLang's code path for hybrid linear-attention (mamba-like) models, per release.

Why a module of its own: a hybrid model's effective `max_running_requests` is decided by the
state cache, not by KV memory, and the rules that size it differ between releases in ways a
flag-tuning bot must see (0.5.10 refuses a launch line 0.5.9 accepts). Each function below
follows one function of the released wheels (`pip download sglang==X --no-deps`), cited in its
docstring and in docs/twin.md "Hybrid models"; the twin follows the sources, never the reverse.

The releases modelled here are 0.5.9 and 0.5.10. 0.5.23 keeps the twin's older sizing rule
(`memory.py`), and a scenario whose architecture is not one of `RADIX_CACHE_ARCHITECTURES`
skips `handle_mamba_radix_cache`, as SGLang's `_handle_model_specific_adjustments` does.
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


def mamba_ratio(a: Mapping[str, Any], r: Release) -> int:
    """How many state slots one running request needs: `max_num_reqs` is capped by
    `max_mamba_cache_size // ratio`.

    1 with `--disable-radix-cache`, else 3, plus for `extra_buffer` the ping-pong buffers:
    0.5.10 `_calculate_mamba_ratio` adds 2 with the overlap scheduler on and 1 with it off;
    0.5.9 `init_memory_pool` adds 1 under speculative decoding and 2 without, whatever the
    overlap scheduler does.
    """
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
    )


def adjust_mem_fraction_for_vlm(mem_fraction_static: float, vit_layers: int, vit_hidden_size: int) -> float:
    """`ServerArgs.adjust_mem_fraction_for_vlm` (0.5.9 and 0.5.10 `srt/server_args.py`), applied
    to an automatic `mem_fraction_static` of a multimodal model: 0.95 times a factor that falls
    10 % per doubling of the vision tower's `layers x hidden^2` over ViT-L/14 (24 x 1024^2),
    clamped to [0.8, 1.05]."""
    complexity_ratio = (vit_layers * vit_hidden_size**2) / (24 * 1024**2)
    factor = max(0.8, min(1.05, 1.0 - 0.1 * (complexity_ratio - 1.0)))
    return mem_fraction_static * (0.95 * factor)
