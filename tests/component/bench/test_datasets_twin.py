"""The load generator's datasets and load shapes against a real twin process: the shared-prefix
dataset under open-loop arrivals with goodput, and a JSONL prompt file, checked against what
the twin recorded (its ground truth). Bounds are wide: a shared, loaded machine runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.bench.datasets import DatasetSpec
from bot.bench.loadgen import LoadError, LoadWorkers, run_load
from bot.bench.metrics import ServiceLevels
from bot.config.schema import SharedPrefixShape
from tests.component.bench.conftest import OUTPUT_LEN, measured_truth, slowed, twin_config
from tests.component.bench.test_loadgen_twin import spec
from tests.component.test_cli import flagbot
from tests.support.twin_process import Twin, TwinFactory

SHAPE = SharedPrefixShape(
    num_groups=2, prompts_per_group=4, system_prompt_len=300, question_len=20, output_len=OUTPUT_LEN
)


def test_shared_prefix_at_a_request_rate_with_goodput(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    result = run_load(
        spec(
            twin.base,
            concurrency=None,
            request_rate=8.0,
            burstiness=0.5,
            num_requests=8,
            dataset=DatasetSpec(kind="generated-shared-prefix", shared_prefix=SHAPE),
            slo=ServiceLevels(ttft_ms=60_000, e2e_ms=60_000),
        )
    )
    m = result.metrics
    truth = measured_truth(twin, 8)
    assert m["completed"] == 8 and m["failed"] == 0
    assert all(r["target_tokens"] == OUTPUT_LEN for r in truth)  # the dataset's output length
    # system prompt + question, 320 words; the twin counts 4 characters a token, as the words are
    assert all(300 <= r["prompt_tokens"] <= 360 for r in truth), [r["prompt_tokens"] for r in truth]
    assert m["dataset"].startswith("generated-shared-prefix (2 groups x 4 prompts")
    assert m["dataset_lengths"] == "approximated: one token per word (no tokenizer file)"
    assert m["request_rate"] == 8.0
    # objectives no request of this twin misses: every completed request is good
    assert m["good_requests"] == 8
    assert m["goodput"] == pytest.approx(8 / m["duration"])
    starts = sorted(r.scheduled for r in result.records)
    assert starts[-1] > starts[0]  # open loop: arrivals spread over time, not all at once


def test_a_jsonl_prompt_file_sends_its_prompts_and_output_lengths(twins: TwinFactory, tmp_path: Path) -> None:
    file = tmp_path / "prompts.jsonl"
    file.write_text(
        "\n".join(
            json.dumps({"prompt": f"question {i} " + "word " * 40, "output_len": 8 + i}) for i in range(4)
        )
    )
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    dataset = DatasetSpec(kind="jsonl", prompt_file=file)
    with LoadWorkers() as workers:
        result = workers.run(
            spec(twin.base, concurrency=2, num_requests=4, warmup_requests=0, dataset=dataset)
        )
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"prompt": "x"}\n')
        with pytest.raises(LoadError, match="output_len"):  # refused before any request is sent
            workers.run(
                spec(
                    twin.base,
                    concurrency=2,
                    num_requests=4,
                    dataset=DatasetSpec(kind="jsonl", prompt_file=bad),
                )
            )
    assert result.metrics["completed"] == 4
    assert result.metrics["dataset"] == "jsonl:prompts.jsonl"
    assert result.metrics["dataset_lengths"] == "approximated: 4 characters per token (no tokenizer file)"
    twin.wait_for(lambda: len(_requests(twin)) >= 4, what="4 truth records")
    assert sorted(r["target_tokens"] for r in _requests(twin)) == [8, 9, 10, 11]


def _requests(twin: Twin) -> list[dict[str, Any]]:
    return [r for r in twin.truth() if r.get("kind") == "request" and not r.get("warmup")]


def test_the_cli_runs_a_rate_sweep_on_shared_prefixes_and_reports_goodput(
    twins: TwinFactory, tmp_path: Path
) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    env = twin_config(
        tmp_path,
        twin,
        "rates",
        f"""[bench.rates]
dataset = "generated-shared-prefix"
request_rates = [4.0, 8.0]
max_concurrency = 4
num_requests = 4
repeats = 2
warmup_requests = 1
[bench.rates.gsp]
num_groups = 2
prompts_per_group = 2
system_prompt_len = 200
question_len = 10
output_len = {OUTPUT_LEN}
[bench.rates.slo]
e2e_ms = 60000
""",
        top=f'bench_prompt_dir = "{prompts}"',
    )
    assert flagbot("db", "upgrade", cwd=tmp_path, env=env).returncode == 0
    table = flagbot("bench", cwd=tmp_path, env=env)
    assert table.returncode == 0, table.stderr
    assert "goodput" in table.stdout and "rate=8" in table.stdout
    assert "dataset generated-shared-prefix (2 groups x 2 prompts" in " ".join(table.stdout.split())
    data = json.loads(flagbot("bench", "slo=e2e_ms:1", "--json", cwd=tmp_path, env=env).stdout)
    assert [(m["concurrency"], m["request_rate"]) for m in data["measurements"]] == [
        (None, 4.0), (None, 8.0), (None, 4.0), (None, 8.0)
    ]  # fmt: skip
    assert all(m["metrics"]["good_requests"] == 0 for m in data["measurements"])  # no request ends in 1 ms
    refused = flagbot("bench", "dataset=jsonl:../flagbot.toml", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "without '..'" in refused.stderr
