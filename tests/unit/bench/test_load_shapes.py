"""Load shapes and goodput: the worker's prompts per dataset, gamma/Poisson arrivals, the rate
sweep's levels and storage, goodput as vLLM's `bench serve --goodput` counts it, and goodput
in expectations (bot/bench/worker.py, loadgen.py, run.py, metrics.py)."""

from __future__ import annotations

import json
import random
import statistics
from array import array
from typing import Any

import pytest

from bot.bench.datasets import DatasetSpec, PromptRow
from bot.bench.loadgen import LoadSpec, Prepared, plans
from bot.bench.metrics import RequestRecord, ServiceLevels, good_requests, summarize
from bot.bench.run import BenchPlan, summarize_levels
from bot.bench.samples import Side
from bot.bench.verdict import VerdictSettings, compare
from bot.bench.worker import WorkerPlan, _Kept, _Worker, arrival_gap
from bot.config.schema import BenchProfile, SharedPrefixShape
from bot.config.verdicts import Verdicts
from bot.loop.expectations import bench_value
from bot.sglang.expectation import Reference, evaluate, parse_expectation
from bot.sglang.metrics import unknown_metric_message
from tests.unit.bench.test_worker_prompts import plan as worker_plan


def prompts_of(plan: WorkerPlan, count: int, kept: _Kept | None = None) -> list[dict[str, Any]]:
    worker = _Worker(plan, None, kept or _Kept())  # type: ignore[arg-type]  # no pipe needed to make bodies
    return [json.loads(worker._body()) for _ in range(count)]


def test_shared_prefix_requests_share_their_groups_system_prompt_and_nothing_more() -> None:
    shape = SharedPrefixShape(
        num_groups=3, prompts_per_group=4, system_prompt_len=50, question_len=6, output_len=9
    )
    plan = worker_plan(
        dataset="generated-shared-prefix", shared_prefix=shape, system_words=50, question_words=6
    )
    bodies = prompts_of(plan, 12)
    systems = counted(body["prompt"].split("\n\n")[0] for body in bodies)
    assert sorted(systems.values()) == [4, 4, 4]  # 3 groups x 4 prompts, as bench_serving plans them
    assert all(len(system.split()) == 50 for system in systems)
    assert len({body["prompt"] for body in bodies}) == 12  # every question is fresh
    assert all(len(body["prompt"].split("\n\n")[1].split()) == 6 for body in bodies)
    assert {body["max_tokens"] for body in bodies} == {9}
    other_set = prompts_of(worker_plan(**{**_fields(plan), "prompt_salt": 5}), 12)
    assert not {b["prompt"].split("\n\n")[0] for b in other_set} & set(systems)  # salted per set


