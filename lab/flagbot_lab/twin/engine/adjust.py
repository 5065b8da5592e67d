"""SGLang 0.5.10's `ServerArgs.__post_init__`, for the cases the scenarios use (reference §3.2-3.4).

Why: the `server_args=ServerArgs(...)` line, `/server_info` and the bare WARNING lines on stderr
are printed *after* post-init, and the whole point of flagbot is to diff them against what was
requested. The handlers below run in SGLang's order (§3.3) and change the same fields, with
the same WARNING texts (bare on stderr, because logging is not configured yet, §1.4). INFO
messages are kept in `PostInit.info` only: a real server never shows them.

Hardware facts (`get_device_memory_capacity`, `is_sm90_supported`, device name, flashinfer)
come from the scenario's GPU instead of monkey-patches; `SGLANG_ENABLE_SPEC_V2` from the
environment. After the SGLang handlers, the scenario's *implied flags* (per-flag `implies`)
are applied and post-init runs again with them, so derived values (memory fraction, piecewise
state) follow as if SGLang itself had set them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .args import ParsedArgs
from .defaults import (
    AR_FUSION_FAMILIES,
    W_DEEPEP,
    W_DP_CHUNKED,
    W_EAGLE_MIXED,
    W_EPLB,
    W_FLEX,
    W_LORA,
    W_NAN,
    W_NGRAM_DRAFT,
    W_NGRAM_OVERLAP,
    W_PD_DECODE,
    W_PD_PREFILL,
    W_PP_OVERLAP,
    W_QWEN25,
    W_SPEC_MAX_RUNNING,
    W_SPEC_OVERLAP,
    W_TOPK1_DRAFT,
    W_TORCH_NATIVE,
    W_TRTLLM_MOE,
    cuda_graph_batch_sizes,
    memory_tier,
    piecewise_token_sizes,
    sm90_or_sm100,
)
from .scenario import Scenario


@dataclass
class PostInit:
    """The result of post-init.

    `server_args`: every field in dataclass order, post-init values. `warnings`: the bare
    stderr lines, in print order (argparse deprecations first). `logged_warnings`: warnings
    raised in `check_server_args`, after logging is configured, so printed with the `[time] `
    prefix just before the `server_args=` line. `implied`: fields whose post-init value differs
    from the parsed command line (defaults included), i.e. what SGLang and the scenario changed.
    """

    server_args: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    logged_warnings: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    implied: dict[str, Any] = field(default_factory=dict)
    requested: set[str] = field(default_factory=set)


class _Run:
    """One pass of the handlers over a mutable field dict."""

    def __init__(self, a: dict[str, Any], scenario: Scenario, env: Mapping[str, str], seed: int) -> None:
        self.a = a
        self.s = scenario
        self.env = env
        self.rng = random.Random(seed)  # noqa: S311 - a simulation, not cryptography
        self.warnings: list[str] = []
        self.logged: list[str] = []
        self.info: list[str] = []

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    # -- handlers, in __post_init__ order ---------------------------------------------------

    def run(self) -> None:
        a = self.a
        if a["load_balance_method"] == "auto":
            a["load_balance_method"] = "round_robin"
        self.missing_defaults()
        self.piecewise()
        self.gpu_memory_settings()
        self.model_specific()
        if a["sampling_backend"] is None:
            a["sampling_backend"] = "flashinfer" if self.s.gpu.flashinfer_available else "pytorch"
        self.attention_backend()
        if a["page_size"] is None:
            a["page_size"] = 1
        if a["grammar_backend"] is None:
            a["grammar_backend"] = "xgrammar"
        self.data_parallelism()
        self.moe()
        if a["pp_size"] > 1 and not a["disable_overlap_schedule"]:
            a["disable_overlap_schedule"] = True
            self.warn(W_PP_OVERLAP)
        self.speculative()
        self.disaggregation()
        self.other_validations()

    def missing_defaults(self) -> None:
        """Always-derived fields (the "noise" the reference's Appendix C leaves out)."""
        a = self.a
        if a["tokenizer_path"] is None:
            a["tokenizer_path"] = a["model_path"]
        if a["served_model_name"] is None:
            a["served_model_name"] = a["model_path"]
        if a["device"] is None:
            a["device"] = "cuda"
        if a["random_seed"] is None:
            a["random_seed"] = self.rng.randint(0, 1 << 30)
        for name, value in (
            ("speculative_moe_runner_backend", "auto"),
            ("expert_distribution_recorder_buffer_size", 1000),
            ("custom_weight_loader", []),
            ("mm_process_config", {}),
        ):
            if a[name] is None:
                a[name] = value
        if a["mamba_scheduler_strategy"] == "auto":
            a["mamba_scheduler_strategy"] = "no_buffer"

    def piecewise(self) -> None:
        """§3.4 #3: piecewise CUDA graph is on by default in 0.5.10 unless a condition holds."""
        a = self.a
        if a["enforce_piecewise_cuda_graph"] or a["disable_piecewise_cuda_graph"]:
            return
        model = self.s.model
        reasons = [
            a["speculative_algorithm"] is not None,  # 0.5.10 only; 0.5.11 dropped it
            bool(a["enable_dp_attention"]),
            bool(a["enable_torch_compile"]),
            a["pp_size"] > 1,
            a["device"] not in (None, "cuda"),
            a["moe_a2a_backend"] != "none",
            bool(a["enable_lora"]) or bool(a["lora_paths"]),
            model.multimodal,
            a["load_format"] == "gguf",
            a["dllm_algorithm"] is not None,
            a["cpu_offload_gb"] > 0 or bool(a["enable_hierarchical_cache"]),
            bool(a["enable_deterministic_inference"]),
            a["disaggregation_mode"] != "null",
            bool(a["enable_symm_mem"]),
            bool(a["enable_eplb"]) or a["expert_distribution_recorder_mode"] is not None,
            a["attn_cp_size"] > 1,
            model.piecewise_unsupported,
            a["moe_runner_backend"] == "flashinfer_trtllm" and not model.architecture.startswith("GptOss"),
        ]
        if any(reasons):
            a["disable_piecewise_cuda_graph"] = True

    def gpu_memory_settings(self) -> None:
        """§3.2: chunked prefill, CUDA-graph batch sizes and mem_fraction_static by memory tier."""
        a = self.a
        gpu_mem = float(self.s.gpu.memory_mib)
        tp = a["tp_size"]
        chunked, max_bs = memory_tier(gpu_mem, tp)
        if a["chunked_prefill_size"] is None:
            a["chunked_prefill_size"] = chunked
        if a["cuda_graph_bs"]:
            a["cuda_graph_max_bs"] = max(a["cuda_graph_bs"])  # §3.4 #21
        elif a["cuda_graph_max_bs"] is None:
            a["cuda_graph_max_bs"] = max_bs
        if a["cuda_graph_bs"] is None:
            a["cuda_graph_bs"] = cuda_graph_batch_sizes(
                a["cuda_graph_max_bs"], spec=a["speculative_algorithm"] is not None
            )
        if a["piecewise_cuda_graph_max_tokens"] is None:
            size = a["chunked_prefill_size"]
            a["piecewise_cuda_graph_max_tokens"] = size if size and size > 0 else 4096
        if a["piecewise_cuda_graph_tokens"] is None:
            a["piecewise_cuda_graph_tokens"] = piecewise_token_sizes(a["piecewise_cuda_graph_max_tokens"])
        if a["mem_fraction_static"] is None:
            a["mem_fraction_static"] = self.auto_mem_fraction(gpu_mem)

    def auto_mem_fraction(self, gpu_mem: float) -> float:
        a = self.a
        bs = int(a["cuda_graph_max_bs"])
        reserved: float = (
            512 + max(a["chunked_prefill_size"], 2048) * 1.5 + bs * 2 + a["tp_size"] * a["pp_size"] / 8 * 1024
        )
        if a["enable_dp_attention"]:
            reserved += bs * a["dp_size"] * 3
            if bs > 300:
                reserved += bs * a["dp_size"] * 1.5
        if not a["disable_piecewise_cuda_graph"]:
            reserved += len(a["piecewise_cuda_graph_tokens"]) * 8
        if gpu_mem > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        algorithm = a["speculative_algorithm"]
        if algorithm == "STANDALONE":
            reserved += 6 * 1024
        elif algorithm is not None and algorithm != "NGRAM":
            reserved += 4 * 1024
        return round((gpu_mem - reserved) / gpu_mem, 3)

    def model_specific(self) -> None:
        """§3.4 #8/#9: FlashInfer AllReduce fusion is auto-enabled on SM90/SM10X only."""
        a = self.a
        gpu = self.s.gpu
        arch = self.s.model.architecture
        family = arch.split("For", 1)[0]
        if (
            family in AR_FUSION_FAMILIES
            and sm90_or_sm100(gpu)
            and a["tp_size"] > 1
            and not a["enable_dp_attention"]
            and a["attn_cp_size"] <= 1
            and a["nnodes"] == 1
            and "H20" not in gpu.name.split()
            and a["moe_a2a_backend"] == "none"
            and not a["enable_flashinfer_allreduce_fusion"]
        ):
            a["enable_flashinfer_allreduce_fusion"] = True
            self.info.append(f"Auto-enabling FlashInfer AllReduce Fusion on SM90/SM10X for {arch}")
        if a["enforce_disable_flashinfer_allreduce_fusion"]:
            a["enable_flashinfer_allreduce_fusion"] = False
            self.info.append(
                "FlashInfer allreduce fusion is forcibly disabled via --enforce-disable-flashinfer-allreduce-fusion."
            )

    def attention_backend(self) -> None:
        """§3.4 #10 and #13."""
        a = self.a
        gpu = self.s.gpu
        if a["attention_backend"] is None:
            major = gpu.compute_capability[0]
            if major == 9 and gpu.cuda_version >= (12, 3):
                backend = "fa3"
            elif major == 10:
                backend = "trtllm_mha"
            else:
                backend = "flashinfer" if gpu.flashinfer_available else "triton"
            a["attention_backend"] = backend
            self.info.append(f"Attention backend not specified. Use {backend} backend by default.")
        if a["attention_backend"] in ("torch_native", "flex_attention") and not a["disable_cuda_graph"]:
            a["disable_cuda_graph"] = True
            self.warn(W_TORCH_NATIVE if a["attention_backend"] == "torch_native" else W_FLEX)

    def data_parallelism(self) -> None:
        """§3.4 #22b and #11."""
        a = self.a
        if a["enable_dp_attention"] and a["dp_size"] == 1:
            a["enable_dp_attention"] = False
            a["enable_dp_lm_head"] = False
        if a["enable_dp_attention"]:
            a["chunked_prefill_size"] = a["chunked_prefill_size"] // a["dp_size"]
            a["schedule_conservativeness"] = a["schedule_conservativeness"] * 0.3
            self.warn(W_DP_CHUNKED.format(size=a["chunked_prefill_size"]))

    def moe(self) -> None:
        """§3.4 #12, #17, #18."""
        a = self.a
        if a["moe_a2a_backend"] == "deepep":
            a["ep_size"] = a["tp_size"]
            self.warn(W_DEEPEP.format(tp=a["tp_size"]))
        if a["moe_runner_backend"] == "flashinfer_trtllm":
            a["disable_shared_experts_fusion"] = True
            self.warn(W_TRTLLM_MOE)
        if a["enable_eplb"] and a["expert_distribution_recorder_mode"] is None:
            a["expert_distribution_recorder_mode"] = "stat"
            self.warn(W_EPLB)

    def speculative(self) -> None:
        """§3.4 #1, #2, #4-#7."""
        a = self.a
        if a["speculative_algorithm"] == "NEXTN":
            a["speculative_algorithm"] = "EAGLE"
        algorithm = a["speculative_algorithm"]
        if algorithm is None:
            return
        if a["max_running_requests"] is None:
            a["max_running_requests"] = 48
            self.warn(W_SPEC_MAX_RUNNING)
        if algorithm == "NGRAM":
            a["speculative_eagle_topk"] = a["speculative_ngram_max_bfs_breadth"]
            if a["speculative_num_draft_tokens"] is None:
                a["speculative_num_draft_tokens"] = 12
                self.warn(W_NGRAM_DRAFT)
            a["disable_overlap_schedule"] = True
            a["enable_mixed_chunk"] = False
            self.warn(W_NGRAM_OVERLAP)
            return
        if a["speculative_draft_model_path"] is not None and a["speculative_draft_model_revision"] is None:
            a["speculative_draft_model_revision"] = "main"
        spec_v2 = self.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes")
        if not spec_v2 or algorithm not in ("EAGLE", "EAGLE3"):
            a["disable_overlap_schedule"] = True
            self.warn(W_SPEC_OVERLAP)
        if a["enable_mixed_chunk"]:
            a["enable_mixed_chunk"] = False
            self.warn(W_EAGLE_MIXED)
        if a["speculative_num_steps"] is None:
            llama = self.s.model.architecture.startswith("Llama")
            defaults = (5, 4, 8) if llama else (3, 1, 4)
            for name, value in zip(
                ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"),
                defaults,
                strict=True,
            ):
                if a[name] is None:
                    a[name] = value
        steps, topk, drafts = (
            a["speculative_num_steps"],
            a["speculative_eagle_topk"],
            a["speculative_num_draft_tokens"],
        )
        if topk == 1 and steps is not None and drafts != steps + 1:
            a["speculative_num_draft_tokens"] = steps + 1
            self.warn(W_TOPK1_DRAFT)

    def disaggregation(self) -> None:
        """§3.4 #14, #15."""
        a = self.a
        if a["disaggregation_mode"] == "decode" and not a["disable_radix_cache"]:
            a["disable_radix_cache"] = True
            self.warn(W_PD_DECODE)
        if (
            a["disaggregation_mode"] == "prefill"
            and a["disable_piecewise_cuda_graph"]
            and not a["disable_cuda_graph"]
        ):
            a["disable_cuda_graph"] = True
            self.warn(W_PD_PREFILL)

    def other_validations(self) -> None:
        """§3.4 #20, #23, #24, and #22 (logged later, by check_server_args)."""
        a = self.a
        if a["skip_tokenizer_init"] and a["tokenizer_worker_num"] > 1:
            requested = a["tokenizer_worker_num"]
            a["tokenizer_worker_num"] = 1
            self.warn(
                "skip_tokenizer_init=True disables tokenizer workers; forcing tokenizer_worker_num=1 "
                f"(requested {requested})."
            )
        if a["enable_nan_detection"]:
            self.warn(W_NAN)
        if a["tool_call_parser"] == "qwen25":
            a["tool_call_parser"] = "qwen"
            self.warn(W_QWEN25)
        if a["lora_paths"] and not a["enable_lora"]:
            a["enable_lora"] = True
            self.logged.append(W_LORA)


def _implied_by_scenario(scenario: Scenario, server_args: Mapping[str, Any]) -> dict[str, Any]:
    implied: dict[str, Any] = {}
    for _rule, effect in scenario.active_effects(server_args):
        implied.update(effect.implies)
    return implied


def post_init(
    parsed: ParsedArgs, scenario: Scenario, *, seed: int, env: Mapping[str, str] | None = None
) -> PostInit:
    """Run post-init on the parsed command line; `seed` fixes the random `random_seed`."""
    env = {} if env is None else env
    start = dict(parsed.values)
    run = _Run(dict(start), scenario, env, seed)
    run.run()
    for _ in range(3):  # the scenario's implied flags, then post-init again until stable
        implied = _implied_by_scenario(scenario, run.a)
        changed = {k: v for k, v in implied.items() if run.a.get(k) != v}
        if not changed:
            break
        start.update(changed)
        run = _Run(dict(start), scenario, env, seed)
        run.run()
        run.a.update(implied)
    result = run.a
    diff = {name: value for name, value in result.items() if parsed.values.get(name) != value}
    return PostInit(
        server_args=result,
        warnings=[*parsed.warnings, *run.warnings],
        logged_warnings=run.logged,
        info=run.info,
        implied=diff,
        requested=set(parsed.requested),
    )


def render_server_args(server_args: Mapping[str, Any]) -> str:
    """`ServerArgs(model_path='...', ...)`: the dataclass repr, fields in the given order."""
    return "ServerArgs(" + ", ".join(f"{name}={value!r}" for name, value in server_args.items()) + ")"
