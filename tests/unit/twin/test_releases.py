"""The twin as SGLang 0.5.9, 0.5.10 and 0.5.23: each release's argparse surface, post-init rules,
startup lines and benchmark module, held to the released sources.

The expected texts below are the sources' own format strings, copied with the file and function
they come from, then filled with the twin's figures: a line the twin prints differently from the
release fails here.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flagbot_lab.twin import install
from flagbot_lab.twin.engine import args, logfmt
from flagbot_lab.twin.engine.field_order import FIELDS
from flagbot_lab.twin.engine.hybrid import adjust_mem_fraction_for_vlm
from flagbot_lab.twin.engine.memory import resolve_max_num_reqs
from flagbot_lab.twin.engine.releases import RELEASES, release
from flagbot_lab.twin.engine.scenario import Scenario, scenario_from_dict
from flagbot_lab.twin.engine.startup import Resolved, dry_run, resolve, resolve_args
from flagbot_lab.twin.schema import SCENARIO_DIR, ScenarioError, compile_scenario

MAMBA_CAP = (
    "max_running_requests is capped to %d by the mamba state cache (max_mamba_cache_size=%d, %d state "
    "slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or "
    "halve the state size with --mamba-ssm-dtype bfloat16."
)
SEED = {"0.5.9": "seed-gb10-0.5.9", "0.5.10": "seed-gb10", "0.5.23": "seed-gb10-0.5.23"}
NODE0 = ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:20000"]


def _scenario(version: str) -> Scenario:
    return scenario_from_dict(compile_scenario(SEED[version]))


def _text_only(version: str) -> Scenario:
    """The seed deployment with a text-only model: 0.5.23 turns prefill CUDA graphs off for a
    multimodal one (`cuda_graph_hook.py`), and these tests are about the graph lines."""
    scenario = _scenario(version)
    return dataclasses.replace(
        scenario, model=dataclasses.replace(scenario.model, multimodal=False, vision=None)
    )


def _tiny(version: str) -> Scenario:
    return dataclasses.replace(scenario_from_dict(compile_scenario("tiny-cpu")), sglang_version=version)


def _start(version: str, *extra: str) -> Resolved:
    scenario = _scenario(version)
    return resolve([*scenario.launch, *extra, *NODE0], scenario, start_seed=1, env={})


def _lines(resolved: Resolved, phase: str | None = None) -> list[str]:
    return [step.message for step in resolved.steps if phase is None or step.phase == phase]


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], version: str) -> str:
    with pytest.raises(SystemExit) as exc:
        args.parse(argv, version)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


# -- the argument surface -------------------------------------------------------------------------


def test_each_release_has_its_own_flag_list() -> None:
    counts = {version: args.catalog(version)["primary_flag_count"] for version in RELEASES}
    assert counts == {"0.5.9": 331, "0.5.10": 354, "0.5.23": 531}
    assert {version: len(args.field_names(version)) for version in RELEASES} == {
        "0.5.9": len(FIELDS["0.5.9"]),
        "0.5.10": 349,
        "0.5.23": len(FIELDS["0.5.23"]),
    }


@pytest.mark.parametrize(
    ("version", "flag", "accepted"),
    [
        ("0.5.9", "--enable-fused-moe-sum-all-reduce", False),  # added in 0.5.10
        ("0.5.10", "--enable-fused-moe-sum-all-reduce", True),
        ("0.5.23", "--enable-fused-moe-sum-all-reduce", True),
        ("0.5.9", "--disable-hicache-numa-detect", True),  # dropped in 0.5.10
        ("0.5.10", "--disable-hicache-numa-detect", False),
        ("0.5.9", "--enable-piecewise-cuda-graph", True),  # 0.5.10 turned it around
        ("0.5.10", "--disable-piecewise-cuda-graph", True),
        ("0.5.23", "--disable-piecewise-cuda-graph", False),  # graph settings are per phase now
        ("0.5.23", "--enable-hicache", True),
        ("0.5.10", "--enable-hicache", False),
    ],
)
def test_argparse_accepts_and_refuses_per_release(
    capsys: pytest.CaptureFixture[str], version: str, flag: str, accepted: bool
) -> None:
    argv = ["--model-path", "/m", flag]
    if accepted:
        assert args.parse(argv, version).requested >= {"model_path"}
    else:
        assert _refused(capsys, argv, version) == f"sglang serve: error: unrecognized arguments: {flag}"


def test_0_5_23_types_and_deprecations(capsys: pytest.CaptureFixture[str]) -> None:
    last = _refused(capsys, ["--model-path", "/m", "--cuda-graph-backend-prefill", "tc_piecewise"], "0.5.23")
    # cuda_graph_config.py parse_cuda_graph_backend_arg
    assert last == (
        "sglang serve: error: argument --cuda-graph-backend-prefill: "
        "tc_piecewise was removed; select breakable, full, or disabled"
    )
    last = _refused(capsys, ["--model-path", "/m", "--cuda-graph-config", '{"verify": {}}'], "0.5.23")
    assert last.endswith("--cuda-graph-config: unknown phase 'verify', expected one of ('decode', 'prefill')")
    parsed = args.parse(["--model-path", "/m", "--disable-cuda-graph"], "0.5.23")
    assert parsed.values["disable_cuda_graph"] is True
    # arg_groups/argparse_actions.py DeprecatedStoreTrueAction.__call__ via print_deprecated_warning
    assert parsed.warnings == [
        "\033[1;33m'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.\033[0m"
    ]
    config = args.parse(["--model-path", "/m", "--cuda-graph-config", '{"decode": {"max_bs": 16}}'], "0.5.23")
    assert config.values["cuda_graph_config"] == {"decode": {"max_bs": 16}}


def test_a_scenario_is_checked_against_its_own_release(tmp_path: Path) -> None:
    text = (SCENARIO_DIR / "seed-gb10-0.5.9.yaml").read_text()
    path = tmp_path / "seed-gb10-0.5.9.yaml"
    path.write_text(text + "  --enable-fused-moe-sum-all-reduce:\n    throughput_factor: 1.01\n")
    with pytest.raises(
        ScenarioError, match=r"--enable-fused-moe-sum-all-reduce is not an SGLang 0\.5\.9 flag"
    ):
        compile_scenario(path)
    path.write_text(text.replace('sglang_version: "0.5.9"', 'sglang_version: "0.5.11"'))
    with pytest.raises(ScenarioError, match="sglang_version"):
        compile_scenario(path)


def test_an_unknown_release_is_refused_by_name() -> None:
    with pytest.raises(
        ValueError, match=r"the twin has no SGLang 0\.5\.11; it models 0\.5\.9, 0\.5\.10, 0\.5\.23"
    ):
        release("0.5.11")


# -- post-init --------------------------------------------------------------------------------------


def test_mem_fraction_static_per_release() -> None:
    """seed-gb10 (GB10: 122573 MiB, TP 2, EAGLE, chunked 8192, decode max bs 256):
    0.5.9 `_handle_gpu_memory_settings`: 512 + 12288 + 512 + 256 = 13568, + 2048 for the EAGLE draft;
    0.5.10: + 4096 for the draft (piecewise is off under speculative decoding);
    0.5.23 `memory_hook.handle_gpu_memory_settings`: no draft reserve, no prefill graphs for a
    multimodal model. The model is SGLang's VLM class on every release, so
    `adjust_mem_fraction_for_vlm` lowers the estimate (0.5.23: `memory_hook.py`)."""
    got = {v: resolve_args([*_scenario(v).launch], _scenario(v), seed=1, env={}) for v in RELEASES}
    assert {v: post.server_args["mem_fraction_static"] for v, post in got.items()} == {
        "0.5.9": adjust_mem_fraction_for_vlm(round((122573 - 13568 - 2048) / 122573, 3), 27, 1152),
        "0.5.10": adjust_mem_fraction_for_vlm(round((122573 - 13568 - 4096) / 122573, 3), 27, 1152),
        "0.5.23": adjust_mem_fraction_for_vlm(round((122573 - 13568) / 122573, 3), 27, 1152),
    }
    text_only = resolve_args([*_text_only("0.5.23").launch], _text_only("0.5.23"), seed=1, env={})
    assert text_only.server_args["mem_fraction_static"] == round((122573 - 13568 - 58 * 8) / 122573, 3)
    assert all(post.server_args["max_running_requests"] == 48 for post in got.values())


def test_0_5_23_nests_the_graph_settings_and_caps_the_decode_batch_by_an_explicit_limit() -> None:
    scenario = _text_only("0.5.23")
    config = resolve_args([*scenario.launch], scenario, seed=1, env={}).server_args["cuda_graph_config"]
    assert list(config) == ["decode", "prefill"]
    assert list(config["decode"]) == [
        "backend", "max_bs", "bs", "tc_compiler", "max_context_size", "full_prefill_max_req",
        "full_prefill_prefix_chunk_tokens", "max_seq_len",
    ]  # fmt: skip
    assert (config["decode"]["backend"], config["decode"]["max_bs"]) == ("full", 256)
    assert config["decode"]["bs"][:12] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]  # the speculative list
    assert (config["prefill"]["backend"], config["prefill"]["max_bs"]) == ("breakable", 8192)
    assert len(config["prefill"]["bs"]) == 58 and config["prefill"]["bs"][-1] == 8192
    capped = resolve_args([*scenario.launch, "--max-running-requests", "32"], scenario, seed=1, env={})
    assert capped.server_args["cuda_graph_config"]["decode"]["max_bs"] == 32
    for version in ("0.5.9", "0.5.10"):
        flat = resolve_args([*_scenario(version).launch], _scenario(version), seed=1, env={}).server_args
        assert flat["cuda_graph_max_bs"] == 256 and "cuda_graph_config" not in flat


def test_piecewise_graphs_are_opt_in_on_0_5_9() -> None:
    scenario = _tiny("0.5.9")
    off = resolve_args([*scenario.launch], scenario, seed=1, env={})
    on = resolve_args([*scenario.launch, "--enable-piecewise-cuda-graph"], scenario, seed=1, env={})
    assert (
        not off.server_args["enable_piecewise_cuda_graph"] and on.server_args["enable_piecewise_cuda_graph"]
    )
    assert on.server_args["mem_fraction_static"] < off.server_args["mem_fraction_static"]
    plain = resolve([*scenario.launch], scenario, start_seed=1, env={})
    assert plain.memory.piecewise_sizes == () and not _lines(plain, "piecewise")
    piecewise = resolve([*scenario.launch, "--enable-piecewise-cuda-graph"], scenario, start_seed=1, env={})
    assert piecewise.memory.piecewise_sizes
    assert _lines(piecewise, "piecewise")[0].startswith("Capture piecewise CUDA graph begin. avail mem=")


@pytest.mark.parametrize(("version", "expected"), [("0.5.9", 8000), ("0.5.10", 2048), ("0.5.23", 8000)])
def test_an_explicit_max_running_requests_is_capped_as_each_release_caps_it(
    version: str, expected: int
) -> None:
    """0.5.9 keeps it; 0.5.10 `_resolve_max_num_reqs` caps it at max(min(estimate, 4096), 2048);
    0.5.23 `kv_cache_configurator.resolve_max_num_reqs` only at token_capacity // 2."""
    scenario = _tiny(version)
    started = resolve([*scenario.launch, "--max-running-requests", "8000"], scenario, start_seed=1, env={})
    assert started.effective["max_running_requests"] == expected
    assert (
        resolve_max_num_reqs(10_000, context_len=40_960, cli_max_running=8000, dp_size=1, version=version)
        == {
            "0.5.9": 8000,
            "0.5.10": 2048,
            "0.5.23": 5000,
        }[version]
    )


