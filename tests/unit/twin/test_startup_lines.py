"""Startup lines: the exact 0.5.10 formats of reference §2.4/§8, their order, rank prefixes,
and flagbot's own log parser reading the twin's numbers back."""

from __future__ import annotations

import re
from functools import cache

import pytest

from bot.sglang.log import parse_log_text
from bot.target.snapshot_facts import capacity
from flagbot_lab.twin.engine import logfmt
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import FAILURE_SIGNAL, LogStep, Resolved, resolve
from flagbot_lab.twin.schema import compile_scenario

NOW = 1773089134.0  # a fixed instant; lines render in local time
PREFIX = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?: [A-Z]+\d+)*)\] (.*)\Z")
GB = r"\d+\.\d\d GB"
FORMATS = {
    "dist_begin": r"Init torch distributed begin\.",
    "nccl": r"sglang is using nccl==\d+\.\d+\.\d+",
    "dist_end": rf"Init torch distributed ends\. elapsed=\d+\.\d\d s, mem usage={GB}",
    "weights_begin": rf"Load weight begin\. avail mem={GB}",
    "weights_format": r"Using model weights format \['\*\.safetensors'\]",
    "weights_end": rf"Load weight end\. elapsed=\d+\.\d\d s, type=\w+, (?:quant=\w+, fmt=\w+, )?avail mem={GB}, mem usage={GB}\.",
    "kv_dtype": r"Using KV cache dtype: torch\.bfloat16",
    "kv": rf"KV Cache is allocated\. #tokens: \d+, K size: {GB}, V size: {GB}",
    "pool_end": rf"Memory pool end\. avail mem={GB}",
    "mamba": r"Mamba Cache is allocated\. max_mamba_cache_size: \d+, conv_state size: \d+\.\d\dGB, "
    r"ssm_state size: \d+\.\d\dGB (?:intermediate_ssm_state_cache size: \d+\.\d\dGB "
    r"intermediate_conv_window_cache size: \d+\.\d\dGB )?",
    "graph_begin": rf"Capture cuda graph begin\. This can take up to several minutes\. avail mem={GB}",
    "graph_end": rf"Capture cuda graph end\. Time elapsed: \d+\.\d\d s\. mem usage={GB}\. avail mem={GB}\.",
    "piecewise_off": r"Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
    "piecewise_begin": rf"Capture piecewise CUDA graph begin\. avail mem={GB}",
    "piecewise_end": rf"Capture piecewise CUDA graph end\. Time elapsed: \d+\.\d\d s\. mem usage={GB}\. avail mem={GB}\.",
    "fusion": r"FlashInfer workspace initialized for rank \d+, world_size \d+, backend trtllm",
    "draft_graph": rf"Capture draft (?:extend )?cuda graph (?:begin\. This can take up to several minutes\. avail mem={GB}|end\. Time elapsed: \d+\.\d\d s\. mem usage={GB}\. avail mem={GB}\.)",
    "capacity": r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+), available_gpu_mem=(\d+\.\d\d) GB",
    "args": r"server_args=ServerArgs\(model_path='[^']+', .*\)",
    "template": r"Using default HuggingFace chat template with detected content format: string",
}
TQDM = re.compile(
    r"(?:Loading safetensors checkpoint shards: +\d+% Completed \| \d+/\d+ \[\d\d:\d\d<(?:\d\d:\d\d|\?), (?:\?it/s| ?\d+\.\d\d(?:it/s|s/it))\]"
    r"|(?:Capturing batches \(bs=1 avail_mem=\d+\.\d\d GB\)|Compiling num tokens \(num_tokens=\d+\)|Capturing num tokens \(num_tokens=\d+ avail_mem=\d+\.\d\d GB\)): 100%\|█{10}\| (\d+)/\1 \[\d\d:\d\d<00:00, ?\d+\.\d\d(?:it/s|s/it)\])"
)


@cache
def _scenario(name: str) -> Scenario:
    return scenario_from_dict(compile_scenario(name))


