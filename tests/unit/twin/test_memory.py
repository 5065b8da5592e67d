"""The memory model against the reference's worked numbers (§2.2-2.3, §8) and the seeds' truth."""

from __future__ import annotations

from functools import cache

import pytest

from flagbot_lab.twin.engine.memory import GIB, capture_batch_sizes, plan_memory, resolve_max_num_reqs
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import FAILURE_SIGNAL, resolve, resolve_args
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_launch import pair_argv

FUSED_MOE = "--enable-fused-moe-sum-all-reduce"
AR_FUSION = "--enable-flashinfer-allreduce-fusion"


@cache
def _scenario(name: str) -> Scenario:
    return scenario_from_dict(compile_scenario(name))


def _gb10(*extra: str, node_rank: int = 0) -> list[str]:
    return pair_argv(_scenario("seed-gb10").launch, node_rank, *extra)


def test_resolve_max_num_reqs_follows_section_2_3() -> None:
    # unset: min(clamp(tokens/ctx*512, 2048, 4096), tokens // 2)
    assert resolve_max_num_reqs(1528503, context_len=40960, cli_max_running=None, dp_size=1) == 4096
    assert resolve_max_num_reqs(200000, context_len=40960, cli_max_running=None, dp_size=1) == 2500
    assert resolve_max_num_reqs(1000, context_len=40960, cli_max_running=None, dp_size=1) == 500
    # set: min(cli // dp, clamp); a CLI value above the clamp is silently capped
    assert resolve_max_num_reqs(1528503, context_len=40960, cli_max_running=48, dp_size=1) == 48
    assert resolve_max_num_reqs(1528503, context_len=40960, cli_max_running=10000, dp_size=1) == 4096
    assert resolve_max_num_reqs(1528503, context_len=40960, cli_max_running=256, dp_size=8) == 32
    # hybrid: capped by the state cache // ratio (3 with radix cache, 1 without)
    kw = {"context_len": 262144, "cli_max_running": 48, "dp_size": 1}
    assert resolve_max_num_reqs(1830000, mamba_cache_size=79, mamba_ratio=3, **kw) == 26
    assert resolve_max_num_reqs(1830000, mamba_cache_size=171, mamba_ratio=3, **kw) == 48
    assert resolve_max_num_reqs(1830000, mamba_cache_size=79, mamba_ratio=1, **kw) == 48


def test_capture_sizes_are_clipped_to_the_request_pool() -> None:
    assert capture_batch_sizes([1, 2, 4, 8, 12, 16, 24, 32], 26) == (1, 2, 4, 8, 12, 16, 24, 26)
    assert capture_batch_sizes([1, 2, 4, 8], 4) == (1, 2, 4)
    assert capture_batch_sizes([1, 2, 4, 8], 100) == (1, 2, 4, 8)


def test_the_reference_worked_example_of_section_8() -> None:
    """Qwen3-235B-A22B TP8 on H200: 138.03 GB before weights, 54.75 GB weights, 0.893,
    48,128 B per token, 1,528,503 tokens, K/V 34.26 GB each, max_running_requests 4096."""
    scenario = _scenario("h200-tp8")
    post = resolve_args(list(scenario.launch), scenario, seed=1, env={})
    plan = plan_memory(post.server_args, scenario, jitter_gib=0.0)
    assert f"{plan.pre_model_load_gib:.2f}" == "138.03"
    assert f"{plan.weight_usage_gib:.2f}" == "54.75"
    assert f"{plan.post_model_load_gib:.2f}" == "83.28"
    assert plan.mem_fraction_static == 0.893
    assert plan.cell_size_bytes == 48128
    assert plan.max_total_num_tokens == pytest.approx(1528503, abs=100)
    assert f"{plan.k_size_gib:.2f}" == f"{plan.v_size_gib:.2f}" == "34.26"
    assert plan.max_running_requests == 4096
    assert len(plan.capture_bs) == 52
    assert len(plan.piecewise_sizes) == 58
    assert f"{plan.cuda_graph_usage_gib:.2f}" == "1.35"
    assert f"{plan.piecewise_usage_gib:.2f}" == "0.62"
    assert plan.available_gpu_mem_gib == pytest.approx(11.93, abs=0.1)
    assert plan.pool_end_gib == pytest.approx(14.08, abs=0.1)


