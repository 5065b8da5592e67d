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
from typing import Any, Literal

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
        """Whether `actual` passes (`evaluate` with an unnamed reference); not measured is not a pass.

        The steps use `evaluate`, which says pass, fail or not measured and which reference it used.
        """
        ref = None if reference is None else Reference(reference, "the given reference")
        return evaluate(self, actual, ref).passed


Outcome = Literal["pass", "fail", "not measured"]


@dataclass(frozen=True)
class Reference:
    """What a relative expectation compares with: the reference's value of the metric, and where it
    comes from ("the start before this try (snapshot #3 / set #7)", "baseline #2 (snapshot #1 / set #4)").

    `value` None means the reference has no value of the metric; `missing` then says why
    ("no baseline pinned", "the baseline has no measurement set").
    """

    value: float | str | None
    source: str
    missing: str | None = None


@dataclass(frozen=True)
class ExpectationResult:
    """One expectation evaluated: pass, fail or not measured, with the numbers and the reference used."""

    expectation: Expectation
    outcome: Outcome
    actual: float | str | None
    reference: float | str | None
    source: str | None
    """Which reference the evaluation used (None: an absolute one needs none)."""
    why: str
    """The evaluation in words: "-7.2% against the start before this try (snapshot #3 / set #7)"."""
    change_pct: float | None = None

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    def describe(self) -> str:
        """`expectation output_throughput>=-5% failed: -7.2% against the start before this try (…)`."""
        word = {"pass": "holds", "fail": "failed", "not measured": "not measured"}[self.outcome]
        return f"expectation {self.expectation} {word}: {self.why}"

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": str(self.expectation),
            "outcome": self.outcome,
            "actual": self.actual,
            "reference": self.reference,
            "source": self.source,
            "why": self.why,
            "change_pct": self.change_pct,
        }


def evaluate(
    expectation: Expectation, actual: float | str | None, reference: Reference | None
) -> ExpectationResult:
    """The one evaluation of an expectation, used by every step that checks one.

    Absolute numbers compare `actual` with the value; relative ones (`%`) the change of `actual`
    against `reference.value`; words compare case-insensitively, a missing word reading `none`.
    A missing value, or a relative expectation without a usable reference, is "not measured"
    (with the reason), never a fail and never a pass.
    """
    source = reference.source if reference is not None else None
    ref_value = reference.value if reference is not None else None

    used = source if expectation.relative else None  # an absolute or word form uses no reference

    def result(outcome: Outcome, why: str, change: float | None = None) -> ExpectationResult:
        return ExpectationResult(expectation, outcome, actual, ref_value if used else None, used, why, change)

    if isinstance(expectation.value, str):
        observed = "none" if actual is None else str(actual).lower()
        ok = _compare(observed, expectation.op, expectation.value.lower())
        return result("pass" if ok else "fail", f"measured {observed}")
    if actual is None:
        return result("not measured", f"no value of {expectation.metric} was measured")
    if isinstance(actual, str):
        return result("fail", f"measured {actual!r}, not a number")
    if not expectation.relative:
        ok = _compare(float(actual), expectation.op, expectation.value)
        return result("pass" if ok else "fail", f"measured {_shown(actual)}")
    if reference is None:
        return result("not measured", "no reference (this step has none for a relative expectation)")
    if ref_value is None:
        return result(
            "not measured",
            f"no reference ({reference.missing or 'the reference has no value of ' + expectation.metric}; {reference.source})",
        )
    if isinstance(ref_value, str) or ref_value == 0 or math.isnan(ref_value):
        return result(
            "not measured",
            f"no reference (the reference value is {ref_value!r}; {reference.source})",
        )
    change = (float(actual) - ref_value) / abs(ref_value) * 100.0
    ok = _compare(change, expectation.op, expectation.value)
    why = f"{change:+.1f}% ({_shown(actual)} vs {_shown(ref_value)}) against {reference.source}"
    return result("pass" if ok else "fail", why, change)


def _shown(value: float) -> str:
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


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