def _resolve(name: str, *extra: str, node_rank: int = 0, seed: int = 1) -> Resolved:
    scenario = _scenario(name)
    argv = list(scenario.launch)
    if scenario.nodes > 1:
        argv += [
            "--nnodes",
            str(scenario.nodes),
            "--node-rank",
            str(node_rank),
            "--dist-init-addr",
            "10.0.0.1:5000",
        ]
    return resolve([*argv, *extra], scenario, start_seed=seed, env={})


def _render(steps: list[LogStep]) -> list[str]:
    now = NOW
    lines = []
    for step in steps:
        now += step.delay_s
        lines.append(step.render(now))
    return lines


def _classify(message: str) -> str:
    for kind, pattern in FORMATS.items():
        if re.fullmatch(pattern, message):
            return kind
    raise AssertionError(f"no reference format matches {message!r}")


def _kinds(resolved: Resolved) -> list[tuple[str, str]]:
    """(kind, ranks) of each prefixed line; every one must match a reference format."""
    found = []
    for text in _render(resolved.steps):
        match = PREFIX.fullmatch(text)
        if match is None:
            assert TQDM.fullmatch(text) or text in resolved.warnings, text
            continue
        found.append((_classify(match.group(3)), match.group(2)))
    return found


def _dedup(kinds: list[tuple[str, str]]) -> list[str]:
    order: list[str] = []
    for kind, _ranks in kinds:
        if not order or order[-1] != kind:
            order.append(kind)
    return order


def test_h200_lines_follow_section_8_in_format_and_order() -> None:
    kinds = _kinds(_resolve("h200-tp8"))
    assert _dedup(kinds) == [
        "args", "template", "dist_begin", "nccl", "dist_end", "weights_begin", "weights_format", "weights_end",
        "kv_dtype", "kv", "pool_end", "graph_begin", "fusion", "graph_end", "piecewise_begin", "piecewise_end",
        "capacity",
    ]  # fmt: skip
    per_rank = [ranks for kind, ranks in kinds if kind == "kv"]
    assert per_rank == [f" TP{i}" for i in range(8)]
    assert [ranks for kind, ranks in kinds if kind == "capacity"] == [" TP0"]
    assert [ranks for kind, ranks in kinds if kind in ("args", "template")] == ["", ""]


def test_seed_gb10_node0_prints_tp0_and_the_capacity_line() -> None:
    resolved = _resolve("seed-gb10")
    kinds = _kinds(resolved)
    assert {ranks for kind, ranks in kinds if kind not in ("args", "template")} == {" TP0"}
    order = _dedup(kinds)
    assert order.index("piecewise_off") > order.index("graph_end")  # EAGLE auto-disables piecewise
    assert "piecewise_begin" not in order and "fusion" not in order
    assert order[-1] == "capacity"
    assert order.index("draft_graph") < order.index("capacity")


def test_seed_gb10_node1_prints_its_own_rank_and_no_capacity_line() -> None:
    kinds = _kinds(_resolve("seed-gb10", node_rank=1))
    assert {ranks for kind, ranks in kinds if kind not in ("args",)} == {" TP1"}
    assert "capacity" not in _dedup(kinds)
    assert "template" not in _dedup(kinds)  # the tokenizer manager runs on node 0 only
    assert "weights_format" not in _dedup(kinds) and "kv_dtype" not in _dedup(kinds)


def test_single_gpu_lines_have_no_rank_prefix() -> None:
    kinds = _kinds(_resolve("tiny-cpu"))
    assert {ranks for _kind, ranks in kinds} == {""}


def test_bare_warnings_come_first_then_the_args_line() -> None:
    resolved = _resolve("seed-gb10")
    lines = _render(resolved.steps)
    assert lines[:2] == [
        "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
        "setting --max-running-requests.",
        "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. You can set "
        "env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ",
    ]
    assert PREFIX.fullmatch(lines[2]) and "] server_args=ServerArgs(" in lines[2]


def test_only_multi_node_starts_wait_for_the_rendezvous() -> None:
    gated = [s for s in _resolve("seed-gb10").steps if s.gate]
    assert [(s.gate, s.message.split(".")[0]) for s in gated] == [
        ("rendezvous", "Init torch distributed ends")
    ]
    assert not any(s.gate for s in _resolve("h200-tp8").steps)


def test_disable_cuda_graph_drops_the_capture_lines() -> None:
    order = _dedup(_kinds(_resolve("h200-tp8", "--disable-cuda-graph")))
    assert "graph_begin" not in order and "graph_end" not in order