def test_rest_memory_is_sglangs_formula() -> None:
    scenario = _scenario("h200-tp8")
    post = resolve_args(list(scenario.launch), scenario, seed=1, env={})
    plan = plan_memory(post.server_args, scenario, jitter_gib=0.0)
    rest = plan.post_model_load_gib - plan.pre_model_load_gib * (1 - plan.mem_fraction_static)
    assert plan.rest_memory_gib == pytest.approx(rest)
    assert plan.profiled_tokens == int(rest * GIB) // plan.cell_size_bytes


def test_mem_fraction_changes_tokens_linearly() -> None:
    scenario = _scenario("h200-tp8")
    tokens = []
    for mfs in ("0.80", "0.85", "0.90"):
        post = resolve_args([*scenario.launch, "--mem-fraction-static", mfs], scenario, seed=1, env={})
        tokens.append(plan_memory(post.server_args, scenario, jitter_gib=0.0).max_total_num_tokens)
    assert tokens[2] - tokens[1] == pytest.approx(tokens[1] - tokens[0], abs=2)
    assert tokens[0] < tokens[1] < tokens[2]


def test_seed_gb10_hybrid_cell_counts_only_full_attention_layers() -> None:
    scenario = _scenario("seed-gb10")
    plan = resolve(_gb10(), scenario, start_seed=0).memory
    assert plan.cell_size_bytes == 1 * (256 + 256) * 12 * 2  # one KV head per rank at TP 2
    assert plan.weight_usage_gib == pytest.approx(59.2)
    assert plan.mamba_ratio == 4  # extra_buffer, overlap off (spec v1): 3 + 1


@pytest.mark.parametrize(
    ("extra", "effective"),
    [((), 48), ((FUSED_MOE,), 26), ((AR_FUSION,), 48), ((FUSED_MOE, AR_FUSION), 26)],
)
def test_seed_gb10_effective_max_running_requests(extra: tuple[str, ...], effective: int) -> None:
    resolved = resolve(_gb10(*extra), _scenario("seed-gb10"), start_seed=11)
    assert resolved.server_args["max_running_requests"] == 48  # parsed: always 48
    assert resolved.effective["max_running_requests"] == effective
    assert resolved.failure is None


def test_seed_gb10_nominal_state_cache_sizes() -> None:
    scenario = _scenario("seed-gb10")
    base = resolve_args(_gb10(), scenario, seed=1, env={}).server_args
    fused = resolve_args(_gb10(FUSED_MOE), scenario, seed=1, env={}).server_args
    base_plan = plan_memory(base, scenario, jitter_gib=0.0)
    fused_plan = plan_memory(fused, scenario, jitter_gib=0.0)
    # the speculative reservation: 52.5 MiB x 48 requests x 4 draft tokens = 9.84 GiB
    assert base_plan.speculative_reservation_gib == pytest.approx(52.5 * 48 * 4 / 1024)
    assert fused_plan.speculative_reservation_gib == pytest.approx(52.5 * 48 * 4 / 1024)
    assert (base_plan.max_mamba_cache_size, base_plan.max_running_requests) == (192, 48)  # 192 // 4
    assert (fused_plan.max_mamba_cache_size, fused_plan.max_running_requests) == (107, 26)  # 107 // 4


def test_jitter_moves_free_memory_but_never_the_seed_truth() -> None:
    scenario = _scenario("seed-gb10")
    free: set[float] = set()
    for seed in range(60):
        for extra, effective in (
            ((), 48),
            ((FUSED_MOE,), 26),
            ((AR_FUSION,), 48),
            ((FUSED_MOE, AR_FUSION), 26),
        ):
            resolved = resolve(_gb10(*extra), scenario, start_seed=seed)
            assert resolved.effective["max_running_requests"] == effective, (seed, extra)
        free.add(round(resolved.memory.free_at_start_gib, 6))
        assert abs(resolved.memory.jitter_gib) <= scenario.noise.restart_memory_jitter_gib
    assert len(free) > 50


def test_the_worst_case_jitter_keeps_the_margins() -> None:
    scenario = _scenario("seed-gb10")
    half = scenario.noise.restart_memory_jitter_gib
    tokens: dict[int, list[int]] = {48: [], 26: []}
    for extra, effective in (((), 48), ((FUSED_MOE,), 26)):
        post = resolve_args(_gb10(*extra), scenario, seed=1, env={})
        for jitter in (-half, half):
            plan = plan_memory(post.server_args, scenario, jitter_gib=jitter)
            assert plan.max_running_requests == effective
            tokens[effective].append(plan.max_total_num_tokens)
    # the workspace costs KV tokens too (rest shrinks for both caches), but relatively less than
    # max_running_requests loses (22 / 48), so the capacity guard names max_running_requests
    worst = 1 - min(tokens[26]) / max(tokens[48])
    assert 0.4 < worst < 22 / 48


