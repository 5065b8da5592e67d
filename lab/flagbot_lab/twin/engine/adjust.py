"""SGLang's argument post-processing per release, for the cases the scenarios use (reference §3.2-3.4).

0.5.9 and 0.5.10 run it in `ServerArgs.__post_init__`; 0.5.23 in `ServerArgs.resolve_once`
(`arg_groups/pipeline.py` `run_resolution_pipeline`), after logging is configured, so its
WARNINGs carry the `[time] ` prefix. The differences between releases are named in
`releases.py` and cited in docs/twin.md "Releases".

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

import copy
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .args import ParsedArgs
from .defaults import (
    AR_FUSION_FAMILIES,
    W_BREAKABLE_INCOMPATIBLE,
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
    W_SPEC_MIXED_0_5_23,
    W_SPEC_OVERLAP,
    W_SPEC_V2_OVERLAP,
    W_SPEC_V2_SYNC,
    W_TOPK1_DRAFT,
    W_TORCH_NATIVE,
    W_TRTLLM_MOE,
    cuda_graph_batch_sizes,
    decode_cuda_graph_batch_sizes,
    default_cuda_graph_config,
    memory_tier,
    memory_tier_0_5_23,
    piecewise_token_sizes,
    prefill_cuda_graph_batch_sizes,
    sm90_or_sm100,
)
from .hybrid import (
    RADIX_CACHE_ARCHITECTURES,
    ServerArgsRefusedError,
    adjust_mem_fraction_for_vlm,
    handle_mamba_radix_cache,
    resolve_mamba_radix_cache_0_5_23,
)
from .releases import release
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
    refused: str | None = None
    """SGLang's ValueError message when post-init refuses the launch line (0.5.10
    `_handle_mamba_radix_cache`); `server_args` then holds the fields as they were at the raise,
    and nothing after post-init happens."""


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
        self.r = release(scenario.sglang_version)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    # -- handlers, in __post_init__ order ---------------------------------------------------

    def run(self) -> None:
        a = self.a
        if a["load_balance_method"] == "auto":
            a["load_balance_method"] = "round_robin"
        self.missing_defaults()
        if self.r.nested_graph_config:
            self.cuda_graph_config()
        else:
            self.piecewise()
        if self.r.nested_graph_config:
            self.gpu_memory_settings_nested()
        else:
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
            if name in a and a[name] is None:
                a[name] = value
        if a.get("mamba_scheduler_strategy") == "auto":
            a["mamba_scheduler_strategy"] = "no_buffer"

    def piecewise(self) -> None:
        """§3.4 #3: piecewise CUDA graph is on by default in 0.5.10 unless a condition holds
        (`_handle_piecewise_cuda_graph`). 0.5.9 has no such handler: piecewise stays off unless
        `--enable-piecewise-cuda-graph` is given."""
        a = self.a
        if not self.r.piecewise_default_on:
            return
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

    def cuda_graph_config(self) -> None:
        """0.5.23 `arg_groups/cuda_graph_hook.py` `handle_cuda_graph_config`: the nested
        `cuda_graph_config` from the legacy switches, the per-phase flags and `--cuda-graph-config`
        JSON (`parse_cuda_graph_config`, that precedence), then the prefill auto-disable rules the
        scenarios can meet (`apply_cuda_graph_compatibility`: PP, a multimodal model, an
        unvalidated all-to-all backend) unless the prefill backend was given."""
        a = self.a
        config = default_cuda_graph_config()
        locked: set[tuple[str, str]] = set()

        def put(phase: str, key: str, value: Any) -> None:
            config[phase][key] = value
            locked.add((phase, key))

        if a.get("disable_cuda_graph"):
            put("decode", "backend", "disabled")
            put("prefill", "backend", "disabled")
        if a.get("disable_prefill_cuda_graph"):
            put("prefill", "backend", "disabled")
        if a.get("disable_decode_cuda_graph"):
            put("decode", "backend", "disabled")
        for phase in ("decode", "prefill"):
            for key, name in (
                ("backend", "cuda_graph_backend_"),
                ("max_bs", "cuda_graph_max_bs_"),
                ("bs", "cuda_graph_bs_"),
            ):
                if a.get(name + phase) is not None:
                    put(phase, key, a[name + phase])
        if a.get("cuda_graph_max_seq_len_prefill") is not None:
            put("prefill", "max_seq_len", a["cuda_graph_max_seq_len_prefill"])
        if a.get("cuda_graph_prefill_max_context") is not None:
            put("prefill", "max_context_size", a["cuda_graph_prefill_max_context"])
        explicit = a.get("cuda_graph_config")
        for phase, settings in explicit.items() if isinstance(explicit, dict) else ():
            if isinstance(settings, dict) and phase in config:
                for key, value in settings.items():
                    put(phase, key, value)
        a["cuda_graph_config"] = config
        if ("prefill", "backend") in locked or config["prefill"]["backend"] != "breakable":
            return
        if a["pp_size"] > 1:
            config["prefill"]["backend"] = "disabled"
            self.info.append(
                "Disabling breakable prefill CUDA graph by default for pipeline parallelism. "
                "Set --cuda-graph-backend-prefill=breakable to opt in."
            )
            return
        reason = None
        if a["moe_a2a_backend"] not in ("none", "deepep", "megamoe", "flashinfer"):
            reason = "unvalidated a2a backend"
        elif self.s.model.multimodal:
            reason = "multimodal model"
        if reason is not None:
            self.warn(W_BREAKABLE_INCOMPATIBLE.format(name=reason))
            config["prefill"]["backend"] = "disabled"

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
                a["cuda_graph_max_bs"],
                spec=a["speculative_algorithm"] is not None,
                append_max=self.r.piecewise_default_on,  # 0.5.9 does not append the max
                padding=not a["disable_cuda_graph_padding"],
            )
        if a["piecewise_cuda_graph_max_tokens"] is None:
            size = a["chunked_prefill_size"]
            a["piecewise_cuda_graph_max_tokens"] = size if size and size > 0 else 4096
        if a["piecewise_cuda_graph_tokens"] is None:
            a["piecewise_cuda_graph_tokens"] = piecewise_token_sizes(a["piecewise_cuda_graph_max_tokens"])
        if a["mem_fraction_static"] is None:
            fraction = self.auto_mem_fraction(gpu_mem)
            vision = self.s.model.vision
            if self.s.model.multimodal and vision is not None:  # `adjust_mem_fraction_for_vlm`
                fraction = adjust_mem_fraction_for_vlm(fraction, vision.num_layers, vision.hidden_size)
            a["mem_fraction_static"] = fraction

    def auto_mem_fraction(self, gpu_mem: float) -> float:
        """`_handle_gpu_memory_settings`' estimate; 0.5.9 counts piecewise graphs only when
        enabled and reserves 2 GiB (0.5.10: 4 GiB) for an EAGLE draft."""
        a = self.a
        bs = int(a["cuda_graph_max_bs"])
        reserved: float = (
            512 + max(a["chunked_prefill_size"], 2048) * 1.5 + bs * 2 + a["tp_size"] * a["pp_size"] / 8 * 1024
        )
        if a["enable_dp_attention"]:
            reserved += bs * a["dp_size"] * 3
            if bs > 300:
                reserved += bs * a["dp_size"] * 1.5
        piecewise_on = (
            bool(a.get("enable_piecewise_cuda_graph"))
            if not self.r.piecewise_default_on
            else not a["disable_piecewise_cuda_graph"]
        )
        if piecewise_on:
            reserved += len(a["piecewise_cuda_graph_tokens"]) * 8
        if gpu_mem > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        algorithm = a["speculative_algorithm"]
        if algorithm == "STANDALONE":
            reserved += 6 * 1024
        elif algorithm is not None and algorithm != "NGRAM":
            reserved += 4 * 1024 if self.r.piecewise_default_on else 2 * 1024
        return round((gpu_mem - reserved) / gpu_mem, 3)

    def gpu_memory_settings_nested(self) -> None:
        """0.5.23 `arg_groups/memory_hook.py` `handle_gpu_memory_settings`: the memory tiers (a
        new 20-35 GiB row: 4096 and 48/160), the decode max batch capped by an explicit
        `--max-running-requests`, both phases' capture lists, and `mem_fraction_static` with
        `reserve_for_graph_mb` (no speculative-decoding reserve any more)."""
        a = self.a
        gpu_mem = float(self.s.gpu.memory_mib)
        config = a["cuda_graph_config"]
        decode, prefill = config["decode"], config["prefill"]
        decode_default = decode["max_bs"] is None
        chunked, max_bs = memory_tier_0_5_23(gpu_mem, a["tp_size"])
        if a["chunked_prefill_size"] is None:
            a["chunked_prefill_size"] = chunked
        if decode["max_bs"] is None:
            decode["max_bs"] = max_bs
        mrr = a["max_running_requests"]
        if decode_default and mrr is not None and decode["max_bs"] > mrr:
            decode["max_bs"] = mrr
        if decode["bs"] is None:
            decode["bs"] = decode_cuda_graph_batch_sizes(
                decode["max_bs"],
                spec=a["speculative_algorithm"] is not None,
                padding=not a["disable_cuda_graph_padding"],
            )
        else:
            decode["max_bs"] = max(decode["bs"])
        if prefill["max_bs"] is None:
            tokens: int = a["chunked_prefill_size"]
            if a["max_total_tokens"] is not None:
                tokens = min(tokens, a["max_total_tokens"])
            if "llama-2" in str(a["model_path"]).lower():
                tokens = min(tokens, 4096)
            prefill["max_bs"] = tokens
        if prefill["bs"] is None:
            prefill["bs"] = prefill_cuda_graph_batch_sizes(prefill["max_bs"])
        if a["mem_fraction_static"] is None:
            cps = a["chunked_prefill_size"]
            activation = max(cps, 2048) if cps > 0 else max(a["max_prefill_tokens"], 2048)
            reserved: float = 512 + activation * 1.5 + a["tp_size"] * a["pp_size"] / 8 * 1024
            if a["disaggregation_mode"] != "prefill" and decode["backend"] != "disabled":
                reserved += decode["max_bs"] * 2
            if a["enable_dp_attention"] and a["disaggregation_mode"] != "prefill":
                reserved += decode["max_bs"] * a["dp_size"] * 3
                if decode["max_bs"] > 300:
                    reserved += decode["max_bs"] * a["dp_size"] * 1.5
            if a["disaggregation_mode"] != "decode" and prefill["backend"] != "disabled":
                reserved += len(prefill["bs"]) * 8
            if gpu_mem > 60 * 1024:
                reserved = max(reserved, 10 * 1024)
            fraction = round((gpu_mem - reserved) / gpu_mem, 3)
            vision = self.s.model.vision
            if (
                self.s.model.multimodal and vision is not None
            ):  # `memory_hook.py` `adjust_mem_fraction_for_vlm`
                fraction = adjust_mem_fraction_for_vlm(fraction, vision.num_layers, vision.hidden_size)
            a["mem_fraction_static"] = fraction

    def model_specific(self) -> None:
        """§3.4 #8/#9: FlashInfer AllReduce fusion is auto-enabled on SM90/SM10X only; a hybrid
        model of `RADIX_CACHE_ARCHITECTURES` goes through `_handle_mamba_radix_cache` first
        (`hybrid.py`), which may refuse the launch line; on 0.5.23 through
        `_mamba_radix_cache_resolution`, which resolves the strategy silently."""
        a = self.a
        gpu = self.s.gpu
        arch = self.s.model.architecture
        if (
            self.s.model.hybrid is not None
            and arch in RADIX_CACHE_ARCHITECTURES
            and not self.r.deferred_resolution
        ):
            for text in handle_mamba_radix_cache(a, arch, self.r):
                self.warn(text)
        elif self.s.model.hybrid is not None and self.r.mamba_configurator:
            resolve_mamba_radix_cache_0_5_23(a, arch)
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
            and not self.r.nested_graph_config  # 0.5.23 resolves the fusion backend instead: not modelled
        ):
            a["enable_flashinfer_allreduce_fusion"] = True
            self.info.append(f"Auto-enabling FlashInfer AllReduce Fusion on SM90/SM10X for {arch}")
        if a.get("enforce_disable_flashinfer_allreduce_fusion"):
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
        if self.r.deferred_resolution:
            # 0.5.23 `arg_groups/speculative_hook.py` `_handle_eagle_family`: spec v2 is the
            # default, the overlap scheduler stays on, and the texts changed.
            if a["disable_overlap_schedule"]:
                self.warn(W_SPEC_V2_SYNC)
            if a["enable_mixed_chunk"]:
                a["enable_mixed_chunk"] = False
                self.warn(W_SPEC_MIXED_0_5_23.format(algorithm=algorithm))
        else:
            spec_v2 = self.env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes")
            if not spec_v2 or algorithm not in ("EAGLE", "EAGLE3", "STANDALONE"):
                a["disable_overlap_schedule"] = True
                self.warn(W_SPEC_OVERLAP)
            else:
                a["disable_overlap_schedule"] = False
                self.warn(W_SPEC_V2_OVERLAP)
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
            and not self.r.nested_graph_config  # 0.5.23 decides per phase: not modelled
            and (
                not a.get("enable_piecewise_cuda_graph")
                if not self.r.piecewise_default_on
                else a.get("disable_piecewise_cuda_graph")
            )
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
        if a.get("enable_nan_detection"):
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
    try:
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
    except ServerArgsRefusedError as refusal:
        return PostInit(
            server_args=run.a,
            warnings=[*parsed.warnings, *run.warnings],
            info=run.info,
            requested=set(parsed.requested),
            refused=str(refusal),
        )
    result = run.a
    diff = {name: value for name, value in result.items() if parsed.values.get(name) != value}
    if run.r.deferred_resolution:  # resolve_once runs after prepare_server_args configured logging
        bare, logged = list(parsed.warnings), [*run.warnings, *run.logged]
    else:
        bare, logged = [*parsed.warnings, *run.warnings], run.logged
    return PostInit(
        server_args=result,
        warnings=bare,
        logged_warnings=logged,
        info=run.info,
        implied=diff,
        requested=set(parsed.requested),
    )


def render_server_args(server_args: Mapping[str, Any]) -> str:
    """`ServerArgs(model_path='...', ...)`: the dataclass repr, fields in the given order."""
    return "ServerArgs(" + ", ".join(f"{name}={value!r}" for name, value in server_args.items()) + ")"


HIDDEN_FIELDS = ("watermark_key", "watermark_key_b", "watermark_config")
"""0.5.23 `ServerArgs.__repr__` leaves these out."""


def resolved_dict(server_args: Mapping[str, Any]) -> dict[str, Any]:
    """0.5.23 `ServerArgs.resolved_dict` (what `_server_args_for_logging` prints): every field,
    nested records as dicts, and `enable_dp_attention` reporting whether attention DP is wider
    than one (`attn_dp_size > 1`). `redact_watermark_secrets` leaves unset watermark fields as
    they are; the twin never sets them."""
    resolved = {name: copy.deepcopy(value) for name, value in server_args.items()}
    if "enable_dp_attention" in resolved:
        resolved["enable_dp_attention"] = int(server_args.get("attn_dp_size") or 1) > 1
    return resolved


def server_args_line(server_args: Mapping[str, Any], version: str) -> str:
    """The `server_args=` startup line of `version` (without the `[time] ` prefix)."""
    if release(version).server_args_dict:
        return f"server_args={resolved_dict(server_args)!r}"
    return "server_args=" + render_server_args(server_args)