@pytest.mark.parametrize(
    ("extra", "mrr"),
    [((), 48), (("--enable-fused-moe-sum-all-reduce",), 26), (("--enable-flashinfer-allreduce-fusion",), 48)],
)
def test_flagbots_parser_reads_the_twins_numbers_back(extra: tuple[str, ...], mrr: int) -> None:
    resolved = _resolve("seed-gb10", *extra)
    report = parse_log_text("\n".join(_render(resolved.steps)) + "\n")
    assert report.server_args == resolved.server_args
    assert report.parsed["max_running_requests"] == 48
    effective = report.effective
    for key in ("max_running_requests", "max_total_num_tokens", "context_len", "chunked_prefill_size"):
        assert effective[key] == resolved.effective[key], key
    assert effective["max_running_requests"] == mrr
    assert effective["available_gpu_mem_gb"] == resolved.effective["available_gpu_mem_gb"]
    assert report.current.kv_cache[0]["tokens"] == resolved.memory.max_total_num_tokens
    assert report.startup_error is None


def test_the_capacity_line_regex_holds_the_models_numbers() -> None:
    resolved = _resolve("h200-tp8")
    capacity = [s for s in resolved.steps if s.phase == "capacity"]
    match = re.fullmatch(FORMATS["capacity"], capacity[0].message)
    assert match is not None
    assert int(match.group(1)) == resolved.memory.max_total_num_tokens
    assert int(match.group(4)) == 4096
    assert match.group(6) == f"{resolved.memory.available_gpu_mem_gib:.2f}"


def test_a_failed_start_ends_with_the_traceback_and_sigquit() -> None:
    resolved = _resolve("seed-gb10", "--mem-fraction-static", "0.3")
    lines = _render(resolved.steps)
    assert lines[-1].endswith("] Received sigquit from a child process. It usually means the child failed.")
    assert "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static." in "\n".join(
        lines
    )
    assert not any("max_total_num_tokens=" in line for line in lines)
    head = next(line for line in lines if "Scheduler hit an exception" in line)
    assert head.endswith(" TP0] Scheduler hit an exception: Traceback (most recent call last):")
    report = parse_log_text("\n".join(lines) + "\n")
    assert report.startup_error is not None and "Not enough memory" in report.startup_error


def test_scaled_elapsed_times_match_the_delays() -> None:
    resolved = _resolve("h200-tp8")
    scale = _scenario("h200-tp8").timings.startup_scale
    end = next(s for s in resolved.steps if s.message.startswith("Load weight end."))
    assert f"elapsed={58.31 * scale:.2f} s" in end.message
    assert resolved.startup_seconds() == pytest.approx(sum(s.delay_s for s in resolved.steps))


def test_tiny_starts_in_about_a_second() -> None:
    resolved = _resolve("tiny-cpu")
    assert 0.5 < resolved.startup_seconds() * _scenario("tiny-cpu").timings.startup_scale < 1.5


# -- logfmt: the lines the runtime prints -------------------------------------------------------


def test_prefixes_and_rank_labels() -> None:
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP3\] x", logfmt.line(NOW, "x", " TP3"))
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] ", logfmt.prefix(NOW + 0.5, ms=True))
    assert logfmt.rank_prefix(0, tp_size=1) == ""
    assert logfmt.rank_prefix(3, tp_size=8, ep_rank=3, ep_size=8) == " TP3 EP3"
    assert logfmt.rank_prefix(0, tp_size=8, dp_rank=0) == " DP0 TP0"
    assert logfmt.rank_prefix(0, tp_size=2, pp_rank=1, pp_size=2) == " PP1 TP0"