def test_0_5_23_logs_its_resolution_warnings_and_the_mamba_cap() -> None:
    started = _start("0.5.23", "--enable-fused-moe-sum-all-reduce", "--max-running-requests", "64")
    assert started.warnings == []  # resolve_once runs after logging is configured: nothing bare
    kv = _lines(started, "kv")
    size = started.memory.max_mamba_cache_size
    assert size is not None
    # extra_buffer with the overlap scheduler on: 3 + 2 state slots per request
    assert started.effective["max_running_requests"] == size // 5 == 25
    # mem_cache/kv_cache_configurator.py KVCacheConfigurator.resolve_max_num_reqs (logging's %d form)
    assert MAMBA_CAP % (size // 5, size, 5) in kv
    bare = _start("0.5.10")
    assert bare.warnings[0].startswith("Max running requests is reset to 48 for speculative decoding.")


# -- the startup lines --------------------------------------------------------------------------------


def test_the_server_args_line_per_release() -> None:
    for version in ("0.5.9", "0.5.10"):
        line = next(m for m in _lines(_start(version), "args") if m.startswith("server_args="))
        assert line.startswith("server_args=ServerArgs(model_path='/shared/models/Qwen3.5-122B-A10B', ")
        assert line.count("=") > len(FIELDS[version])
    # entrypoints/engine.py: logger.info(f"server_args={_server_args_for_logging(server_args)}")
    line = next(m for m in _lines(_start("0.5.23"), "args") if m.startswith("server_args="))
    printed: dict[str, Any] = ast.literal_eval(line.removeprefix("server_args="))
    assert list(printed) == list(args.field_names("0.5.23"))
    assert printed["max_running_requests"] == 48
    assert printed["enable_dp_attention"] is False
    assert printed["cuda_graph_config"]["decode"]["max_bs"] == 256
    assert printed["mem_fraction_static"] == adjust_mem_fraction_for_vlm(0.889, 27, 1152)
    assert (printed["mamba_radix_cache_strategy"], printed["uses_mamba_radix_cache"]) == (
        "extra_buffer",
        True,
    )
    assert dry_run([*_scenario("0.5.23").launch], _scenario("0.5.23")).startswith(
        "server_args={'model_path': "
    )


def test_kv_and_weight_lines_per_release() -> None:
    for version in RELEASES:
        started = _start(version)
        plan = started.memory
        kv = next(m for m in _lines(started, "kv") if m.startswith("KV Cache"))
        if version == "0.5.23":
            # mem_cache/memory_pool.py _finalize_allocation_log (0.5.13+)
            template = "{cache_name} {state}. dtype: {dtype}, #tokens: {num_tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB"
        else:
            # mem_cache/memory_pool.py _finalize_allocation_log (0.5.9, 0.5.10)
            template = "{cache_name} {state}. #tokens: {num_tokens}, K size: {k:.2f} GB, V size: {v:.2f} GB"
        assert kv == template.format(
            cache_name="KV Cache", state="is allocated", dtype="torch.bfloat16",
            num_tokens=plan.max_total_num_tokens, k=plan.k_size_gib, v=plan.v_size_gib,
        )  # fmt: skip
        weights = next(m for m in _lines(started, "weights") if m.startswith("Load weight end."))
        # model_executor/model_runner.py ModelRunner.load_model
        middle = "dtype=torch.bfloat16, " if version == "0.5.9" else "quant=fp8, fmt=e4m3, "
        kind = "Qwen3_5MoeForConditionalGeneration"
        assert weights == (
            f"Load weight end. elapsed={52.0 * 0.1:.2f} s, type={kind}, {middle}"
            f"avail mem={plan.post_model_load_gib:.2f} GB, mem usage={plan.weight_usage_gib:.2f} GB."
        )


def test_0_5_23_capture_lines() -> None:
    scenario = _text_only("0.5.23")
    started = resolve([*scenario.launch, *NODE0], scenario, start_seed=1, env={})
    plan = started.memory
    graphs = [m for m in _lines(started) if m.startswith("Capture ")]
    before = plan.cuda_graph_begin_gib
    prefill_end = before - plan.piecewise_usage_gib
    # model_executor/model_runner_components/cuda_graph_setup.py capture_prefill_graph, then
    # capture_decode_graph (prefill first); speculative/eagle_worker_v2.py for the draft
    assert graphs[0] == (
        f"Capture target prefill CUDA graph begin. backend=breakable, num_tokens={list(plan.piecewise_sizes)}, "
        f"avail mem={before:.2f} GB"
    )
    assert graphs[1].startswith("Capture target prefill CUDA graph end. elapsed=")
    assert graphs[1].endswith(f"mem usage={plan.piecewise_usage_gib:.2f} GB, avail mem={prefill_end:.2f} GB.")
    assert graphs[2] == (
        f"Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4, avail mem={prefill_end:.2f} GB"
    )
    assert graphs[3].startswith(f"Capture target verify CUDA graph end. bs={list(plan.capture_bs)}, elapsed=")
    assert graphs[4].startswith(
        "Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=["
    )
    assert not any("Time elapsed" in m or "piecewise" in m for m in graphs)
    for version in ("0.5.9", "0.5.10"):
        first = next(m for m in _lines(_start(version)) if m.startswith("Capture "))
        assert first.startswith("Capture cuda graph begin. This can take up to several minutes. avail mem=")


@pytest.mark.parametrize(("version", "before", "effective"), [("0.5.10", 48, 26), ("0.5.23", 34, 24)])
def test_the_seed_story_holds_on_both_releases(version: str, before: int, effective: int) -> None:
    """The fused-MoE workspace cuts the effective limit on both releases, the parsed 48 unchanged;
    on 0.5.23 the baseline is already below 48: EAGLE keeps the overlap scheduler, so `auto`
    resolves to `extra_buffer` at 5 state slots per request (docs/twin.md "seed-gb10-0.5.23")."""
    baseline, fused = _start(version), _start(version, "--enable-fused-moe-sum-all-reduce")
    assert baseline.effective["max_running_requests"] == before
    assert fused.server_args["max_running_requests"] == 48
    assert fused.effective["max_running_requests"] == effective


# -- on a node: the shim's version, bench module and prepare_server_args -----------------------------


def _node(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(root / install.NODE_SITE),
        "SGLANG_TWIN_SCENARIO": str(root / install.SCENARIO_FILE),
        "SGLANG_TWIN_RUN_DIR": str(root / "run"),
        "PYTHONNOUSERSITE": "1",
    }
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env=env, cwd=root, timeout=60, check=False
    )


