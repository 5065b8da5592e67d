"""Post-init: the reference's emulated 0.5.10 runs (Appendix C) and the scenarios' adjustments."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sglang.server_args import parse_server_args
from flagbot_lab.twin.engine import args
from flagbot_lab.twin.engine.adjust import post_init, render_server_args
from flagbot_lab.twin.engine.defaults import (
    W_DP_CHUNKED,
    W_SPEC_MAX_RUNNING,
    W_SPEC_OVERLAP,
    W_SPEC_V2_OVERLAP,
)
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import dry_run, resolve_args
from flagbot_lab.twin.schema import compile_scenario

LLAMA = "/models/llama-8b-like"
QWEN = "/models/qwen3moe-like"
NOISE = {
    "cuda_graph_bs",
    "piecewise_cuda_graph_tokens",
    "random_seed",
    "model_path",
    "tokenizer_path",
    "served_model_name",
    "device",
    "load_balance_method",
    "grammar_backend",
    "mamba_scheduler_strategy",
    "speculative_moe_runner_backend",
    "expert_distribution_recorder_buffer_size",
    "custom_weight_loader",
    "mm_process_config",
}
"""The always-derived fields Appendix C leaves out of its DIFF lists."""


def emulated_h200(architecture: str) -> Scenario:
    """What the reference patched into 0.5.10: 143771 MiB, SM90 with CUDA >= 12.3, H200, flashinfer."""
    return scenario_from_dict(
        {
            "name": "h200-emulated",
            "gpu": {
                "name": "NVIDIA H200",
                "compute_capability": "9.0",
                "memory_gib": 143771 / 1024,
                "gpus_per_node": 8,
                "cuda_version": "12.8",
            },
            "nodes": 1,
            "model": {
                "path": QWEN,
                "architecture": architecture,
                "model_type": "x",
                "weight_gib": 16,
                "num_layers": 32,
                "num_kv_heads": 8,
                "head_dim": 128,
                "context_length": 131072,
            },
            "launch": ["--model-path", QWEN],
            "throughput": {"single_stream_tok_s": 1, "aggregate_curve": [[1, 1]], "prefill_tok_s": 1},
        }
    )


def diff_from_defaults(server_args: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    defaults = args.field_defaults()
    return {
        name: (defaults[name], value)
        for name, value in server_args.items()
        if name not in NOISE and defaults[name] != value
    }


SPEC_OVERLAP_AS_PRINTED = W_SPEC_OVERLAP.rstrip()
BASE = {"chunked_prefill_size": (None, 8192), "page_size": (None, 1), "attention_backend": (None, "fa3")}
BASE |= {"sampling_backend": (None, "flashinfer"), "piecewise_cuda_graph_max_tokens": (None, 8192)}
TP8 = BASE | {"tp_size": (1, 8), "cuda_graph_max_bs": (None, 512)}
AR = {"enable_flashinfer_allreduce_fusion": (False, True)}
OFF = {"disable_piecewise_cuda_graph": (False, True)}

APPENDIX_C: list[tuple[str, str, list[str], dict[str, tuple[Any, Any]]]] = [
    (f"--model-path {LLAMA} --tp-size 1", "LlamaForCausalLM", [],
     BASE | {"mem_fraction_static": (None, 0.903), "cuda_graph_max_bs": (None, 256)}),
    (f"--model-path {LLAMA} --tp-size 1 --mem-fraction-static 0.85 --max-running-requests 256 --cuda-graph-max-bs 128",
     "LlamaForCausalLM", [],
     BASE | {"mem_fraction_static": (None, 0.85), "max_running_requests": (None, 256), "cuda_graph_max_bs": (None, 128)}),
    (f"--model-path {QWEN} --tp-size 8", "Qwen3MoeForCausalLM", [],
     TP8 | AR | {"mem_fraction_static": (None, 0.893)}),
    (f"--model-path {QWEN} --tp-size 8 --enforce-disable-flashinfer-allreduce-fusion", "Qwen3MoeForCausalLM", [],
     TP8 | {"mem_fraction_static": (None, 0.893), "enforce_disable_flashinfer_allreduce_fusion": (False, True)}),
    (f"--model-path {QWEN} --tp-size 8 --enable-fused-moe-sum-all-reduce --disable-piecewise-cuda-graph",
     "Qwen3MoeForCausalLM", [],
     TP8 | AR | OFF | {"mem_fraction_static": (None, 0.897), "enable_fused_moe_sum_all_reduce": (False, True)}),
    (f"--model-path {QWEN} --tp-size 8 --speculative-algorithm EAGLE --speculative-draft-model-path {LLAMA}",
     "Qwen3MoeForCausalLM", [W_SPEC_MAX_RUNNING, SPEC_OVERLAP_AS_PRINTED],
     TP8 | AR | OFF | {
         "mem_fraction_static": (None, 0.868),
         "max_running_requests": (None, 48),
         "speculative_algorithm": (None, "EAGLE"),
         "speculative_draft_model_path": (None, LLAMA),
         "speculative_draft_model_revision": (None, "main"),
         "speculative_num_steps": (None, 3),
         "speculative_eagle_topk": (None, 1),
         "speculative_num_draft_tokens": (None, 4),
         "disable_overlap_schedule": (False, True),
     }),
    (f"--model-path {QWEN} --tp-size 8 --enable-dp-attention --dp-size 8", "Qwen3MoeForCausalLM",
     [W_DP_CHUNKED.format(size=1024).rstrip()],
     TP8 | OFF | {
         "mem_fraction_static": (None, 0.769),
         "chunked_prefill_size": (None, 1024),
         "schedule_conservativeness": (1.0, 0.3),
         "dp_size": (1, 8),
         "enable_dp_attention": (False, True),
     }),
    (f"--model-path {QWEN} --tp-size 16 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000",
     "Qwen3MoeForCausalLM", [],
     BASE | {
         "mem_fraction_static": (None, 0.886),
         "tp_size": (1, 16),
         "dist_init_addr": (None, "10.0.0.1:5000"),
         "nnodes": (1, 2),
         "cuda_graph_max_bs": (None, 512),
     }),
    (f"--model-path {QWEN} --tp-size 8 --disable-cuda-graph --enable-torch-compile", "Qwen3MoeForCausalLM", [],
     TP8 | AR | OFF | {
         "mem_fraction_static": (None, 0.897),
         "disable_cuda_graph": (False, True),
         "enable_torch_compile": (False, True),
     }),
    (f"--model-path {LLAMA} --tp-size 1 --speculative-algorithm NGRAM", "LlamaForCausalLM",
     [
         W_SPEC_MAX_RUNNING,
         "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. You can override "
         "this by explicitly setting --speculative-num-draft-tokens.",
         "The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding.",
     ],
     BASE | OFF | {
         "mem_fraction_static": (None, 0.907),
         "max_running_requests": (None, 48),
         "speculative_algorithm": (None, "NGRAM"),
         "speculative_eagle_topk": (None, 10),
         "speculative_num_draft_tokens": (None, 12),
         "cuda_graph_max_bs": (None, 256),
         "disable_overlap_schedule": (False, True),
     }),
    (f"--model-path {LLAMA} --tp-size 1 --disable-radix-cache --enable-lora --lora-paths a=/lora/x",
     "LlamaForCausalLM", [],
     BASE | OFF | {
         "mem_fraction_static": (None, 0.907),
         "enable_lora": (None, True),
         "lora_paths": (None, ["a=/lora/x"]),
         "disable_radix_cache": (False, True),
         "cuda_graph_max_bs": (None, 256),
     }),
    (f"--model-path {QWEN} --tp-size 8 --ep-size 8 --moe-a2a-backend deepep", "Qwen3MoeForCausalLM",
     ["DeepEP MoE is enabled. The expert parallel size is adjusted to be the same as the tensor parallel size[8]."],
     TP8 | OFF | {"mem_fraction_static": (None, 0.897), "ep_size": (1, 8), "moe_a2a_backend": ("none", "deepep")}),
    (f"--model-path {LLAMA} --tp-size 1 --attention-backend torch_native", "LlamaForCausalLM",
     ["Cuda graph is disabled because of using torch native attention backend"],
     BASE | {
         "mem_fraction_static": (None, 0.903),
         "attention_backend": (None, "torch_native"),
         "cuda_graph_max_bs": (None, 256),
         "disable_cuda_graph": (False, True),
     }),
    (f"--model-path {LLAMA} --tp-size 1 --enable-piecewise-cuda-graph", "LlamaForCausalLM",
     ["\033[1;33mThe command line argument '--enable-piecewise-cuda-graph' is deprecated and will be removed in "
      "future versions.\033[0m"],
     BASE | {"mem_fraction_static": (None, 0.903), "cuda_graph_max_bs": (None, 256)}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "arch", "warnings", "diff"), APPENDIX_C, ids=[c[0][21:] for c in APPENDIX_C]
)
def test_appendix_c_post_init_is_reproduced(
    argv: str, arch: str, warnings: list[str], diff: dict[str, tuple[Any, Any]]
) -> None:
    post = resolve_args(argv.split(), emulated_h200(arch), seed=1, env={})
    assert diff_from_defaults(post.server_args) == diff
    assert [w.rstrip() for w in post.warnings] == warnings


def test_warning_texts_keep_the_sources_trailing_spaces() -> None:
    assert W_SPEC_OVERLAP.endswith("overlap scheduler. ")
    assert W_DP_CHUNKED.format(size=1024).endswith("MoE kernel issues. ")


def test_info_messages_are_kept_apart_from_warnings() -> None:
    post = resolve_args(
        ["--model-path", QWEN, "--tp-size", "8"], emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={}
    )
    assert post.info == [
        "Auto-enabling FlashInfer AllReduce Fusion on SM90/SM10X for Qwen3MoeForCausalLM",
        "Attention backend not specified. Use fa3 backend by default.",
    ]
    assert post.warnings == []


def test_spec_v2_keeps_the_overlap_scheduler() -> None:
    argv = ["--model-path", QWEN, "--speculative-algorithm", "EAGLE"]
    post = resolve_args(
        argv, emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={"SGLANG_ENABLE_SPEC_V2": "True"}
    )
    assert post.server_args["disable_overlap_schedule"] is False
    assert post.warnings == [W_SPEC_MAX_RUNNING, W_SPEC_V2_OVERLAP]


def test_an_explicit_max_running_requests_survives_speculative_decoding() -> None:
    argv = ["--model-path", QWEN, "--speculative-algorithm", "NEXTN", "--max-running-requests", "64"]
    post = resolve_args(argv, emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={})
    assert post.server_args["max_running_requests"] == 64
    assert post.server_args["speculative_algorithm"] == "EAGLE"  # NEXTN is rewritten
    assert W_SPEC_MAX_RUNNING not in post.warnings


def test_llama_gets_its_own_eagle_defaults_and_topk1_fixes_draft_tokens() -> None:
    llama = emulated_h200("LlamaForCausalLM")
    post = resolve_args(["--model-path", LLAMA, "--speculative-algorithm", "EAGLE"], llama, seed=1, env={})
    assert [
        post.server_args[f"speculative_{k}"] for k in ("num_steps", "eagle_topk", "num_draft_tokens")
    ] == [5, 4, 8]
    argv = ["--model-path", LLAMA, "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2"]
    argv += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "7"]
    post = resolve_args(argv, llama, seed=1, env={})
    assert post.server_args["speculative_num_draft_tokens"] == 3
    assert (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        in post.warnings
    )


def test_dp_attention_with_one_dp_rank_is_switched_off_silently() -> None:
    argv = ["--model-path", QWEN, "--tp-size", "8", "--enable-dp-attention"]
    post = resolve_args(argv, emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={})
    assert post.server_args["enable_dp_attention"] is False
    assert post.warnings == []


def test_cuda_graph_bs_sets_the_max_batch_size() -> None:
    argv = ["--model-path", QWEN, "--cuda-graph-bs", "1", "2", "4", "24"]
    post = resolve_args(argv, emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={})
    assert post.server_args["cuda_graph_max_bs"] == 24
    assert post.server_args["cuda_graph_bs"] == [1, 2, 4, 24]


def test_lora_paths_alone_enable_lora_with_a_logged_warning() -> None:
    post = resolve_args(
        ["--model-path", LLAMA, "--lora-paths", "a=/x"], emulated_h200("LlamaForCausalLM"), seed=1, env={}
    )
    assert post.server_args["enable_lora"] is True
    assert post.logged_warnings == ["--enable-lora is set to True because --lora-paths is provided."]
    assert post.warnings == []


def test_default_capture_lists_match_the_reference() -> None:
    post = resolve_args(
        ["--model-path", QWEN, "--tp-size", "8"], emulated_h200("Qwen3MoeForCausalLM"), seed=1, env={}
    )
    bs = post.server_args["cuda_graph_bs"]
    assert len(bs) == 52 and bs[:6] == [1, 2, 4, 8, 12, 16] and bs[-3:] == [480, 496, 512]
    tokens = post.server_args["piecewise_cuda_graph_tokens"]
    assert len(tokens) == 58 and tokens[:3] == [4, 8, 12] and tokens[-2:] == [7680, 8192]


# -- the scenarios ------------------------------------------------------------------------------


def _scenario(name: str) -> Scenario:
    return scenario_from_dict(compile_scenario(name))


def _gb10_argv(*extra: str) -> list[str]:
    scenario = _scenario("seed-gb10")
    return [
        *scenario.launch,
        "--nnodes",
        "2",
        "--node-rank",
        "0",
        "--dist-init-addr",
        "10.0.0.1:5000",
        *extra,
    ]


def test_seed_gb10_parsed_max_running_requests_is_48_from_speculative_decoding() -> None:
    post = resolve_args(_gb10_argv(), _scenario("seed-gb10"), seed=1, env={})
    a = post.server_args
    assert a["max_running_requests"] == 48
    assert post.warnings == [W_SPEC_MAX_RUNNING, W_SPEC_OVERLAP]
    assert a["disable_piecewise_cuda_graph"] is True  # EAGLE, 0.5.10 only
    assert a["enable_flashinfer_allreduce_fusion"] is False  # SM 12.1, and nnodes > 1
    assert a["attention_backend"] == "flashinfer"
    # 0.856 lowered by `adjust_mem_fraction_for_vlm` (27 x 1152^2 vision tower: x 0.9097)
    assert a["mem_fraction_static"] == pytest.approx(
        0.856 * 0.95 * (1 - 0.1 * (27 * 1152**2 / (24 * 1024**2) - 1))
    )
    assert a["mamba_scheduler_strategy"] == "extra_buffer" and a["disable_radix_cache"] is False
    assert post.implied["max_running_requests"] == 48
    assert "tp_size" not in post.implied  # requested, not implied


def test_seed_gb10_allreduce_fusion_is_parsed_but_implies_nothing() -> None:
    base = resolve_args(_gb10_argv(), _scenario("seed-gb10"), seed=1, env={})
    fused = resolve_args(
        _gb10_argv("--enable-flashinfer-allreduce-fusion"), _scenario("seed-gb10"), seed=1, env={}
    )
    changed = {k for k in base.server_args if base.server_args[k] != fused.server_args[k]}
    assert changed == {"enable_flashinfer_allreduce_fusion"}


def test_h200_auto_enables_allreduce_fusion() -> None:
    scenario = _scenario("h200-tp8")
    post = resolve_args(list(scenario.launch), scenario, seed=1, env={})
    assert post.server_args["enable_flashinfer_allreduce_fusion"] is True
    assert post.implied["enable_flashinfer_allreduce_fusion"] is True
    assert post.server_args["mem_fraction_static"] == 0.893


def test_scenario_implied_flags_feed_back_into_post_init() -> None:
    document = compile_scenario("h200-tp8")
    document["flags"] = [
        {
            "when": [
                {"flag": "--enable-fused-moe-sum-all-reduce", "field": "enable_fused_moe_sum_all_reduce"}
            ],
            "side_effects": {"implies": {"disable_piecewise_cuda_graph": True}},
        }
    ]
    scenario = scenario_from_dict(document)
    post = resolve_args([*scenario.launch, "--enable-fused-moe-sum-all-reduce"], scenario, seed=1, env={})
    assert post.server_args["disable_piecewise_cuda_graph"] is True
    assert post.server_args["mem_fraction_static"] == 0.897  # recomputed without piecewise reserve
    assert post.implied["disable_piecewise_cuda_graph"] is True


def test_the_server_args_text_reads_back_through_flagbots_parser() -> None:
    scenario = _scenario("seed-gb10")
    post = resolve_args(_gb10_argv("--enable-fused-moe-sum-all-reduce"), scenario, seed=3, env={})
    text = "[2026-03-09 21:45:34] server_args=" + render_server_args(post.server_args)
    assert parse_server_args(text) == post.server_args
    assert text.count("(model_path=") == 1


def test_dry_run_prints_the_post_init_line() -> None:
    scenario = _scenario("seed-gb10")
    line = dry_run(_gb10_argv(), scenario)
    parsed = parse_server_args(line)
    assert line.startswith("server_args=ServerArgs(model_path='/shared/models/Qwen3.5-122B-A10B', ")
    assert parsed is not None and parsed["max_running_requests"] == 48


def test_post_init_is_deterministic_per_seed() -> None:
    scenario = _scenario("tiny-cpu")
    parsed = args.parse(list(scenario.launch))
    first = post_init(parsed, scenario, seed=5).server_args
    assert post_init(parsed, scenario, seed=5).server_args == first
    assert post_init(parsed, scenario, seed=6).server_args["random_seed"] != first["random_seed"]
