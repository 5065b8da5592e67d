"""Expectations: parsing, evaluation (absolute, relative, words) and specific errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.sglang.expectation import Expectation, ExpectationError, parse_expectation


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
