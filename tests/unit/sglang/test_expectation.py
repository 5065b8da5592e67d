"""Expectations: parsing, evaluation (absolute, relative, words) and specific errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sglang.expectation import Expectation, ExpectationError, Reference, evaluate, parse_expectation


@pytest.mark.parametrize(
    ("text", "metric", "op", "value", "relative"),
    [
        ("max_running_requests>=48", "max_running_requests", ">=", 48.0, False),
        ("output_throughput>=-2%", "output_throughput", ">=", -2.0, True),
        ("median_ttft_ms < 500", "median_ttft_ms", "<", 500.0, False),
        ("startup_error==none", "startup_error", "==", "none", False),
        ("effective.max_running_requests!=26", "effective.max_running_requests", "!=", 26.0, False),
    ],
)
def test_parse(text: str, metric: str, op: str, value: object, relative: bool) -> None:
    assert parse_expectation(text) == Expectation(metric, op, value, relative)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("max_running_requests=48", "did you mean =="),
        ("x=>1", "did you mean >="),
        ("x>fast", "needs a number"),
        ("x>=fast%", "percentage must be a number"),
        ("x>=1e999", "finite"),
        (">=3", "write metric OP value"),
        ("x>==3", "unknown operator"),
    ],
)
def test_errors(text: str, says: str) -> None:
    with pytest.raises(ExpectationError, match=says):
        parse_expectation(text)


def test_holds_absolute_relative_and_words() -> None:
    assert parse_expectation("max_running_requests>=48").holds(48)
    assert not parse_expectation("max_running_requests>=48").holds(26)
    assert not parse_expectation("max_running_requests>=48").holds(None)
    assert parse_expectation("output_throughput>=-2%").holds(99.0, reference=100.0)
    assert not parse_expectation("output_throughput>=-2%").holds(97.0, reference=100.0)
    assert not parse_expectation("output_throughput>=-2%").holds(97.0, reference=None)
    assert parse_expectation("startup_error==none").holds(None)
    assert not parse_expectation("startup_error==none").holds("RuntimeError: x")


def test_str_round_trips() -> None:
    for text in ("max_running_requests>=48", "output_throughput>=-2%", "startup_error==none", "a<0.5"):
        assert str(parse_expectation(text)) == text


@given(
    st.sampled_from([">=", "<=", "==", "!=", ">", "<"]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.booleans(),
)
def test_numbers_read_back_exactly(op: str, value: float, relative: bool) -> None:
    expectation = Expectation("max_total_num_tokens", op, value, relative)  # type: ignore[arg-type]
    assert parse_expectation(str(expectation)) == expectation


BEFORE = Reference(1000.0, "the start before this try (snapshot #3 / set #7)")


@pytest.mark.parametrize(
    ("text", "actual", "reference", "outcome", "why"),
    [
        ("max_running_requests>=48", 48, None, "pass", "measured 48"),
        ("max_running_requests>=48", 26, None, "fail", "measured 26"),
        ("max_running_requests<=48", 26, None, "pass", "measured 26"),
        ("max_running_requests>=48", None, None, "not measured", "no value of max_running_requests"),
        ("output_throughput>=-5%", 1006.0, BEFORE, "pass", "+0.6% (1,006 vs 1,000) against the start before"),
        ("output_throughput>=-5%", 928.0, BEFORE, "fail", "-7.2% (928 vs 1,000) against the start before"),
        ("output_throughput<=+5%", 1040.0, BEFORE, "pass", "+4.0%"),
        ("output_throughput<=+5%", 1060.0, BEFORE, "fail", "+6.0%"),
        ("output_throughput>=-5%", 1006.0, None, "not measured", "no reference (this step has none"),
        (
            "output_throughput>=-5%",
            1006.0,
            Reference(None, "baseline #2 (snapshot #1, no measurement set)", "no measurement set"),
            "not measured",
            "no reference (no measurement set; baseline #2",
        ),
        (
            "output_throughput>=-5%",
            1006.0,
            Reference(0.0, "baseline #2"),
            "not measured",
            "reference value is 0",
        ),
        ("output_throughput>=-5%", None, BEFORE, "not measured", "no value of output_throughput"),
        ("startup_error==none", None, None, "pass", "measured none"),
        ("startup_error==none", "RuntimeError: x", None, "fail", "measured runtimeerror: x"),
        ("model==Llama-3", "llama-3", None, "pass", "measured llama-3"),
    ],
)
def test_evaluate_says_pass_fail_or_not_measured_and_the_reference(
    text: str, actual: float | str | None, reference: Reference | None, outcome: str, why: str
) -> None:
    result = evaluate(parse_expectation(text), actual, reference)
    assert result.outcome == outcome
    assert why in result.why
    relative = parse_expectation(text).relative
    # a relative evaluation names the reference it used; an absolute one uses none
    assert result.source == (reference.source if relative and reference is not None else None)
    assert result.to_json()["outcome"] == outcome


def test_a_relative_expectation_without_a_reference_is_never_a_fail() -> None:
    for actual in (0.0, 1.0, 1e9):
        result = evaluate(parse_expectation("output_throughput>=-2%"), actual, None)
        assert not result.failed and not result.passed


def test_describe_names_the_failed_expectation_and_its_reference() -> None:
    result = evaluate(parse_expectation("output_throughput>=-5%"), 928.0, BEFORE)
    assert result.describe() == (
        "expectation output_throughput>=-5% failed: -7.2% (928 vs 1,000) against the start before this try "
        "(snapshot #3 / set #7)"
    )
