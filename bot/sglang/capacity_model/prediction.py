"""A prediction: the arithmetic run across the band of free-memory jitter, figures next to today's,
and each expectation called pass, fail or undecided.

The band: free memory is measured anew at every start (`get_available_gpu_memory`), so the
memory before and after the weights both move by the same jitter `j`; the arithmetic is run on
a grid from `-j` to `+j` (widened by the rounding of the printed figures) and the band is the
extremes. An expectation is called only when the whole band is on one side of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.sglang.capacity_model.applied_change import LearnedCost, apply_change
from bot.sglang.capacity_model.arithmetic import run_arithmetic
from bot.sglang.capacity_model.figures import (
    PRINT_ROUNDING_GIB,
    Band,
    Figure,
    RuleSet,
    StartFigures,
    Step,
    Unknown,
    as_float,
    as_int,
    dp_attention_workers,
    rule_set,
    shown_number,
)
from bot.sglang.capacity_model.inputs import prepare_inputs
from bot.sglang.change import Change
from bot.sglang.expectation import Expectation, Reference, evaluate

DEFAULT_JITTER_GIB = 0.3
"""With one start only: the free memory two starts measure can differ by this much (other
processes, the CUDA context, NCCL buffers; seen up to +-0.15 GiB per start on unified-memory
GB10 nodes). A stated assumption, replaced by the target's own spread once it has two starts."""
BAND_POINTS = 41
"""Jitters the model is run at, evenly from -j to +j: the figures are not monotonic in the free
memory (one more state slot takes memory from the KV pool), so the band's extremes are looked for
on a grid fine enough (about 0.015 GiB apart at the default jitter) rather than at its ends."""


METRICS: tuple[str, ...] = (
    "mem_fraction_static",
    "parsed.max_running_requests",
    "max_running_requests",
    "max_total_num_tokens",
    "max_mamba_cache_size",
    "kv_memory_gb",
    "state_memory_gb",
    "available_gpu_mem_gb",
)
"""The figures a prediction gives, in the order shown; expectations may name any of them."""
_METRIC_ALIASES = {
    "parsed_max_running_requests": "parsed.max_running_requests",
    "parsed.mem_fraction_static": "mem_fraction_static",
    "available_gpu_mem": "available_gpu_mem_gb",
}


@dataclass(frozen=True)
class PredictedFigure:
    name: str
    today: float | None
    predicted: Figure

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "today": self.today}
        if isinstance(self.predicted, Unknown):
            data["unknown"] = self.predicted.why
        else:
            data |= {"value": self.predicted.value, "low": self.predicted.low, "high": self.predicted.high}
        return data


Call = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class ExpectationCall:
    """An expectation judged against the predicted band: confident only when the whole band is
    on one side of it."""

    expectation: Expectation
    call: Call
    why: str

    @property
    def confident(self) -> bool:
        return self.call != "undecided"

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": str(self.expectation),
            "call": self.call,
            "confident": self.confident,
            "why": self.why,
        }


@dataclass(frozen=True)
class Prediction:
    """Today's figures next to the predicted ones, the steps, the band's origin and the calls."""

    version: str | None
    rules: RuleSet | None
    changes: tuple[str, ...]
    figures: tuple[PredictedFigure, ...]
    steps: tuple[Step, ...]
    band: str
    calls: tuple[ExpectationCall, ...] = ()
    unknown: str | None = None
    """Set when nothing could be predicted (why); every figure is then Unknown."""

    def figure(self, name: str) -> PredictedFigure:
        name = _METRIC_ALIASES.get(name, name)
        return next(f for f in self.figures if f.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "rules": self.rules,
            "changes": list(self.changes),
            "figures": [f.to_json() for f in self.figures],
            "steps": [s.to_json() for s in self.steps],
            "band": self.band,
            "calls": [c.to_json() for c in self.calls],
            "unknown": self.unknown,
        }