def counted(items: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return counts


def _fields(plan: WorkerPlan) -> dict[str, Any]:
    return {name: getattr(plan, name) for name in plan.__dataclass_fields__}


def test_workers_split_the_group_order_without_overlap() -> None:
    shape = SharedPrefixShape(
        num_groups=2, prompts_per_group=3, system_prompt_len=20, question_len=3, output_len=4
    )
    common = {
        "dataset": "generated-shared-prefix",
        "shared_prefix": shape,
        "system_words": 20,
        "question_words": 3,
    }
    together = prompts_of(worker_plan(index=0, workers=2, **common), 3) + prompts_of(
        worker_plan(index=1, workers=2, **common), 3
    )
    systems = counted(body["prompt"].split("\n\n")[0] for body in together)
    assert sorted(systems.values()) == [3, 3]


def test_file_rows_are_sent_behind_the_runs_salt_with_their_output_len() -> None:
    rows = (PromptRow("first prompt", 2, 7), PromptRow("second prompt", 2, 11))
    bodies = prompts_of(worker_plan(dataset="jsonl", rows=rows, row_prefix="the salt is"), 3)
    assert [b["prompt"] for b in bodies] == [
        "the salt is first prompt",
        "the salt is second prompt",
        "the salt is first prompt",
    ]
    assert [b["max_tokens"] for b in bodies] == [7, 11, 7]


def test_a_warmup_takes_no_file_rows_place_and_not_its_salt() -> None:
    rows = (PromptRow("first prompt", 2, 7), PromptRow("second prompt", 2, 11))
    worker = _Worker(worker_plan(dataset="jsonl", rows=rows, row_prefix="the salt is"), None, _Kept())  # type: ignore[arg-type]
    warm = json.loads(worker._body(1, warmup=True))["prompt"]
    measured = json.loads(worker._body())["prompt"]
    assert measured == "the salt is first prompt"  # the warmup did not take the first place
    assert warm.endswith(" first prompt") and not warm.startswith("the salt is")


def test_plans_deal_file_rows_round_the_workers() -> None:
    rows = tuple(PromptRow(f"p{i}", 2, 4) for i in range(5))
    spec = LoadSpec(
        base_url="http://x",
        concurrency=2,
        workers=2,
        num_requests=5,
        dataset=DatasetSpec(kind="jsonl", prompt_file=None),
    )
    first, second = plans(spec, "m", Prepared(rows=rows, row_prefix="s"))
    assert first.rows == rows[0::2] and second.rows == rows[1::2]
    assert first.row_prefix == second.row_prefix == "s"


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_arrivals_keep_the_mean_rate_and_burstiness_sets_the_spread(burstiness: float) -> None:
    """Gamma gaps with shape k: mean 1/rate, coefficient of variation 1/sqrt(k) (1: Poisson)."""
    rng = random.Random(11)
    gaps = [arrival_gap(rng, 8.0, burstiness) for _ in range(20_000)]
    mean = statistics.fmean(gaps)
    cv = statistics.pstdev(gaps) / mean
    assert mean == pytest.approx(1 / 8.0, rel=0.05)
    assert cv == pytest.approx(burstiness**-0.5, rel=0.1)


def test_poisson_arrivals_are_the_stream_they_were() -> None:
    """burstiness 1 draws exactly what the open loop drew before gamma arrivals existed."""
    a, b = random.Random(3), random.Random(3)
    assert [arrival_gap(a, 2.0, 1.0) for _ in range(5)] == [b.expovariate(2.0) for _ in range(5)]


def record(ttft: float, tpot: float, n: int, *, ok: bool = True) -> RequestRecord:
    chunks = array("d", [ttft + i * tpot for i in range(n)])
    return RequestRecord(scheduled=0.0, send=0.0, end=chunks[-1], ok=ok, chunks=chunks, completion_tokens=n)


def test_goodput_counts_completed_requests_meeting_every_objective() -> None:
    records = [
        record(0.100, 0.020, 11),  # meets all: ttft 100, tpot 20, e2e 300
        record(0.300, 0.020, 11),  # ttft 300 > 200
        record(0.100, 0.040, 11),  # tpot 40 > 30
        record(0.100, 0.020, 1),  # one token: tpot counts as 0, as vLLM has it
        record(0.050, 0.010, 11, ok=False),  # failed: never good
    ]
    slo = ServiceLevels(ttft_ms=200, tpot_ms=30)
    assert good_requests(records, slo) == 2
    assert good_requests(records, ServiceLevels(e2e_ms=300.5)) == 2  # e2e 300 and 100 ms
    assert good_requests([record(0.25, 0.125, 3)], ServiceLevels(e2e_ms=500, ttft_ms=250)) == 1  # <= counts
    metrics = summarize(
        records, start=0.0, end=2.0, requested_input_len=8, request_rate=None, max_concurrency=1, slo=slo
    )
    assert metrics["goodput"] == pytest.approx(2 / 2.0)
    assert metrics["good_requests"] == 2
    assert metrics["slo"] == "ttft_ms<=200, tpot_ms<=30"
    plain = summarize(
        records, start=0.0, end=2.0, requested_input_len=8, request_rate=None, max_concurrency=1
    )
    assert plain["goodput"] is None and plain["good_requests"] is None


def test_the_slo_word() -> None:
    assert ServiceLevels.parse("ttft_ms:500,e2e_ms:8000") == ServiceLevels(500.0, None, 8000.0)
    for bad, says in (
        ("ttft:500", "write ttft_ms:N"),
        ("ttft_ms:fast", "not a number"),
        ("ttft_ms:1,ttft_ms:2", "given twice"),
        ("tpot_ms:-1", "positive"),
        ("tpot_ms:inf", "positive"),
    ):
        with pytest.raises(ValueError, match=says):
            ServiceLevels.parse(bad)


def test_goodput_is_an_expectation_metric_against_a_reference() -> None:
    expectation = parse_expectation("goodput>=-5%")
    assert unknown_metric_message("goodput") is None
    assert (expectation.metric, expectation.op, expectation.value, expectation.relative) == (
        "goodput",
        ">=",
        -5.0,
        True,
    )
    assert evaluate(expectation, 9.0, Reference(10.0, "before")).outcome == "fail"
    assert evaluate(expectation, 9.6, Reference(10.0, "before")).outcome == "pass"


def test_a_rate_sweep_stores_its_levels_by_rate() -> None:
    profile = BenchProfile(request_rates=[2.0, 8.0], max_concurrency=16, burstiness=0.5, num_requests=10)
    plan = BenchPlan.build(target="t", base_url="http://x", profile_name="rates", profile=profile)
    assert plan.levels() == [(None, 2.0), (None, 8.0)]
    spec = plan.spec(None, 8.0)
    assert (spec.request_rate, spec.concurrency, spec.burstiness, spec.num_requests, spec.sweep) == (
        8.0,
        16,
        0.5,
        10,
        "rate",
    )
    closed = BenchPlan.build(target="t", base_url="http://x", profile_name="q", profile=BenchProfile())
    assert closed.levels() == [(1, None), (64, None)]


def test_a_rate_sweeps_summary_and_expectations_read_its_highest_rate() -> None:
    from_metrics = [
        (0, _level(rate, goodput)) for rate, goodput in ((2.0, 1.5), (8.0, 4.0), (2.0, 2.5), (8.0, 6.0))
    ]
    summary = summarize_levels(from_metrics)
    rows = {row["request_rate"]: row for row in summary["levels"]}
    assert rows[2.0]["concurrency"] is None and rows[2.0]["goodput"] == pytest.approx(2.0)
    assert rows[8.0]["repeats"] == 2
    assert bench_value(summary, "goodput") == pytest.approx(5.0)


class _Level:
    def __init__(self, spec: LoadSpec, metrics: dict[str, Any]) -> None:
        self.spec, self.metrics, self.client_bound = spec, metrics, False


def _level(rate: float, goodput: float) -> Any:
    spec = LoadSpec(base_url="http://x", concurrency=16, request_rate=rate, sweep="rate")
    return _Level(spec, {"goodput": goodput, "completed": 10, "failed": 0})


def test_profile_keys_refuse_a_mixed_sweep() -> None:
    with pytest.raises(ValueError, match="not both"):
        BenchProfile(request_rate=4.0, request_rates=[2.0])
    with pytest.raises(ValueError, match="caps a rate sweep"):
        BenchProfile(max_concurrency=8)
    with pytest.raises(ValueError, match="unknown dataset"):
        BenchProfile(dataset="mooncake")


def test_goodput_guarded_in_verdicts_decides_a_rate_sweeps_cell() -> None:
    """`[verdicts] guarded` accepts goodput, and a lower goodput at a rate level reads regressed."""
    section = Verdicts(guarded={"goodput": "higher"})
    settings = VerdictSettings.from_config(section)

    def side(values: list[float]) -> Side:
        return Side({"rate=8": [{"goodput": v} for v in values]})

    result = compare(
        side([10.0, 10.1, 9.9, 10.0, 10.05]), side([7.0, 7.1, 6.9, 7.0, 7.05]), settings, single_look=True
    )
    assert result.verdict == "regressed"
    assert result.guarded_by == "goodput@rate=8"
    with pytest.raises(ValueError, match="not a bench_serving metric name"):
        Verdicts(guarded={"goodputt": "higher"})