@pytest.mark.parametrize("version", RELEASES)
def test_each_release_installs_its_own_bench_module(tmp_path: Path, version: str) -> None:
    install.install_into(tmp_path, scenario=SEED[version])
    package = tmp_path / install.NODE_SITE / "sglang"
    assert _node(tmp_path, "-c", "import sglang; print(sglang.__version__)").stdout == f"{version}\n"
    assert (package / "bench_serving.py").is_file()
    assert (package / "benchmark" / "serving.py").is_file() is (version == "0.5.23")
    assert (package / "benchmark").is_dir() is (version != "0.5.9")
    new = _node(tmp_path, "-m", "sglang.benchmark.serving", "--help")
    old = _node(tmp_path, "-m", "sglang.bench_serving", "--help")
    assert old.returncode == 0, old.stderr
    if version == "0.5.23":
        assert new.returncode == 0, new.stderr
        assert "Benchmark the online serving throughput." in new.stdout
        # sglang/bench_serving.py (0.5.23): the old path warns on import
        assert (
            "FutureWarning: `sglang.bench_serving` is deprecated and will be removed in a future release; "
            "use `sglang.benchmark.serving` instead (e.g. `python -m sglang.benchmark.serving`)."
        ) in old.stderr
    else:
        assert new.returncode == 1
        assert "No module named" in new.stderr and "sglang.benchmark" in new.stderr
        assert "FutureWarning" not in old.stderr