def test_uvicorn_lines() -> None:
    started = logfmt.uvicorn_startup(NOW, pid=402113, host="0.0.0.0", port=30000)
    messages = [PREFIX.fullmatch(line).group(3) for line in started]  # type: ignore[union-attr]
    assert messages == [
        "INFO:     Started server process [402113]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ]
    access = logfmt.access(NOW, client="127.0.0.1:53122", method="GET", path="/health", status=200)
    assert access.endswith('] INFO:     127.0.0.1:53122 - "GET /health HTTP/1.1" 200 OK')
    assert (
        logfmt.port_in_use(NOW, host="0.0.0.0", port=30000)
        .split("] ", 1)[1]
        .startswith("ERROR:    [Errno 98]")
    )


def test_ready_shutdown_and_deprecation_lines() -> None:
    assert logfmt.ready(NOW).endswith("] The server is fired up and ready to roll!")
    assert logfmt.sigterm(NOW).endswith(
        "] SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
    )
    assert logfmt.gracefully_exiting(NOW, ["a1"]).endswith(
        "] Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['a1']."
    )
    assert logfmt.get_server_info_deprecated(NOW).endswith(
        "] Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
        "Please use '/server_info' instead."
    )
    assert logfmt.health_during_shutdown(NOW).endswith(
        "] Health check request received during shutdown. Returning 503."
    )


def test_batch_lines_follow_section_2_5() -> None:
    prefill = logfmt.prefill_batch(
        NOW, " TP0", new_seq=1, new_token=6, cached_token=0, token_usage=0.0, running=0, queued=0,
        cuda_graph=True, input_throughput=0.0,
    )  # fmt: skip
    assert prefill.split("] ", 1)[1] == (
        "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, "
        "#queue-req: 0, cuda graph: True, input throughput (token/s): 0.00"
    )
    decode = logfmt.decode_batch(
        NOW, " TP0", running=26, tokens=5000, token_usage=0.01, cuda_graph=True, gen_throughput=1582.4,
        queued=38, accept_len=2.61, accept_rate=0.65, mamba_usage=1.0,
    )  # fmt: skip
    assert decode.split("] ", 1)[1] == (
        "Decode batch, #running-req: 26, #token: 5000, full token usage: 0.01, mamba usage: 1.00, "
        "accept len: 2.61, accept rate: 0.65, cuda graph: True, gen throughput (token/s): 1582.40, #queue-req: 38"
    )


# -- flag effects that reach the whole start -----------------------------------------------------


def test_throughput_factors_compose_per_active_rule() -> None:
    assert _resolve("h200-tp8").throughput_factor == pytest.approx(1.06)  # auto-enabled fusion
    both = _resolve("h200-tp8", "--enable-fused-moe-sum-all-reduce")
    assert both.throughput_factor == pytest.approx(1.06 * 1.02 * 0.985)
    assert both.active_rules == [
        "--enable-flashinfer-allreduce-fusion",
        "--enable-fused-moe-sum-all-reduce",
        "--enable-flashinfer-allreduce-fusion + --enable-fused-moe-sum-all-reduce",
    ]
    off = _resolve("h200-tp8", "--enforce-disable-flashinfer-allreduce-fusion")
    assert off.throughput_factor == pytest.approx(1.0)


def test_seed_gb10_flags_stay_within_noise() -> None:
    run_cv = _scenario("seed-gb10").noise.run_cv
    both = _resolve("seed-gb10", "--enable-fused-moe-sum-all-reduce", "--enable-flashinfer-allreduce-fusion")
    assert abs(both.throughput_factor - 1.0) < run_cv
    assert _resolve("seed-gb10", "--enable-flashinfer-allreduce-fusion").throughput_factor == 1.0


def test_a_crashing_flag_fails_the_start_after_capture() -> None:
    document = compile_scenario("tiny-cpu")
    document["flags"] = [
        {
            "when": [{"flag": "--enable-torch-compile", "field": "enable_torch_compile"}],
            "requires": {"min": [9, 0], "max": [10, 99]},
            "side_effects": {"crash": "RuntimeError: torch.compile failed on this GPU"},
        }
    ]
    scenario = scenario_from_dict(document)
    resolved = resolve([*scenario.launch, "--enable-torch-compile"], scenario, start_seed=1, env={})
    assert resolved.failure == "RuntimeError: torch.compile failed on this GPU"
    assert (resolved.exit_code, resolved.killed_by) == (None, FAILURE_SIGNAL)  # sigquit path: SIGKILL
    lines = _render(resolved.steps)
    assert lines[-2] == "RuntimeError: torch.compile failed on this GPU"
    assert any("Capture cuda graph end." in line for line in lines)
    assert not any("max_total_num_tokens=" in line for line in lines)


def test_server_info_and_model_info_shapes() -> None:
    resolved = _resolve("seed-gb10", "--enable-fused-moe-sum-all-reduce")
    info = resolved.server_info(last_gen_throughput=12.5)
    assert info["max_running_requests"] == 48  # the post-init value, not the effective one
    assert info["status"] == "ready" and info["version"] == "0.5.10"
    assert info["max_total_num_tokens"] == resolved.memory.max_total_num_tokens
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] == 26
    assert state["max_mamba_cache_size"] == resolved.memory.max_mamba_cache_size
    assert state["last_gen_throughput"] == 12.5
    assert set(state["memory_usage"]) == {"weight", "kvcache", "token_capacity", "graph"}
    model = resolved.model_info()
    assert model["architectures"] == ["Qwen3_5MoeForConditionalGeneration"]
    assert model["model_path"] == "/shared/models/Qwen3.5-122B-A10B"


