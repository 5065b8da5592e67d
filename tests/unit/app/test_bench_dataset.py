"""`bench dataset=` and `slo=` (bot/app/bench.py `plan_bench`): the words reach the plan, and
every bad one is refused before anything is stored or measured, naming the problem."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.app.bench import BenchRequest, check_same_workload, plan_bench
from bot.app.errors import AppError
from bot.bench.loadgen import LoadError
from bot.bench.metrics import ServiceLevels
from bot.bench.run import run_plan
from bot.commands import CommandError, parse_command
from bot.config.schema import Settings

LAB = {"unit": "sglang.service", "base_url": "http://127.0.0.1:9", "nodes": [{"host": "h"}]}


def settings(prompt_dir: Path | None = None, **bench: Any) -> Settings:
    document: dict[str, Any] = {"default_target": "lab", "targets": {"lab": LAB}, "bench": bench}
    if prompt_dir is not None:
        document["bench_prompt_dir"] = str(prompt_dir)
    return Settings.model_validate(document)


def planned(config: Settings, words: str) -> Any:
    return plan_bench(config, BenchRequest.of(config, parse_command(words))).plan


def test_the_words_choose_the_dataset_and_the_objectives(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "a b c", "output_len": 4}\n')
    config = settings(tmp_path)
    plan = planned(config, "bench dataset=jsonl:p.jsonl slo=ttft_ms:500,tpot_ms:50")
    assert plan.dataset_sent().kind == "jsonl"
    assert plan.dataset_sent().prompt_file == (tmp_path / "p.jsonl").resolve()
    assert plan.spec(64).slo == ServiceLevels(500.0, 50.0, None)
    assert plan.params()["slo"] == "ttft_ms<=500, tpot_ms<=50"
    shared = planned(config, "bench dataset=generated-shared-prefix")
    assert shared.spec(1).dataset.kind == "generated-shared-prefix"
    assert planned(config, "bench").spec(1).dataset.kind == "random"


def test_the_profile_chooses_them_without_words() -> None:
    config = settings(
        gsp={"dataset": "generated-shared-prefix", "gsp": {"num_groups": 2}, "slo": {"e2e_ms": 900}}
    )
    plan = planned(config, "bench profile=gsp")
    assert plan.spec(1).dataset.shared_prefix.num_groups == 2
    assert plan.spec(1).slo == ServiceLevels(None, None, 900.0)


@pytest.mark.parametrize(
    ("words", "says"),
    [
        ("bench dataset=jsonl:../p.jsonl", "without '..'"),
        ("bench dataset=jsonl:missing.jsonl", "cannot read it"),
        ("bench dataset=mooncake", "unknown dataset"),
        ("bench slo=ttft:5", "write ttft_ms:N"),
        ("bench dataset=generated-shared-prefix backend=bench_serving", "sends its own random dataset"),
        ("bench profile=bursty backend=bench_serving", "use backend=builtin for another dataset, burstiness"),
        ("bench profile=rates concurrency=4", "sweeps request rates"),
    ],
)
def test_bad_words_are_refused_before_anything_runs(tmp_path: Path, words: str, says: str) -> None:
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n')
    config = settings(
        tmp_path, rates={"request_rates": [2.0, 4.0]}, bursty={"request_rate": 4.0, "burstiness": 0.5}
    )
    with pytest.raises(CommandError, match=says):
        planned(config, words)


@pytest.mark.parametrize(
    ("words", "says"),
    [
        ("bench dataset=jsonl:bad.jsonl", "line 1: no string `prompt`"),
        ("bench dataset=sharegpt:bad.jsonl", "a JSON list of conversations"),
    ],
)
async def test_a_file_not_of_its_format_fails_the_run_before_it_stores_anything(
    tmp_path: Path, words: str, says: str
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"text": "a"}\n')
    plan = planned(settings(tmp_path), words)  # the path is allowed: the format is read when it runs
    store = RecordingStore()
    with pytest.raises(LoadError, match=says):
        await run_plan(plan, store=store)  # type: ignore[arg-type]  # records what would be stored
    assert store.calls == []


class RecordingStore:
    """Stands in for the store: any call on it is recorded (and none is expected)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        self.calls.append(name)
        raise AssertionError(f"the store was used: {name}")


def test_without_a_prompt_directory_prompt_files_are_off() -> None:
    with pytest.raises(CommandError, match="prompt files are off"):
        planned(settings(), "bench dataset=sharegpt:chats.json")


def stored(params: dict[str, Any]) -> Any:
    return SimpleNamespace(set=SimpleNamespace(id=3, params=params))


def test_only_sets_of_the_same_dataset_are_compared() -> None:
    plan = planned(settings(), "bench dataset=generated-shared-prefix")
    check_same_workload(stored({"dataset": plan.dataset_sent().describe()}), plan)
    with pytest.raises(
        AppError, match="measured with dataset random, this benchmark sends generated-shared-prefix"
    ):
        check_same_workload(stored({}), plan)  # a set from before datasets sent random
    check_same_workload(stored({}), planned(settings(), "bench"))
