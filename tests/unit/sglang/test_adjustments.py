"""Every adjustment warning that bears on a flag is a warning, mapped to that flag (issue 21, item 4).

Each text is what the release's logging call prints (file and function in bot/sglang/adjustments.py
and below), placeholders filled with one plausible value. Up to 0.5.23 SGLang's prefix carries no
level, and post-init warnings are printed bare before logging is configured: the parser must know
the texts, not the level.
"""

from __future__ import annotations

import pytest

from bot.sglang.adjustments import flag_of
from bot.sglang.log import parse_log_text
from bot.sglang.log_events import is_warning
from bot.sglang.logline import parse_line

PREFIX = "[2026-11-30 10:00:05 TP0] "

WARNINGS: list[tuple[str, str]] = [
    # server_args.py `_handle_mamba_radix_cache` (0.5.9, 0.5.10)
    (
        "Disabling overlap schedule since mamba no_buffer is not compatible with overlap schedule, "
        "try to use --disable-radix-cache if overlap schedule is necessary",
        "disable_overlap_schedule",
    ),
    (
        "Disabling radix cache since trtllm_mha does not support page_size = 1, which is required by "
        "MambaRadixCache. Try to use --attention-backend triton if radix cache is necessary.",
        "disable_radix_cache",
    ),
    # server_args.py `_handle_speculative_decoding` (0.5.9, 0.5.10)
    (
        "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. "
        "You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler.",
        "disable_overlap_schedule",
    ),
    (
        "Max running requests is reset to 48 for speculative decoding. You can override this by "
        "explicitly setting --max-running-requests.",
        "max_running_requests",
    ),
    (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "speculative_num_draft_tokens",
    ),
    (
        "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
        "enable_mixed_chunk",
    ),
    # distributed/parallel_state.py `GroupCoordinator.__init__` (0.5.9, 0.5.10, 0.5.23)
    (
        "Setup Custom allreduce failed with CUDA error: peer access is not supported between these two "
        "devices. To silence this warning, specify --disable-custom-all-reduce explicitly.",
        "disable_custom_all_reduce",
    ),
    # model_runner.py `ModelRunner.__init__` (0.4 releases, an INFO line)
    (
        "Automatically reduce --mem-fraction-static to 0.792 because this is a multimodal model.",
        "mem_fraction_static",
    ),
    (
        "Automatically turn off --chunked-prefill-size for multimodal model.",
        "chunked_prefill_size",
    ),
    # mem_cache/kv_cache_configurator.py `_resolve_max_num_reqs` (0.5.23)
    (
        "max_running_requests is capped to 26 by the mamba state cache (max_mamba_cache_size=79, 3 state "
        "slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, "
        "or halve the state size with --mamba-ssm-dtype bfloat16.",
        "max_running_requests",
    ),
    (
        "max_running_requests was reduced from the requested 64 to 32 (per dp worker) due to the "
        "available KV cache capacity.",
        "max_running_requests",
    ),
    # server_args.py `_handle_attention_backend_compatibility` (0.5.9, 0.5.10)
    ("FlashMLA only supports a page_size of 64, change page_size to 64.", "page_size"),
    ("Cutlass MLA only supports a page_size of 128, change page_size to 128.", "page_size"),
    ("Cuda graph is disabled because of using torch native attention backend", "disable_cuda_graph"),
    (
        "FlashAttention3 only supports fp8_e4m3 if using FP8; Setting attention backend to triton.",
        "attention_backend",
    ),
    # server_args.py `_handle_data_parallelism`, `_handle_moe_kernel_config` (0.5.9, 0.5.10)
    (
        "DP attention is enabled. The chunked prefill size is adjusted to 4096 to avoid MoE kernel issues. ",
        "chunked_prefill_size",
    ),
    (
        "DeepEP MoE is enabled. The expert parallel size is adjusted to be the same as the tensor parallel "
        "size[8].",
        "ep_size",
    ),
    (
        "FlashInfer TRTLLM MoE is enabled. --disable-shared-experts-fusion is automatically set.",
        "disable_shared_experts_fusion",
    ),
    # server_args.py `_handle_pipeline_parallelism`, `_handle_hicache`, `_handle_pd_disaggregation`
    ("Pipeline parallelism is incompatible with overlap schedule.", "disable_overlap_schedule"),
    (
        "Mooncake storage backend does not support layer_first layout, switching to page_first layout for "
        "kernel io backend",
        "hicache_mem_layout",
    ),
    (
        "Kernel io backend does not support page first direct layout, switching to direct io backend",
        "hicache_io_backend",
    ),
    ("KV cache is forced as chunk cache for decode server", "disable_radix_cache"),
    # server_args.py `_handle_other_validations` (0.5.10)
    (
        "skip_tokenizer_init=True disables tokenizer workers; forcing tokenizer_worker_num=1 (requested 4).",
        "tokenizer_worker_num",
    ),
    (
        "FlashAttention3 decode backend is not compatible with hierarchical cache. Setting hicache_io_backend "
        "to vanilla I/O, which may lead to suboptimal performance with small page sizes.",
        "hicache_io_backend",
    ),
    # server_args.py `_handle_deterministic_inference`
    (
        "NCCL_ALGO is set to 'allreduce:tree' and custom all reduce is disabled for deterministic inference "
        "when TP size > 1.",
        "disable_custom_all_reduce",
    ),
    # configs/model_config.py `_get_and_verify_dtype`
    ("Casting torch.bfloat16 to torch.float16.", "dtype"),
]


RUNTIME = (
    "Setup Custom allreduce",
    "Automatically ",
    "max_running_requests is capped",
    "max_running_requests was",
    "Casting ",
)
"""Printed by a scheduler or model runner, behind SGLang's prefix (no level); the rest are
`ServerArgs.__post_init__`'s, printed bare before logging is configured."""


@pytest.mark.parametrize(("text", "flag"), WARNINGS, ids=[text[:48] for text, _ in WARNINGS])
def test_each_adjustment_warning_bears_on_its_flag(text: str, flag: str) -> None:
    assert flag_of(text) == flag
    line = PREFIX + text if text.startswith(RUNTIME) else text
    report = parse_log_text(line)
    assert [(w["text"], w["flag"]) for w in report.warnings] == [(text.strip(), flag)]
    assert report.current.warnings_count == 1


@pytest.mark.parametrize(
    "line",
    [
        "Attempt 2 of 5: sglang exited because the port was busy, retrying in 10 s",
        "[2026-11-30 10:00:05] WARNING: Attempt 3 failed, resetting to the default flags",
        "2026-11-30 10:00:05,123 - launcher - WARNING - the server was not ready, retrying",
        "2026-11-30 10:00:05,123 - launcher - WARNING - Attempt 4 failed",
    ],
)
def test_a_launchers_own_lines_are_not_sglang_warnings(line: str) -> None:
    assert not is_warning(parse_line(line))
    assert parse_log_text(line).current.warnings_count == 0


def test_sglangs_own_logger_behind_a_python_logging_wrapper_still_counts() -> None:
    line = "2025-03-07 23:50:27,531 - sglang.srt.server_args - WARNING - Overlap disabled"
    assert is_warning(parse_line(line))


def test_a_text_that_names_no_flag_has_none() -> None:
    report = parse_log_text(PREFIX + "WARNING server_args.py:1: the platform is slow today")
    assert [w["flag"] for w in report.warnings] == [None]
    assert flag_of("Casting is not a flag; neither is the weather.") is None
