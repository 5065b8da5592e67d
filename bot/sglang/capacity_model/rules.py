"""SGLang's own capacity rules, one function per rule, each naming the release and source it follows.

Why apart: these are the parts that change between releases (0.5.9, 0.5.10 to 0.5.13, 0.5.23),
read from `pip download sglang==X --no-deps`; keeping them free of the prediction's bookkeeping
lets a new release be added by reading its sources against this file alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.sglang.capacity_model.applied_change import KV_DTYPE_BYTES
from bot.sglang.capacity_model.figures import (
    GIB,
    RuleSet,
    StartFigures,
    Unknown,
    as_int,
    dp_attention_workers,
    spec_algorithm,
    switched_on,
)

SPECULATIVE_MAX_RUNNING = 48
"""`ServerArgs._handle_speculative_decoding` (0.5.9, 0.5.10, 0.5.23): with a speculative
algorithm and no `--max-running-requests`, post-init sets it to 48."""
MAMBA_BASE_RATIO = 3
"""`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO` (model_runner_kv_cache_mixin.py 0.5.9/0.5.10,
mem_cache/kv_cache_configurator.py 0.5.23)."""

SRC_PROFILE = "model_executor/model_runner_kv_cache_mixin.py profile_max_num_token"
SRC_PROFILE_0523 = "mem_cache/kv_cache_configurator.py _profile_available_bytes"
SRC_MEMORY_HOOK_0523 = "arg_groups/memory_hook.py"
SRC_RESOLVE_REQS = "model_executor/model_runner_kv_cache_mixin.py _resolve_max_num_reqs"
SRC_INIT_POOL_059 = "model_executor/model_runner_kv_cache_mixin.py init_memory_pool"
SRC_RESOLVE_REQS_0523 = "mem_cache/kv_cache_configurator.py resolve_max_num_reqs"
SRC_MAMBA = "model_executor/model_runner_kv_cache_mixin.py handle_max_mamba_cache"
SRC_MAMBA_RATIO = "model_executor/model_runner_kv_cache_mixin.py _calculate_mamba_ratio"
SRC_MAMBA_0523 = "mem_cache/kv_cache_configurator.py _handle_max_mamba_cache"
SRC_MAMBA_RATIO_0523 = (
    "mem_cache/kv_cache_configurator.py _calculate_mamba_ratio, "
    "mem_cache/allocation_sizing.py get_mamba_tracking_slots"
)
SRC_MAMBA_POOL = "mem_cache/memory_pool.py MambaPool.__init__ (size + 1 slots: slot 0 pads)"
SRC_HYBRID_SWA = "model_executor/model_runner_kv_cache_mixin.py _resolve_hybrid_swa_tokens"
SRC_USER_LIMIT = "model_executor/model_runner_kv_cache_mixin.py _resolve_token_capacity"
SRC_GPU_MEMORY = "server_args.py _handle_gpu_memory_settings"
SRC_SPECULATIVE = "server_args.py _handle_speculative_decoding"
SRC_KV_POOL = "mem_cache/memory_pool.py MHATokenToKVPool"
SRC_REQ_POOL = "mem_cache/memory_pool.py ReqToTokenPool (context_len + 4 + draft tokens, int32)"
_TORCH_DTYPE_BYTES: Mapping[str, float] = {
    "torch.bfloat16": 2.0,
    "torch.float16": 2.0,
    "torch.float32": 4.0,
    "torch.float8_e4m3fn": 1.0,
    "torch.float8_e5m2": 1.0,
    "torch.uint8": 0.5,
}
"""The printed `Using KV cache dtype: torch.X` -> bytes per element (fp4 is packed in uint8)."""
SPECULATIVE_RESERVE_MB: Mapping[RuleSet, tuple[int, int]] = {
    "0.5.9": (6 * 1024, 2 * 1024),
    "0.5.10": (6 * 1024, 4 * 1024),
    "0.5.23": (0, 0),
}
"""`_handle_gpu_memory_settings`' speculative reserve: (STANDALONE, other non-NGRAM)."""


def memory_tier(gpu_mib: float, tp: int, rules: RuleSet) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) by GPU memory (`_handle_gpu_memory_settings`
    0.5.9/0.5.10; 0.5.23 `arg_groups/memory_hook.py` adds 4096 / 48 for 20-35 GiB)."""
    gib = gpu_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return (4096, 48 if tp < 4 else 160) if rules == "0.5.23" else (2048, 24 if tp < 4 else 80)
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def piecewise_on(args: Mapping[str, Any], rules: RuleSet) -> bool:
    if rules == "0.5.9":
        return switched_on(args.get("enable_piecewise_cuda_graph"))
    return not switched_on(args.get("disable_piecewise_cuda_graph"))


def piecewise_token_sizes(max_tokens: int) -> list[int]:
    """`ServerArgs._generate_piecewise_cuda_graph_tokens` (0.5.9 / 0.5.10 `server_args.py`): the
    piecewise CUDA graph capture sizes up to `piecewise_cuda_graph_max_tokens`."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [size for size in sizes if size <= max_tokens]


