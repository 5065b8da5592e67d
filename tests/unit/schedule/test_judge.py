"""What a check compares: health, flags, effective capacity (by tolerance), the benchmark verdict."""

from __future__ import annotations

from bot.app.checks import Probe, judge
from bot.sglang.expectation import Reference, evaluate, parse_expectation

EXPECTED = {
    "flags": [{"flag": "--tp-size", "value": "2"}],
    "max_running_requests": 48,
    "max_total_num_tokens": 1000,
}
TOLERANCES = {"max_running_requests": "exact", "max_total_num_tokens": "2%"}


def probe(**changes: object) -> Probe:
    values: dict[str, object] = {
        "healthy": True,
        "health": 200,
        "invocation": "a",
        "flags": [{"flag": "--tp-size", "value": "2"}],
        "effective": {"max_running_requests": 48, "max_total_num_tokens": 1010},
    }
    values.update(changes)
    return Probe(**values)  # type: ignore[arg-type]


def test_the_conclusion_holds_within_tolerances_and_noise() -> None:
    verdict = judge(EXPECTED, probe(), TOLERANCES, ("no effect", ["verdict: no effect"]))
    assert verdict.result == "pass" and verdict.reasons == ()
    assert [row.verdict for row in verdict.rows] == ["pass"] * 5


def test_a_capacity_cut_fails_naming_both_values() -> None:
    verdict = judge(
        EXPECTED,
        probe(effective={"max_running_requests": 26, "max_total_num_tokens": 1000}),
        TOLERANCES,
        None,
    )
    assert verdict.result == "fail"
    assert verdict.reasons == ("effective max_running_requests 26, concluded 48 (exact)",)


def test_changed_flags_an_unhealthy_server_and_a_regressed_benchmark_each_fail() -> None:
    flags = judge(EXPECTED, probe(flags=[]), TOLERANCES, None)
    assert flags.reasons == ("the flags differ from the ones the experiment left",)
    sick = judge(EXPECTED, probe(healthy=False, health=503, effective={}), TOLERANCES, None)
    assert sick.result == "fail" and "not healthy (/health 503)" in sick.reasons[0]
    slow = judge(
        EXPECTED, probe(), TOLERANCES, ("regressed", ["verdict: regressed (guarded by output_throughput@64)"])
    )
    assert slow.result == "fail" and "guarded by output_throughput@64" in slow.reasons[0]
    undecided = judge(EXPECTED, probe(), TOLERANCES, ("undecided", []))
    assert undecided.result == "pass"


def test_what_could_not_be_measured_is_said_never_assumed() -> None:
    """A capacity value missing on this start, and no comparable benchmark: "not measured" rows and
    reasons, neither a pass row nor a fail."""
    verdict = judge(EXPECTED, probe(effective={"max_running_requests": 48}), TOLERANCES, None)
    rows = {row.metric: row for row in verdict.rows}
    assert rows["max_total_num_tokens (effective)"].verdict == "not measured"
    assert rows["benchmark vs the concluded one"].verdict == "not measured"
    assert verdict.result == "pass" and verdict.reasons == ()
    assert verdict.not_measured == (
        "max_total_num_tokens (no value on this start)",
        "throughput (no measurement set of the same profile on both sides)",
    )


def test_the_experiments_expectations_count_failed_and_not_measured_apart() -> None:
    baseline = Reference(1000.0, "baseline #2 (snapshot #1 / set #4)")
    failed = evaluate(parse_expectation("output_throughput>=-5%"), 900.0, baseline)
    unknown = evaluate(parse_expectation("output_throughput>=-5%"), 990.0, None)
    verdict = judge(EXPECTED, probe(), TOLERANCES, ("no effect", []), (failed, unknown))
    assert verdict.result == "fail"
    assert verdict.reasons == (
        "expectation output_throughput>=-5% failed: -10.0% (900 vs 1,000) against baseline #2 (snapshot #1 / set #4)",
    )
    assert verdict.not_measured == (
        "output_throughput>=-5% (no reference (this step has none for a relative expectation))",
    )
    assert [row.verdict for row in verdict.rows[-2:]] == ["fail", "not measured"]
    assert verdict.rows[-2].before == "1,000.0 (baseline #2 (snapshot #1 / set #4))"
