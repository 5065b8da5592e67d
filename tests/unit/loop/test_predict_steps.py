"""The preflight's stop decision and the score of a prediction against its start (issue 23, items 3
and 4); the try itself, stopped and forced, is tests/component/loop/test_try_predicted.py."""

from __future__ import annotations

from bot.loop.run_state import PredictionRecord, prediction_error_text
from bot.loop.steps.predict_steps import figures_outside_band, stop_reason
from bot.sglang.capacity_model.applied_change import LearnedCost
from bot.sglang.capacity_model.prediction import predict
from bot.sglang.change import Change
from bot.sglang.expectation import parse_expectation
from tests.unit.sglang.capacity_model.test_prediction import dense

FUSED = "--enable-fused-moe-sum-all-reduce"
LEARNED = {FUSED: LearnedCost(FUSED, 40.0, "knowledge fact #3: measured by experiment #1 on lab")}


def test_an_expectation_the_whole_band_fails_stops_the_try_naming_value_band_and_the_flags_cost() -> None:
    prediction = predict(
        dense(),
        [Change("add", FUSED)],
        jitter_gib=0.1,
        band_source="+-0.10 GiB: test",
        expectations=[parse_expectation("max_total_num_tokens>=400000")],
        learned=LEARNED,
    )
    why = stop_reason(7, prediction)
    assert why is not None
    assert "snapshot #7" in why
    assert "max_total_num_tokens>=400000: the whole band" in why
    assert "(band +-0.10 GiB: test)" in why
    assert "knowledge fact #3: measured by experiment #1 on lab" in why
    assert why.endswith("force=yes")


def test_an_undecided_or_passing_expectation_does_not_stop_the_try() -> None:
    unmodelled = predict(
        dense(), [Change("add", FUSED)], expectations=[parse_expectation("max_total_num_tokens>=400000")]
    )
    assert unmodelled.calls[0].call == "undecided"
    assert stop_reason(7, unmodelled) is None
    passing = predict(
        dense(),
        [Change("add", FUSED)],
        expectations=[parse_expectation("max_total_num_tokens>=100000")],
        learned=LEARNED,
    )
    assert passing.calls[0].call == "pass"
    assert stop_reason(7, passing) is None


def test_a_figure_measured_outside_its_band_is_a_miss_and_one_inside_is_not() -> None:
    prediction = {
        "figures": [
            {"name": "max_running_requests", "value": 26, "low": 26, "high": 27},
            {"name": "kv_memory_gb", "value": 6.2, "low": 6.1, "high": 6.3},
            {"name": "max_mamba_cache_size", "unknown": "not modelled"},
        ]
    }
    assert figures_outside_band(prediction, {"max_running_requests": 27, "kv_memory_gb": 6.305}) == []
    assert figures_outside_band(prediction, {"max_running_requests": 48, "kv_memory_gb": 6.2}) == [
        "max_running_requests: predicted 26 (26..27), measured 48"
    ]


def test_the_prediction_error_is_said_the_same_way_in_log_and_the_digest() -> None:
    assert prediction_error_text(26, 26, 27, 26, False) == (
        "predicted max_running_requests 26 (26..27), measured 26 (error +0, within the band)"
    )
    assert prediction_error_text(26, 26, 26, 48, True) == (
        "predicted max_running_requests 26, measured 48 (error +22, missed: outside the band)"
    )
    stopped = PredictionRecord(predicted_capacity=26, predicted_low=26, predicted_high=27, stopped="…")
    assert stopped.describe() == "stopped before the restart: predicted max_running_requests 26 (26..27)"
    assert PredictionRecord(not_made="no start").describe() == "no prediction (no start)"