def piecewise_tokens(figures: StartFigures, new: Mapping[str, Any]) -> list[int] | Unknown:
    """The piecewise token list after a change: `piecewise_cuda_graph_max_tokens` defaults to
    `chunked_prefill_size` capped by `max_total_tokens` (0.5.10 `_handle_gpu_memory_settings`),
    then `piecewise_token_sizes`. Unknown when today's printed list is not that rule's (set by
    hand, an MLA model's 2048, a Llama-2's 4096)."""
    old = figures.server_args

    def derived_max(args: Mapping[str, Any]) -> int | None:
        chunked = as_int(args.get("chunked_prefill_size"))
        if chunked is None or chunked <= 0:
            return None
        cap = as_int(args.get("max_total_tokens"))
        return chunked if cap is None else min(chunked, cap)

    printed_max, printed = (
        as_int(old.get("piecewise_cuda_graph_max_tokens")),
        old.get("piecewise_cuda_graph_tokens"),
    )
    explicit = {"piecewise_cuda_graph_max_tokens", "piecewise_cuda_graph_tokens"} & figures.explicit
    today_max, new_max = derived_max(old), derived_max(new)
    if explicit or printed_max is None or today_max != printed_max or new_max is None:
        return Unknown(
            "the piecewise CUDA graph sizes were not derived by the default rule at the last start"
        )
    if not isinstance(printed, list | tuple) or list(printed) != piecewise_token_sizes(printed_max):
        return Unknown("the printed piecewise CUDA graph token list is not the default rule's")
    return piecewise_token_sizes(new_max)


def reserved_mem_mb(args: Mapping[str, Any], gpu_mib: float, rules: RuleSet) -> float | Unknown:
    """`_handle_gpu_memory_settings`' reserve (0.5.9 / 0.5.10 `server_args.py`): activation,
    graphs, TP, piecewise tokens, the 10 GiB floor above 60 GiB, and the speculative reserve.
    0.5.23 moved it to `arg_groups/memory_hook.py`, whose rule is `reserved_mem_mb_0_5_23`."""
    if rules == "0.5.23":
        return Unknown(
            "0.5.23 derives mem_fraction_static in arg_groups/memory_hook.py: reserved_mem_mb_0_5_23"
        )
    chunked, max_bs = as_int(args.get("chunked_prefill_size")), as_int(args.get("cuda_graph_max_bs"))
    if chunked is None or max_bs is None:
        return Unknown("chunked_prefill_size or cuda_graph_max_bs not printed")
    tp, pp = int(args.get("tp_size") or 1), int(args.get("pp_size") or 1)
    reserved = 512 + max(chunked, 2048) * 1.5 + max_bs * 2 + tp * pp / 8 * 1024
    if switched_on(args.get("enable_dp_attention")):
        dp = int(args.get("dp_size") or 1)
        reserved += max_bs * dp * 3 + (max_bs * dp * 1.5 if max_bs > 300 else 0)
    if piecewise_on(args, rules):
        tokens = args.get("piecewise_cuda_graph_tokens")
        if not isinstance(tokens, list | tuple):
            return Unknown("piecewise CUDA graph token list not printed")
        reserved += len(tokens) * 8
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    algorithm = spec_algorithm(args)
    standalone, other = SPECULATIVE_RESERVE_MB[rules]
    if algorithm == "STANDALONE":
        reserved += standalone
    elif algorithm is not None and algorithm != "NGRAM":
        reserved += other
    return reserved


def kv_bytes(args: Mapping[str, Any], printed: str | None, today: Mapping[str, Any]) -> float | None:
    """Bytes per KV element: the flag's dtype, else (`auto`) the model's: `--dtype` when it
    names one, else the printed `Using KV cache dtype` of a start that was `auto` too."""
    dtype = str(args.get("kv_cache_dtype") or "auto")
    if dtype != "auto":
        return KV_DTYPE_BYTES.get(dtype)
    model = KV_DTYPE_BYTES.get(str(args.get("dtype") or "auto"))
    if model is not None:
        return model
    if str(today.get("kv_cache_dtype") or "auto") == "auto" and printed is not None:
        return _TORCH_DTYPE_BYTES.get(printed)
    return None