def _band(values: Sequence[float | int | Unknown | None]) -> Figure:
    """The centre run's value (zero jitter) and the extremes over the whole grid."""
    unknown = next((v for v in values if isinstance(v, Unknown)), None)
    if unknown is not None:
        return unknown
    numbers = [float(v) for v in values if v is not None and not isinstance(v, Unknown)]
    if len(numbers) != len(values):
        return Unknown("not set")
    return Band(numbers[len(numbers) // 2], min(numbers), max(numbers))


def jitter_band(pre_model_load_history: Sequence[float]) -> tuple[float, str]:
    """(half-width in GiB, what it is): the spread of this target's own free memory before the
    weights across its starts when it has two or more, else `DEFAULT_JITTER_GIB`, said so."""
    if len(pre_model_load_history) >= 2:
        spread = max(pre_model_load_history) - min(pre_model_load_history)
        half = max(spread * 1.5, 2 * PRINT_ROUNDING_GIB)
        return half, (
            f"+-{half:.2f} GiB: 1.5 x the spread of free memory before the weights across this "
            f"target's {len(pre_model_load_history)} observed starts ({spread:.2f} GiB)"
        )
    return DEFAULT_JITTER_GIB, (
        f"+-{DEFAULT_JITTER_GIB:.2f} GiB: no history yet, so the release's known jitter source "
        "(free memory measured anew at each start, get_available_gpu_memory) at an assumed bound"
    )


def predict(
    figures: StartFigures,
    changes: Sequence[Change],
    *,
    jitter_gib: float = DEFAULT_JITTER_GIB,
    band_source: str = "",
    expectations: Sequence[Expectation] = (),
    learned: Mapping[str, LearnedCost] | None = None,
) -> Prediction:
    """Predict the start after `changes` from today's `figures` (module doc); a flag the rules do
    not compute is predicted from its `learned` workspace when there is one."""
    described = tuple(change.describe() for change in changes)
    rules = rule_set(figures.version)
    today = today_figures(figures)
    applied = apply_change(figures.server_args, changes, learned)
    inputs = prepare_inputs(figures)
    if applied.unmodelled:
        inputs = Unknown(f"the memory effect of {', '.join(applied.unmodelled)} is not modelled")
    if isinstance(inputs, Unknown):
        figures_out = tuple(PredictedFigure(name, today.get(name), inputs) for name in METRICS)
        prediction = Prediction(
            figures.version, rules, described, figures_out, (), band_source, unknown=inputs.why
        )
        return replace(prediction, calls=tuple(_call(prediction, e) for e in expectations))
    half = jitter_gib + PRINT_ROUNDING_GIB
    grid = [half * (i - BAND_POINTS // 2) / (BAND_POINTS // 2) for i in range(BAND_POINTS)]
    runs = [run_arithmetic(inputs, applied, j) for j in grid]
    centre = runs[BAND_POINTS // 2]
    predicted = {
        "mem_fraction_static": _band([r.mem_fraction_static for r in runs]),
        "parsed.max_running_requests": _band([r.parsed_max_running_requests for r in runs])
        if centre.parsed_max_running_requests is not None
        else Unknown("not set: derived from the KV pool"),
        "max_running_requests": _band([r.max_running_requests for r in runs]),
        "max_total_num_tokens": _band([r.max_total_num_tokens for r in runs]),
        "max_mamba_cache_size": _band([r.max_mamba_cache_size for r in runs])
        if figures.hybrid
        else Unknown("not a hybrid model"),
        "kv_memory_gb": _band([r.kv_gib for r in runs]),
        "state_memory_gb": _band([r.state_gib for r in runs]) if figures.hybrid else Band(0.0, 0.0, 0.0),
        "available_gpu_mem_gb": _band([r.available_gpu_mem_gb for r in runs]),
    }
    steps = centre.steps
    dp = dp_attention_workers(figures.server_args)
    per_worker = predicted["max_running_requests"]
    if dp > 1 and isinstance(per_worker, Band):
        # the capacity line is one DP worker's; flagbot's expectations compare the total
        predicted["max_running_requests"] = Band(
            per_worker.value * dp, per_worker.low * dp, per_worker.high * dp
        )
        steps += (
            Step(
                "max_running_requests (total)",
                f"{shown_number(per_worker.value)} per DP worker x dp_size {dp}",
                "scheduler.py capacity line (per DP worker under DP attention)",
            ),
        )
    figures_out = tuple(PredictedFigure(name, today.get(name), predicted[name]) for name in METRICS)
    prediction = Prediction(figures.version, rules, described, figures_out, steps, band_source)
    return replace(prediction, calls=tuple(_call(prediction, e) for e in expectations))


def today_figures(f: StartFigures) -> dict[str, float | None]:
    """A start's figures by the names a prediction gives (`METRICS`); `max_running_requests` the
    total over DP workers, as observe stores it. Also what a try's start measured, to score the
    prediction made for it."""
    parsed = as_int(f.server_args.get("max_running_requests"))
    per_worker = f.max_running_requests
    return {
        "mem_fraction_static": as_float(f.server_args.get("mem_fraction_static")),
        "parsed.max_running_requests": parsed,
        "max_running_requests": None
        if per_worker is None
        else per_worker * dp_attention_workers(f.server_args),
        "max_total_num_tokens": f.max_total_num_tokens,
        "max_mamba_cache_size": f.mamba_cache_size,
        "kv_memory_gb": f.kv_gib,
        "state_memory_gb": f.mamba_state_gib if f.hybrid else 0.0,
        "available_gpu_mem_gb": f.available_gpu_mem_gb,
    }


def _call(prediction: Prediction, expectation: Expectation) -> ExpectationCall:
    """pass / fail when the whole band is on one side of `expectation`, else undecided."""
    name = _METRIC_ALIASES.get(expectation.metric, expectation.metric)
    if name not in METRICS:
        return ExpectationCall(
            expectation, "undecided", f"{expectation.metric} is not a capacity figure the model predicts"
        )
    figure = prediction.figure(name)
    if isinstance(figure.predicted, Unknown):
        return ExpectationCall(expectation, "undecided", str(figure.predicted))
    reference = Reference(figure.today, "today's start") if figure.today is not None else None
    ends = [
        evaluate(expectation, value, reference) for value in (figure.predicted.low, figure.predicted.high)
    ]
    if all(end.outcome == "pass" for end in ends):
        return ExpectationCall(expectation, "pass", f"the whole band {figure.predicted.shown()} passes")
    if all(end.outcome == "fail" for end in ends):
        return ExpectationCall(expectation, "fail", f"the whole band {figure.predicted.shown()} fails")
    return ExpectationCall(expectation, "undecided", f"the band {figure.predicted.shown()} straddles it")


def is_capacity_metric(metric: str) -> bool:
    return _METRIC_ALIASES.get(metric, metric) in METRICS
