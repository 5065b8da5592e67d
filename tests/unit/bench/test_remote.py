"""Remote bench_serving: the exact command it renders, what the table refuses, and how its output
(printed block + JSON line) becomes the same result type as the built-in generator's."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.bench.loadgen import LoadError, LoadSpec
from bot.bench.remote import bench_serving_params, parse_remote, resolve_command, run_remote
from bot.bench.run import BenchPlan, run_plan
from bot.config.schema import BenchProfile, BenchServingCommand
from bot.target.privileged import COMMANDS, ParamError, render

OUTPUT = "/tmp/flagbot-bench-" + "0123456789abcdef" * 2 + ".jsonl"
SPEC = LoadSpec(
    base_url="http://10.0.0.2:30000", input_len=1024, output_len=256, num_requests=128, concurrency=64, seed=3
)


def test_the_rendered_command_is_bench_servings_own_with_fixed_lengths() -> None:
    params = bench_serving_params(
        SPEC, BenchServingCommand(), base_url="http://10.0.0.2:30000/", output_file=OUTPUT
    )
    argv = render("bench-serving", **params).argv
    assert argv[:4] == ["env", "/usr/bin/python3", "-m", "sglang.bench_serving"]
    pairs = dict(zip(argv[4::2], argv[5::2], strict=False))
    assert pairs["--backend"] == "sglang-oai"
    assert pairs["--base-url"] == "http://10.0.0.2:30000"
    assert pairs["--dataset-name"] == "random-ids"
    assert pairs["--random-input-len"] == "1024"
    assert pairs["--random-output-len"] == "256"
    assert pairs["--random-range-ratio"] == "1.0"
    assert pairs["--num-prompts"] == "128"
    assert pairs["--request-rate"] == "inf"
    assert pairs["--max-concurrency"] == "64"
    assert pairs["--seed"] == "3"
    assert pairs["--warmup-requests"] == "2"
    assert pairs["--output-file"] == OUTPUT
    assert argv[-1] == "--output-details"
    assert "--model" not in argv
    assert "--tokenizer" not in argv
    assert not COMMANDS["bench-serving"].privileged


def test_chat_rate_model_tokenizer_and_another_interpreter() -> None:
    spec = LoadSpec(
        base_url="x",
        endpoint="chat",
        num_requests=48,
        concurrency=None,
        request_rate=3.0,
        model="/models/Qwen3-8B",
    )
    command = BenchServingCommand(
        python="/opt/sglang/bin/python", module="sglang.benchmark.serving", tokenizer="/models/tok"
    )
    shell = render(
        "bench-serving", **bench_serving_params(spec, command, base_url="http://h:30000", output_file=OUTPUT)
    ).shell
    words = shlex.split(shell)
    assert words[:4] == ["env", "/opt/sglang/bin/python", "-m", "sglang.benchmark.serving"]
    assert "sglang-oai-chat" in words
    assert words[words.index("--request-rate") + 1] == "3.0"
    assert "--max-concurrency" not in words
    assert words[words.index("--model") + 1] == "/models/Qwen3-8B"
    assert words[words.index("--tokenizer") + 1] == "/models/tok"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"bench_output": "/tmp/../etc/passwd"}, "bench_output"),
        ({"bench_output": "/home/ops/x.jsonl"}, "bench_output"),
        ({"base_url": "http://h:1/; rm -rf /"}, "base_url"),
        ({"base_url": "file:///etc/passwd"}, "base_url"),
        ({"python": "/usr/bin/bash"}, "python"),
        ({"python": "python3"}, "python"),
        ({"bench_module": "os"}, "not one of"),
        ({"num_prompts": 0}, "num_prompts"),
        ({"num_prompts": True}, "num_prompts"),
        ({"request_rate": -1}, "request_rate"),
        ({"bench_model": "--help"}, "bench_model"),
    ],
)
def test_the_table_refuses_values_outside_their_type(change: dict[str, Any], says: str) -> None:
    params = bench_serving_params(SPEC, BenchServingCommand(), base_url="http://h:30000", output_file=OUTPUT)
    with pytest.raises(ParamError, match=says):
        render("bench-serving", **{**params, **change})


def test_a_duration_profile_cannot_run_through_bench_serving() -> None:
    with pytest.raises(LoadError, match="num_requests"):
        bench_serving_params(
            LoadSpec(base_url="x", num_requests=None, duration_s=60),
            BenchServingCommand(),
            base_url="http://h",
            output_file=OUTPUT,
        )


def test_the_config_refuses_unsafe_interpreter_paths() -> None:
    for bad in ("python3", "/opt/../bin/python", "/opt/x y/python"):
        with pytest.raises(ValueError, match="absolute path"):
            BenchServingCommand(python=bad)


BLOCK = (Path(__file__).parents[2] / "fixtures/corpus/sglang-bench/001.log").read_text()


def jsonl_line(**extra: Any) -> str:
    line = {
        "tag": None, "backend": "sglang", "dataset_name": "random-ids", "request_rate": float("inf"),
        "max_concurrency": 120, "server_info": {"huge": "dump"}, "duration": 125.8412, "completed": 118,
        "total_output_tokens": 245760, "output_throughput": 1953.0123, "median_ttft_ms": 13597.591,
        "errors": ["", "Traceback (most recent call last):\n  File x\nKeyError: 'choices'", "", "HTTP 500: boom"],
        "generated_texts": ["a", "b"], "itls": [[0.1]], **extra,
    }  # fmt: skip
    return "noise\n" + json.dumps(line) + "\n"  # Python's json writes Infinity, as bench_serving does


def test_the_json_line_wins_the_block_fills_in_and_failures_are_grouped() -> None:
    metrics = parse_remote(BLOCK, jsonl_line(), num_prompts=120)
    assert metrics["output_throughput"] == pytest.approx(1953.0123)  # the JSON's precision
    assert metrics["max_itl_ms"] == pytest.approx(13528.11)  # printed only
    assert metrics["accept_length"] == pytest.approx(1.54)
    assert metrics["request_rate"] == "inf"
    assert metrics["completed"] == 118
    assert metrics["failed"] == 2
    assert metrics["errors"] == {"KeyError: 'choices'": 1, "HTTP 500: boom": 1}
    assert "server_info" not in metrics
    assert "generated_texts" not in metrics
    json.dumps(metrics, allow_nan=False)


def test_the_nested_objects_of_0_5_23s_json_line_become_flat_metrics() -> None:
    line = jsonl_line(
        goodput_slos_ms={"ttft": 2000.0},
        request_goodput=4.9,
        slo_attainment=0.913,
        slo_attainment_by_metric={"ttft": 0.951},
        cache_report={
            "total_prompt_tokens": 524288,
            "total_cached_tokens": 262144,
            "cache_hit_rate_pct": 50.0,
            "device_cached_tokens": None,
        },
    )
    metrics = parse_remote(BLOCK, line, num_prompts=120)
    assert metrics["total_cached_tokens"] == 262144
    assert metrics["cache_hit_rate_pct"] == 50.0
    assert metrics["device_cached_tokens"] is None
    assert metrics["goodput_slos_ms_ttft"] == 2000.0
    assert metrics["slo_attainment_by_metric_ttft"] == 0.951
    assert metrics["request_goodput"] == 4.9
    assert not any(isinstance(value, dict) for key, value in metrics.items() if key != "errors")


def test_a_printed_block_alone_is_enough() -> None:
    metrics = parse_remote(BLOCK, "", num_prompts=120)
    assert metrics["completed"] == 120
    assert metrics["failed"] == 0
    assert metrics["output_throughput"] == pytest.approx(1953.01)


def test_no_block_and_no_line_is_an_error() -> None:
    with pytest.raises(LoadError, match="no JSON line"):
        parse_remote("Traceback ...", "", num_prompts=1)


@dataclass
class Ran:
    exit_status: int = 0
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class FakeNode:
    """Answers table commands from a script, recording each call."""

    answers: dict[str, Ran]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def run(
        self,
        command: str,
        /,
        *,
        input: bytes | str | None = None,
        timeout: float | None = None,
        check: bool = True,
        **params: object,
    ) -> Ran:
        render(command, **params)  # every call must be a valid table command
        self.calls.append((command, {"timeout": timeout, **params}))
        return self.answers[command]


async def test_run_remote_reads_the_output_file_and_removes_it() -> None:
    node = FakeNode({
        "bench-serving": Ran(stdout=BLOCK.encode()),
        "read-bench-output": Ran(stdout=jsonl_line().encode()),
        "remove-bench-output": Ran(),
    })  # fmt: skip
    result = await run_remote(node, SPEC, command=BenchServingCommand(), base_url="http://10.0.0.2:30000")
    assert [c for c, _ in node.calls] == ["bench-serving", "read-bench-output", "remove-bench-output"]
    outputs = {params["bench_output"] for _, params in node.calls}
    assert len(outputs) == 1
    assert node.calls[0][1]["timeout"] == SPEC.level_timeout_s
    assert result.source == "bench_serving"
    assert result.metrics["completed"] == 118
    assert not result.client_bound
    assert "not measured" in result.health.warnings[0]


async def test_run_remote_failures() -> None:
    crashed = FakeNode(
        {
            "bench-serving": Ran(1, b"", b"Traceback\nValueError: Warmup failed - boom"),
            "remove-bench-output": Ran(),
        }
    )
    with pytest.raises(LoadError, match="Warmup failed"):
        await run_remote(crashed, SPEC, command=BenchServingCommand(), base_url="http://h:1")
    assert crashed.calls[-1][0] == "remove-bench-output"

    stderr = b"UserWarning: All requests failed. This is likely due to a misconfiguration\nIndexError: index -1 is out of bounds"
    none_ok = FakeNode({"bench-serving": Ran(1, b"", stderr), "remove-bench-output": Ran()})
    result = await run_remote(none_ok, SPEC, command=BenchServingCommand(), base_url="http://h:1")
    assert result.metrics["completed"] == 0
    assert result.metrics["failed"] == 128


@pytest.mark.parametrize(
    ("host_says", "fallback", "module"),
    [
        (Ran(stdout=b"0.5.23\n"), None, "sglang.benchmark.serving"),
        (Ran(stdout=b"some import noise\n0.5.15\n"), "0.5.9", "sglang.benchmark.serving"),
        (Ran(stdout=b"0.5.10\n"), "0.5.23", "sglang.bench_serving"),  # the host wins over the config
        (Ran(stdout=b"0.5.9\n"), None, "sglang.bench_serving"),
        (
            Ran(exit_status=1, stderr=b"ModuleNotFoundError: No module named 'sglang'"),
            "0.5.23",
            "sglang.benchmark.serving",
        ),
        (Ran(stdout=b"not a version\n"), None, "sglang.bench_serving"),
    ],
)
async def test_without_a_configured_module_the_hosts_release_picks_it(
    host_says: Ran, fallback: str | None, module: str
) -> None:
    node = FakeNode({"sglang-version": host_says})
    command = await resolve_command(
        node, BenchServingCommand(python="/opt/sglang/bin/python"), fallback_version=fallback
    )
    assert command.module == module
    assert node.calls == [("sglang-version", {"timeout": 120, "python": "/opt/sglang/bin/python"})]


async def test_a_configured_module_is_used_as_given_without_asking_the_host() -> None:
    node = FakeNode({})
    command = await resolve_command(
        node, BenchServingCommand(module="sglang.bench_serving"), fallback_version="0.5.23"
    )
    assert command.module == "sglang.bench_serving"
    assert node.calls == []


async def test_a_plan_on_a_0_5_23_host_runs_sglang_benchmark_serving_on_node0() -> None:
    node = FakeNode({
        "sglang-version": Ran(stdout=b"0.5.23\n"),
        "bench-serving": Ran(stdout=BLOCK.encode()),
        "read-bench-output": Ran(stdout=jsonl_line().encode()),
        "remove-bench-output": Ran(),
    })  # fmt: skip
    plan = BenchPlan.build(
        target="t",
        base_url="http://10.0.0.2:30000",
        profile_name="p",
        profile=BenchProfile(concurrency=[4, 8], repeats=1, num_requests=8, backend="bench_serving"),
    )
    await run_plan(plan, node=node)
    ran = [params for command, params in node.calls if command == "bench-serving"]
    assert [params["bench_module"] for params in ran] == ["sglang.benchmark.serving"] * 2
    assert render("bench-serving", **{k: v for k, v in ran[0].items() if k != "timeout"}).argv[:4] == [
        "env",
        "/usr/bin/python3",
        "-m",
        "sglang.benchmark.serving",
    ]
    assert [command for command, _ in node.calls].count("sglang-version") == 1  # asked once per plan