def reservation_gib(args: Mapping[str, Any], state_bytes: float, rules: RuleSet) -> float:
    """`handle_max_mamba_cache`' speculative reservation (0.5.9 / 0.5.10): state per request x
    (max_running_requests // dp) x draft tokens, set aside before the state cache is sized."""
    if rules == "0.5.23" or spec_algorithm(args) is None:
        return 0.0
    dp = dp_attention_workers(args)
    running = int(args.get("max_running_requests") or 0) // dp
    drafts = int(args.get("speculative_num_draft_tokens") or 0)
    return state_bytes * running * drafts / GIB


def mamba_ratio(args: Mapping[str, Any], rules: RuleSet) -> tuple[int, str] | Unknown:
    """State slots per running request: 1 without radix cache, else 3, plus the extra buffer's
    (0.5.9 `init_memory_pool`: 1 with speculative decoding, 2 without; 0.5.10
    `_calculate_mamba_ratio`: 1 with the overlap schedule off, 2 with it on; 0.5.23 in
    `_mamba_ratio_0_5_23`)."""
    if switched_on(args.get("disable_radix_cache")):
        return 1, "radix cache off: 1"
    if rules == "0.5.23":
        return _mamba_ratio_0_5_23(args)
    if args.get("mamba_scheduler_strategy") != "extra_buffer":
        return MAMBA_BASE_RATIO, f"{MAMBA_BASE_RATIO}"
    if rules == "0.5.9":
        extra = 1 if spec_algorithm(args) is not None else 2
    else:
        extra = 1 if switched_on(args.get("disable_overlap_schedule")) else 2
    return MAMBA_BASE_RATIO + extra, f"{MAMBA_BASE_RATIO} + {extra} extra-buffer slots"