def test_a_flag_whose_effect_hangs_the_warmup_marks_only_that_start() -> None:
    """seed-gb10's `--enable-nccl-nvls` rule: the start comes up (no failure) but its warmup never ends."""
    assert _resolve("seed-gb10").hang_during_warmup is False
    hung = _resolve("seed-gb10", "--enable-nccl-nvls")
    assert hung.hang_during_warmup is True and hung.failure is None


def test_a_hybrid_model_prints_its_state_cache_before_the_kv_pool_and_flagbot_reads_it() -> None:
    """memory_pool.py `MambaPool.__init__` (0.5.9, 0.5.10, 0.5.23): one line per rank, before the
    KV pool; seed-gb10's speculative start prints the intermediate caches too."""
    resolved = _resolve("seed-gb10")
    order = _dedup(_kinds(resolved))
    assert order.index("mamba") < order.index("kv")
    report = parse_log_text("\n".join(_render(resolved.steps)) + "\n")
    state = report.current.state_cache
    assert state is not None and state["rank"] == "TP0"
    assert state["max_mamba_cache_size"] == resolved.memory.max_mamba_cache_size
    assert "intermediate_ssm_state_cache_gb" in state
    assert report.current.unparsed == {}
    assert "mamba" not in _dedup(_kinds(_resolve("h200-tp8")))  # not a hybrid model


def test_a_graph_capture_oom_is_a_chained_traceback_ending_in_the_capture_failure() -> None:
    """cuda_graph_runner.py `CudaGraphRunner.__init__` raises `Exception("Capture cuda graph
    failed: ...")` while handling torch's OutOfMemoryError: the chain's last exception is the headline."""
    resolved = _resolve("h200-tp8", "--mem-fraction-static", "0.995")
    lines = _render(resolved.steps)
    assert "During handling of the above exception, another exception occurred:" in lines
    report = parse_log_text("\n".join(lines) + "\n")
    chain = report.current.startup_error_chain
    assert [entry["text"].split(":")[0] for entry in chain] == ["torch.OutOfMemoryError", "Exception"]
    assert report.startup_error == resolved.failure
    assert report.current.warnings_count == 0  # the "Possible solutions" lines belong to the error


def test_the_seeds_fused_start_is_explained_by_the_state_cache() -> None:
    """seed-gb10 with the fused all-reduce flag: parsed 48, effective 26; the twin's Mamba line lets
    observe say why (`26 = max_mamba_cache_size N // ratio: the hybrid state cache, not KV memory`)."""
    resolved = _resolve("seed-gb10", "--enable-fused-moe-sum-all-reduce")
    memory = resolved.memory
    assert memory.max_running_requests == 26 and memory.max_mamba_cache_size is not None
    report = parse_log_text("\n".join(_render(resolved.steps)) + "\n")
    cap = capacity(report, None, _scenario("seed-gb10").sglang_version)
    assert (cap["parsed_max_running_requests"], cap["effective_max_running_requests"]) == (48, 26)
    assert cap["capped_by_state_cache"] is not None
    assert cap["capped_by_state_cache"].startswith(
        f"26 = max_mamba_cache_size {memory.max_mamba_cache_size} // {memory.mamba_ratio}: "
        "the hybrid state cache, not KV memory"
    )