def test_the_fused_moe_workspace_shrinks_what_sizes_the_state_cache() -> None:
    """Taken before the memory profile, the workspace lowers `rest`; the ratio split passes the
    loss on to the state cache and the KV pool alike, and the free memory barely moves."""
    scenario = _scenario("seed-gb10")
    base = resolve(_gb10(), scenario, start_seed=4).memory
    fused = resolve(_gb10(FUSED_MOE), scenario, start_seed=4).memory
    assert base.rest_memory_gib - fused.rest_memory_gib == pytest.approx(9.24)
    assert fused.mamba_state_gib < base.mamba_state_gib
    assert fused.max_total_num_tokens < base.max_total_num_tokens
    assert fused.available_gpu_mem_gib == pytest.approx(base.available_gpu_mem_gib, abs=1.0)


def test_not_enough_memory_is_worded_as_sglang_words_it() -> None:
    resolved = resolve(_gb10("--mem-fraction-static", "0.3"), _scenario("seed-gb10"), start_seed=1)
    assert resolved.failure == (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.3"
    )
    assert (resolved.exit_code, resolved.killed_by) == (None, FAILURE_SIGNAL)  # sigquit path: SIGKILL
    assert resolved.memory.failure_phase == "kv"
    assert resolved.effective["max_running_requests"] == 0


def test_an_oom_fault_fails_the_weight_load_with_pytorchs_message() -> None:
    document = compile_scenario("tiny-cpu")
    document["faults"]["oom_start"] = True
    scenario = scenario_from_dict(document)
    resolved = resolve(list(scenario.launch), scenario, start_seed=1)
    assert resolved.memory.failure_phase == "weights"
    assert resolved.failure is not None
    assert resolved.failure.startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.40 GiB. GPU 0"
    )
    assert (resolved.exit_code, resolved.killed_by) == (None, FAILURE_SIGNAL)  # sigquit path: SIGKILL


def test_weights_that_do_not_fit_are_a_cuda_oom() -> None:
    document = compile_scenario("tiny-cpu")
    document["model"]["weight_gib"] = 40.0
    scenario = scenario_from_dict(document)
    resolved = resolve(list(scenario.launch), scenario, start_seed=1)
    assert resolved.failure is not None and "CUDA out of memory" in resolved.failure


def test_a_too_high_mem_fraction_fails_cuda_graph_capture() -> None:
    scenario = _scenario("h200-tp8")
    resolved = resolve([*scenario.launch, "--mem-fraction-static", "0.995"], scenario, start_seed=1)
    assert resolved.memory.failure_phase == "cuda_graph"
    assert resolved.failure is not None
    assert resolved.failure.startswith("Exception: Capture cuda graph failed: CUDA out of memory.")


def test_max_total_tokens_caps_the_pool_and_warns_when_too_large() -> None:
    scenario = _scenario("tiny-cpu")
    capped = resolve(
        [*scenario.launch, "--max-total-tokens", "100001", "--page-size", "16"], scenario, start_seed=1
    )
    assert capped.memory.max_total_num_tokens == 100000  # capped, then rounded down to the page
    assert capped.memory.max_total_tokens_warning is None
    big = resolve([*scenario.launch, "--max-total-tokens", "99999999"], scenario, start_seed=1)
    assert big.memory.max_total_tokens_warning is not None
    assert big.memory.max_total_tokens_warning.startswith(
        "max_total_tokens=99999999 is larger than the profiled value"
    )


def test_dp_attention_splits_kv_heads_and_requests_per_dp_worker() -> None:
    scenario = _scenario("h200-tp8")
    argv = [*scenario.launch, "--enable-dp-attention", "--dp-size", "8", "--max-running-requests", "256"]
    resolved = resolve(argv, scenario, start_seed=1)
    assert resolved.memory.cell_size_bytes == 4 * 256 * 94 * 2
    assert resolved.effective["max_running_requests"] == 32


def test_used_memory_is_what_nvidia_smi_reports_while_serving() -> None:
    plan = resolve(_gb10(), _scenario("seed-gb10"), start_seed=1).memory
    assert plan.used_mib == round((plan.total_gib - plan.available_gpu_mem_gib) * 1024)
    assert 90_000 < plan.used_mib < 122_573
