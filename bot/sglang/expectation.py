"""Expectations: `metric OP value`, the one syntax for verdicts, checks and hypotheses' predictions.

Examples: `max_running_requests>=48`, `output_throughput>=-2%` (at most 2 % below the
reference), `startup_error==none`, `median_ttft_ms<500`. Metric names are the log parser's
`effective`/`parsed` fields and bench_serving's own JSON keys, so a user who knows either
tool already knows the names.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

Operator = Literal[">=", "<=", "==", "!=", ">", "<"]
OPERATORS: tuple[Operator, ...] = (">=", "<=", "==", "!=", ">", "<")

_EXPR = re.compile(r"^(?P<metric>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>\S.*?)\s*$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
LOOKS_LIKE_EXPECTATION = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*\s*(>=|<=|==|!=|>|<|=>|=<|=)")


class ExpectationError(ValueError):
    """An expectation that cannot be read; the message shows the right form."""


@dataclass(frozen=True)
class Expectation:
    """`metric OP value`; `relative` means value is a percentage change against a reference."""

    metric: str
    op: Operator
    value: float | str
    relative: bool = False

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return f"{self.metric}{self.op}{self.value}"
        number = _exact(self.value)
        if self.relative:
            number = f"{'' if number.startswith('-') else '+'}{number}%"
        return f"{self.metric}{self.op}{number}"

    def holds(self, actual: float | str | None, reference: float | None = None) -> bool:
        """Whether `actual` meets the expectation; relative ones compare the change against `reference`.

        A missing value never meets a numeric expectation: an absent capacity line is not a pass.
        """
        if isinstance(self.value, str):
            observed = "none" if actual is None else str(actual).lower()
            return _compare(observed, self.op, self.value.lower())
        if actual is None or isinstance(actual, str):
            return False
        if self.relative:
            if reference is None or reference == 0 or math.isnan(reference):
                return False
            return _compare((actual - reference) / abs(reference) * 100.0, self.op, self.value)
        return _compare(float(actual), self.op, self.value)


def _exact(value: float) -> str:
    """The shortest text that reads back as the same float (`1234567`, `0.85`), never rounded."""
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _compare(left: float | str, op: Operator, right: float | str) -> bool:
    if isinstance(left, str) or isinstance(right, str):
        if op == "==":
            return str(left) == str(right)
        if op == "!=":
            return str(left) != str(right)
        return False
    return {
        ">=": left >= right,
        "<=": left <= right,
        "==": left == right,
        "!=": left != right,
        ">": left > right,
        "<": left < right,
    }[op]


def parse_expectation(text: str) -> Expectation:
    """Read `metric OP value`. Words (`none`, `true`, a model name) are allowed only with == and !=."""
    match = _EXPR.match(text)
    typo = re.match(r"^[A-Za-z_][A-Za-z0-9_.]*\s*(=>|=<|=)(?![=])", text)
    if typo:
        better = {"=>": ">=", "=<": "<=", "=": "=="}[typo.group(1)]
        raise ExpectationError(
            f"expectation {text!r}: unknown operator {typo.group(1)!r}; did you mean {better}?"
        )
    if not match:
        raise ExpectationError(
            f"cannot read expectation {text!r}: write metric OP value, e.g. max_running_requests>=48"
        )
    metric, op, raw = match["metric"], match["op"], match["value"]
    if raw.startswith(("=", ">", "<")):
        raise ExpectationError(f"expectation {text!r}: unknown operator; use one of {' '.join(OPERATORS)}")
    relative = raw.endswith("%")
    number_text = raw[:-1] if relative else raw
    if _NUMBER.match(number_text):
        value = float(number_text)
        if not math.isfinite(value):
            raise ExpectationError(f"expectation {text!r}: the value must be a finite number")
        return Expectation(metric, op, value, relative)  # type: ignore[arg-type]
    if relative:
        raise ExpectationError(f"expectation {text!r}: a percentage must be a number, e.g. -2%")
    if op not in ("==", "!="):
        raise ExpectationError(f"expectation {text!r}: {op} needs a number; words compare only with == or !=")
    return Expectation(metric, op, raw)  # type: ignore[arg-type]