def test_0_5_23_prepare_server_args_returns_the_raw_input(tmp_path: Path) -> None:
    install.install_into(tmp_path, scenario="seed-gb10-0.5.23")
    code = (
        "from sglang.srt.server_args import prepare_server_args\n"
        "sa = prepare_server_args(['--model-path', '/m', '--tp-size', '2', '--speculative-algorithm', 'EAGLE'])\n"
        "print(sa.max_running_requests, sa.mem_fraction_static, 'watermark_key' in repr(sa))\n"
        "sa.resolve_once()\n"
        "d = sa.resolved_dict()\n"
        "print(d['max_running_requests'], d['mem_fraction_static'] is not None, type(d['cuda_graph_config']).__name__)\n"
    )
    done = _node(tmp_path, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None None False", "48 True dict"]
    assert (
        "] Max running requests is reset to 48 for speculative decoding." in done.stderr
    )  # logged, prefixed


def test_0_5_23_adds_the_state_slots_gained_to_a_hybrid_models_retraction_line() -> None:
    assert [release(v).retract_mamba_gained for v in RELEASES] == [False, False, True]
    text = logfmt.retract(0.0, "", retracted=2, gained=900, old_ratio=0.3, new_ratio=0.81, mamba_gained=2)
    assert text.endswith(
        "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 900, "
        "#mamba_num_gained: 2, #new_token_ratio: 0.3000 -> 0.8100"
    )