def resolve_max_num_reqs(
    tokens: int, ctx: int, cli: int | None, dp: int, rules: RuleSet
) -> tuple[int, str, str]:
    """(pool size before the state cap, formula, source) for `rules`."""
    estimated = int(tokens / ctx * 512)
    if rules == "0.5.9":
        if cli is not None:
            return cli, f"--max-running-requests {cli}, kept as given", SRC_INIT_POOL_059
        value = min(max(estimated, 2048), 4096)
        return value, f"min(max(int({tokens}/{ctx}*512)={estimated}, 2048), 4096)", SRC_INIT_POOL_059
    if rules == "0.5.23":
        if cli is not None:
            value = min(max(1, cli // dp), tokens // 2)
            return value, f"min(max(1, {cli}//{dp}), {tokens}//2)", SRC_RESOLVE_REQS_0523
        clamp = max(min(estimated, 4096), 2048)
        return (
            min(clamp, tokens // 2),
            f"min(clamp({estimated}, 2048, 4096), {tokens}//2)",
            SRC_RESOLVE_REQS_0523,
        )
    clamp = max(min(estimated, 4096), 2048)
    if cli is not None:
        return (
            min(cli // dp, clamp),
            f"min({cli}//{dp}, clamp(int({tokens}/{ctx}*512)={estimated}, 2048, 4096))",
            SRC_RESOLVE_REQS,
        )
    return (
        min(clamp, tokens // 2),
        f"min(clamp(int({tokens}/{ctx}*512)={estimated}, 2048, 4096), {tokens}//2)",
        SRC_RESOLVE_REQS,
    )


def _mamba_ratio_0_5_23(args: Mapping[str, Any]) -> tuple[int, str] | Unknown:
    """0.5.23 `_calculate_mamba_ratio` with the radix cache on: 3 plus
    `get_mamba_tracking_slots` (the extra buffer: 1 lazy, else 2 with the overlap schedule on and
    1 with it off; no buffer: 0). It reads the strategy post-init resolved from `auto`
    (`arg_groups/overrides.py` `_mamba_radix_cache_resolution`), printed as
    `mamba_radix_cache_strategy`; an unresolved or unknown one is unknown. Assumes
    `SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK` at its default (off): it is an environment variable the
    start does not print, and `prepare_inputs` checks today's capacity line against this ratio."""
    strategy = args.get("mamba_radix_cache_strategy")
    if strategy == "no_buffer":
        return MAMBA_BASE_RATIO, f"{MAMBA_BASE_RATIO} (no_buffer)"
    if strategy == "extra_buffer_lazy":
        return MAMBA_BASE_RATIO + 1, f"{MAMBA_BASE_RATIO} + 1 lazy extra-buffer slot"
    if strategy == "extra_buffer":
        extra = 1 if switched_on(args.get("disable_overlap_schedule")) else 2
        return MAMBA_BASE_RATIO + extra, f"{MAMBA_BASE_RATIO} + {extra} extra-buffer slots"
    return Unknown(f"0.5.23's mamba radix cache strategy {strategy!r} is not a resolved one")


def state_reservation_0_5_23(
    args: Mapping[str, Any], state_bytes: float, size: int, ratio: int
) -> tuple[float, str]:
    """(GiB, formula) of the speculative intermediate states 0.5.23 `_handle_max_mamba_cache`
    sets aside: `per_req x (min(max(1, max_running_requests // dp), size // ratio) + 1) x draft
    tokens` in its explicit-size and ratio branches; without radix cache (ratio 1, size
    `max(1, max_running_requests // dp)`) the same product is `per_req x (size + 1) x drafts`."""
    if spec_algorithm(args) is None:
        return 0.0, "no speculative decoding: 0"
    dp = dp_attention_workers(args)
    requests = max(1, int(args.get("max_running_requests") or 0) // dp)
    drafts = int(args.get("speculative_num_draft_tokens") or 0)
    capped = min(requests, size // ratio)
    gib = state_bytes * (capped + 1) * drafts / GIB
    return (
        gib,
        f"{state_bytes / 2**20:.2f} MiB x (min({requests}, {size}//{ratio}) + 1) x {drafts} = {gib:.3f} GiB",
    )


def state_cache_size_0_5_23(
    args: Mapping[str, Any], rest_gib: float, state_bytes: float, ratio: int
) -> tuple[int, str]:
    """(max_mamba_cache_size, formula): 0.5.23 `_handle_max_mamba_cache`'s three branches, every
    pool counting its padding slot: an explicit `--max-mamba-cache-size N` gives `N // dp`;
    without radix cache and with `max_running_requests` known, `max(1, mrr // dp)`; else the
    budget `rest x r/(1+r)` (r `--mamba-full-memory-ratio`) is solved jointly with the
    speculative intermediate states, `(budget - per_req x (1 + D)) // (per_req x (1 + D/ratio))`,
    or without speculative decoding `(budget - per_req) // per_req`."""
    dp = dp_attention_workers(args)
    explicit = as_int(args.get("max_mamba_cache_size"))
    running = as_int(args.get("max_running_requests"))
    if explicit is not None:
        return explicit // dp, f"--max-mamba-cache-size {explicit} // {dp}"
    if switched_on(args.get("disable_radix_cache")) and running is not None:
        return max(1, running // dp), f"no radix cache: max(1, max_running_requests {running} // {dp})"
    r = float(args.get("mamba_full_memory_ratio") or 0.9)
    budget = rest_gib * r / (1 + r) * GIB
    per_req = state_bytes
    if spec_algorithm(args) is not None:
        drafts = int(args.get("speculative_num_draft_tokens") or 0)
        size = int((budget - per_req * (1 + drafts)) // (per_req * (1 + drafts / ratio)))
        return size, (
            f"budget {rest_gib:.3f} x {r}/(1+{r}) GiB, solved with the intermediate states: "
            f"(budget - per_req x (1 + {drafts})) // (per_req x (1 + {drafts}/{ratio}))"
        )
    size = int((budget - per_req) // per_req)
    return size, f"(budget {rest_gib:.3f} x {r}/(1+{r}) GiB - per_req) // per_req {per_req / 2**20:.2f} MiB"


def profile_source(rules: RuleSet) -> str:
    """Where the release measures the memory left for the caches (0.5.23 moved it)."""
    return SRC_PROFILE_0523 if rules == "0.5.23" else SRC_PROFILE


def gpu_memory_source(rules: RuleSet) -> str:
    """Where the release derives the memory defaults (0.5.23 moved them to a hook)."""
    return SRC_MEMORY_HOOK_0523 if rules == "0.5.23" else SRC_GPU_MEMORY


def graph_phase(args: Mapping[str, Any], phase: str) -> Mapping[str, Any] | None:
    """One phase of the printed `cuda_graph_config` (0.5.23), None when not printed."""
    config = args.get("cuda_graph_config")
    found = config.get(phase) if isinstance(config, Mapping) else None
    return found if isinstance(found, Mapping) else None


def decode_graph_max_bs_0_5_23(
    args: Mapping[str, Any], gpu_mib: float, hook_running: int | None
) -> int | Unknown:
    """The decode CUDA graph's `max_bs` that 0.5.23 `handle_gpu_memory_settings`
    (`arg_groups/memory_hook.py`) reserves for: the printed one when set by hand
    (`--cuda-graph-max-bs-decode`, `--cuda-graph-bs-decode`), else the memory tier's, capped by
    a `--max-running-requests` the hook sees. Unknown where Qwen3-VL's hook may raise it to the
    request limit (`expand_multimodal_decode_graph_to_running_limit`: model type not printed)."""
    if args.get("cuda_graph_max_bs_decode") is not None or args.get("cuda_graph_bs_decode") is not None:
        decode = graph_phase(args, "decode")
        max_bs = as_int(decode.get("max_bs")) if decode else None
        return max_bs if max_bs is not None else Unknown("the decode CUDA graph's max_bs was not printed")
    max_bs = memory_tier(gpu_mib, int(args.get("tp_size") or 1), "0.5.23")[1]
    if hook_running is not None and max_bs > hook_running:
        max_bs = hook_running
    if hook_running is not None and max_bs < hook_running <= 512:
        return Unknown(
            "a Qwen3-VL model's decode graph may grow to max_running_requests (model type not printed)"
        )
    return max_bs


def prefill_graph_sizes_0_5_23(args: Mapping[str, Any], mla: bool) -> list[int] | Unknown:
    """The prefill CUDA graph's capture sizes (0.5.23 `memory_hook.py`: `max_bs` is
    `chunked_prefill_size`, at most 8192 on an MLA backend, capped by `--max-total-tokens` and
    4096 for a Llama-2 path; `cuda_graph_hook.py` `generate_prefill_cuda_graph_batch_sizes`).
    Unknown when set by hand."""
    if args.get("cuda_graph_max_bs_prefill") is not None or args.get("cuda_graph_bs_prefill") is not None:
        return Unknown("the prefill CUDA graph sizes were set by hand")
    chunked = as_int(args.get("chunked_prefill_size"))
    if chunked is None or chunked <= 0:
        return Unknown("chunked_prefill_size not printed")
    max_bs = min(8192, chunked) if mla else chunked
    cap = as_int(args.get("max_total_tokens"))
    if cap is not None:
        max_bs = min(max_bs, cap)
    if "llama-2" in str(args.get("model_path") or "").lower():
        max_bs = min(max_bs, 4096)
    return piecewise_token_sizes(max_bs)


def reserved_mem_mb_0_5_23(
    args: Mapping[str, Any], gpu_mib: float, decode_max_bs: int, mla: bool
) -> float | Unknown:
    """0.5.23 `arg_groups/memory_hook.py` `handle_gpu_memory_settings`' reserve on CUDA without
    disaggregation, DP attention, DeepEP or post-capture KV sizing (an environment variable, off
    by default): `512 + max(chunked, 2048) x 1.5 + tp x pp / 8 x 1024 + reserve_for_graph_mb`
    (decode `max_bs x 2`; prefill graphs `len(sizes) x 8`, 1.5 GiB on an MLA backend), at least
    10 GiB above 60 GiB of GPU memory. No speculative term any more."""
    chunked = as_int(args.get("chunked_prefill_size"))
    if chunked is None or chunked <= 0:
        return Unknown("chunked_prefill_size not printed")
    tp, pp = int(args.get("tp_size") or 1), int(args.get("pp_size") or 1)
    reserved = 512 + max(chunked, 2048) * 1.5 + tp * pp / 8 * 1024
    decode, prefill = graph_phase(args, "decode"), graph_phase(args, "prefill")
    if decode is None or prefill is None:
        return Unknown("the CUDA graph config was not printed")
    if decode.get("backend") != "disabled":
        reserved += decode_max_bs * 2
    if prefill.get("backend") != "disabled":
        if mla:
            reserved += 1.5 * 1024
        else:
            sizes = prefill_graph_sizes_0_5_23(args, mla)
            if isinstance(sizes, Unknown):
                return sizes
            reserved += len(sizes) * 8
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return reserved


def memory_hook_unsupported_0_5_23(args: Mapping[str, Any]) -> Unknown | None:
    """The 0.5.23 memory-hook paths `reserved_mem_mb_0_5_23` does not follow, as an Unknown."""
    if str(args.get("device") or "cuda") != "cuda":
        return Unknown("0.5.23 derives mem_fraction_static differently off CUDA")
    if str(args.get("disaggregation_mode") or "null") != "null":
        return Unknown("0.5.23 reserves by the disaggregation role: not modelled")
    if switched_on(args.get("enable_dp_attention")):
        return Unknown("0.5.23's DP-attention graph padding reserve is not modelled")
    if str(args.get("moe_a2a_backend") or "none") != "none":
        return Unknown("0.5.23's all-to-all buffer reserve is not modelled")
    if int(args.get("pp_size") or 1) > 1:
        return Unknown("0.5.23 caps a pipeline's prefill graphs: not modelled")
    return None
