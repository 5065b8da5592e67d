"""SGLang's built-in numbers and texts that post-init uses (reference §3.1-3.4, §3.7), per release.

Why a module of its own: these are facts about SGLang, not logic; keeping them together makes
them easy to check against the reference (the WARNING texts must match byte for byte, trailing
spaces included, because they reach the journal bare).
"""

from __future__ import annotations

from typing import Any

from .scenario import Gpu

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
AR_FUSION_FAMILIES = frozenset(
    {"DeepseekV3", "GptOss", "Glm4Moe", "Glm4MoeLite", "Qwen3Moe", "KimiK25", "Qwen3_5Moe", "Qwen3_5"}
)
"""Architectures (the part of the HF class name before `For`) of §3.4 #8."""

W_SPEC_MAX_RUNNING = (
    "Max running requests is reset to 48 for speculative decoding. "
    "You can override this by explicitly setting --max-running-requests."
)
W_SPEC_V2_OVERLAP = (
    "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on."
)
"""0.5.9 / 0.5.10 `_handle_speculative_decoding` with `SGLANG_ENABLE_SPEC_V2` set."""
W_SPEC_OVERLAP = (
    "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
    "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. "
)
W_TOPK1_DRAFT = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
W_NGRAM_DRAFT = (
    "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
    "You can override this by explicitly setting --speculative-num-draft-tokens."
)
W_NGRAM_OVERLAP = "The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding."
W_EAGLE_MIXED = "Mixed chunked prefill is disabled because of using eagle speculative decoding."
W_DP_CHUNKED = (
    "DP attention is enabled. The chunked prefill size is adjusted to {size} to avoid MoE kernel issues. "
)
W_DEEPEP = "DeepEP MoE is enabled. The expert parallel size is adjusted to be the same as the tensor parallel size[{tp}]."
W_TORCH_NATIVE = "Cuda graph is disabled because of using torch native attention backend"
W_FLEX = "Cuda graph is disabled because of using torch Flex Attention backend"
W_PD_DECODE = "KV cache is forced as chunk cache for decode server"
W_PD_PREFILL = "Cuda graph is disabled for prefill server when piecewise cuda graph is not enabled."
W_PP_OVERLAP = "Pipeline parallelism is incompatible with overlap schedule."
W_TRTLLM_MOE = "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set."
W_EPLB = "EPLB is enabled. The expert_distribution_recorder_mode is automatically set."
W_NAN = (
    "--enable-nan-detection is deprecated. Use SGLANG_SPEC_NAN_DETECTION=1 and "
    "SGLANG_SPEC_OOB_DETECTION=1 instead."
)
W_QWEN25 = "The tool_call_parser 'qwen25' is deprecated. Please use 'qwen' instead."
W_LORA = "--enable-lora is set to True because --lora-paths is provided."
W_SPEC_V2_SYNC = "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding."
"""0.5.23 `arg_groups/speculative_hook.py` `_handle_eagle_family` (only with --disable-overlap-schedule)."""
W_SPEC_MIXED_0_5_23 = (
    "Mixed chunked prefill is disabled: {algorithm} speculative decoding does not support it."
)
"""0.5.23 `_handle_eagle_family` (0.5.9 and 0.5.10 print W_EAGLE_MIXED)."""
W_BREAKABLE_INCOMPATIBLE = "Breakable CUDA graph is incompatible with {name}; disabling prefill CUDA graph."
"""0.5.23 `arg_groups/cuda_graph_hook.py` `disable_breakable_cudagraph_if_incompatible`."""


def memory_tier(gpu_mem_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) of §3.2 for this much GPU memory."""
    gib = gpu_mem_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return 2048, 24 if tp < 4 else 80
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def memory_tier_0_5_23(gpu_mem_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode max_bs) of 0.5.23 `arg_groups/memory_hook.py`
    `handle_gpu_memory_settings`: the 20-35 GiB row is now 4096 and 48 / 160."""
    gib = gpu_mem_mib / 1024
    if 20 <= gib < 35:
        return 4096, 48 if tp < 4 else 160
    return memory_tier(gpu_mem_mib, tp)


def cuda_graph_batch_sizes(
    max_bs: int, *, spec: bool, append_max: bool = True, padding: bool = True
) -> list[int]:
    """`_generate_cuda_graph_batch_sizes` (0.5.9, 0.5.10 `server_args.py`; 0.5.23
    `arg_groups/cuda_graph_hook.py` `generate_decode_cuda_graph_batch_sizes`): the denser list
    under speculative decoding; 0.5.10 and later append `max_bs` when the list misses it."""
    if not padding:
        sizes = list(range(1, max_bs + 1))
    elif spec:
        sizes = [
            *range(1, 9),
            *range(10, 33, 2),
            *range(40, 65, 4),
            *range(72, 257, 8),
            *range(272, max_bs + 1, 16),
        ]
    else:
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, max_bs + 1, 32)]
    sizes = [bs for bs in sizes if bs <= max_bs]
    if append_max and max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def decode_cuda_graph_batch_sizes(max_bs: int, *, spec: bool, padding: bool = True) -> list[int]:
    """0.5.23 `generate_decode_cuda_graph_batch_sizes` (the same list as 0.5.10's)."""
    return cuda_graph_batch_sizes(max_bs, spec=spec, padding=padding)


def prefill_cuda_graph_batch_sizes(max_bs: int) -> list[int]:
    """0.5.23 `arg_groups/cuda_graph_hook.py` `generate_prefill_cuda_graph_batch_sizes`: token
    counts up to `max_bs`, without appending it."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_bs + 1, 512),
    ]
    return [t for t in sizes if t <= max_bs]


def _phase_config(backend: str) -> dict[str, Any]:
    """0.5.23 `model_executor/cuda_graph_config.py` `PhaseConfig`, fields in order."""
    return {
        "backend": backend,
        "max_bs": None,
        "bs": None,
        "tc_compiler": "eager",
        "max_context_size": None,
        "full_prefill_max_req": None,
        "full_prefill_prefix_chunk_tokens": None,
        "max_seq_len": None,
    }


def default_cuda_graph_config() -> dict[str, dict[str, Any]]:
    """0.5.23 `CudaGraphConfig()` on CUDA: decode `full`, prefill `breakable`
    (`default_prefill_backend`)."""
    return {"decode": _phase_config("full"), "prefill": _phase_config("breakable")}


def piecewise_token_sizes(max_tokens: int) -> list[int]:
    """The default piecewise capture token counts of §3.7, up to `max_tokens`."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_tokens + 1, 512),
    ]
    sizes = [t for t in sizes if t <= max_tokens]
    if max_tokens not in sizes:
        sizes.append(max_tokens)
    return sizes


def sm90_or_sm100(gpu: Gpu) -> bool:
    """`is_sm90_supported() or is_sm100_supported()`: SM 9.x with CUDA >= 12.3, SM 10.x with
    CUDA >= 12.8 (§3.5); the only GPUs where FlashInfer AllReduce fusion takes effect."""
    major = gpu.compute_capability[0]
    return (major == 9 and gpu.cuda_version >= (12, 3)) or (major == 10 and gpu.cuda_version >= (12, 8))
