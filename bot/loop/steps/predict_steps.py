"""The capacity prediction in the try loop: shown (and acted on) before the restart, scored after it.

Why: a restart costs up to fifteen minutes on the seeds' nodes, and the incident spent two of
them learning that a flag cut effective max_running_requests 48 -> 26. The preflight predicts the
change's capacity from the last start (`bot.loop.capacity`); an expectation the whole predicted
band fails stops the try before anything changes, unless `force=yes`. Every try then keeps its
prediction next to what the start measured (`RunState.prediction`, scored by `await_start`, read by `log` and the digest),
and a start outside its band is recorded as a finding of its own: the model is kept honest by
its misses. (The `learn` step measures the workspace of a flag the model does not compute from
the try's two starts: `learn_steps.learn_memory_cost`.)
"""

from __future__ import annotations

from typing import Any

from bot.loop.actions import StepContext
from bot.loop.capacity import (
    PREDICTED_FAIL,
    PREDICTION_MISSED,
    call_rows,
    figure_rows,
    figures_of,
    headline,
    predict_for_target,
)
from bot.loop.run_state import PredictionRecord
from bot.loop.steps.common import changes_of, expectations_of
from bot.loop.steps.learn_steps import record_observation
from bot.sglang.capacity_model.applied_change import PredictInputError
from bot.sglang.capacity_model.figures import PRINT_ROUNDING_GIB, Band, shown_number
from bot.sglang.capacity_model.prediction import Prediction, today_figures
from bot.store.snapshots import get_snapshot
from bot.target.evidence import TableBlock, TextBlock

TITLE = "Predicted capacity"
MISS_TOLERANCE: dict[str, float] = {
    "mem_fraction_static": 1e-4,
    "kv_memory_gb": PRINT_ROUNDING_GIB,
    "state_memory_gb": PRINT_ROUNDING_GIB,
    "available_gpu_mem_gb": PRINT_ROUNDING_GIB,
}
"""How far outside its band a measured figure may print and still count as inside: the rounding
of the line it is read from (GB with two decimals, the fraction with four); counts are exact."""


class PredictedFailureError(RuntimeError):
    """The preflight predicts, with confidence, that the try's expectations fail: the restart
    would be spent learning what the arithmetic already says. Nothing was changed."""


def _learned_sources(prediction: Prediction) -> list[str]:
    return [
        f"{step.name} ({step.formula}): {step.source}"
        for step in prediction.steps
        if step.name.startswith("workspace of ")
    ]


def _record(snapshot_id: int | None, prediction: Prediction) -> PredictionRecord:
    band = headline(prediction)
    return PredictionRecord(
        snapshot_id=snapshot_id,
        prediction=prediction.to_json(),
        predicted_capacity=round(band.value) if band is not None else None,
        predicted_low=round(band.low) if band is not None else None,
        predicted_high=round(band.high) if band is not None else None,
    )


def stop_reason(snapshot_id: int | None, prediction: Prediction) -> str | None:
    """Why a try is stopped before its restart (None: nothing is predicted to fail with confidence):
    each failing expectation with its predicted band, where the band's width comes from, and the
    source of every learned workspace the prediction used."""
    failing = [call for call in prediction.calls if call.call == "fail"]
    if not failing:
        return None
    calls = "; ".join(f"{call.expectation}: {call.why}" for call in failing)
    sources = _learned_sources(prediction)
    learned = f"; the flag's cost: {'; '.join(sources)}" if sources else ""
    return (
        f"predicted to fail before any restart, from the start of snapshot #{snapshot_id}: {calls} "
        f"(band {prediction.band}){learned}. Nothing was changed; to restart anyway, run the same "
        "try with force=yes"
    )


async def _not_made(ctx: StepContext, why: str) -> dict[str, Any]:
    """No prediction: said in the evidence and kept, so the start is still recorded against it."""
    ctx.state.prediction = PredictionRecord(not_made=why)
    await ctx.emit(TextBlock(f"no prediction: {why}", TITLE))
    return {"prediction": "none"}


async def predict_before_restart(ctx: StepContext, *, force: bool, dry_run: bool = False) -> dict[str, Any]:
    """The preflight's prediction: shown as evidence and kept in the run's state; an expectation
    predicted to fail with confidence raises PredictedFailureError unless `force` (or `dry_run`:
    a dry run restarts nothing, it only shows the prediction)."""
    try:
        found = await ctx.store.run(
            predict_for_target, ctx.store.store, ctx.target, changes_of(ctx), expectations_of(ctx)
        )
    except PredictInputError as exc:
        return await _not_made(ctx, str(exc))
    if found is None:
        return await _not_made(
            ctx,
            f"no start of {ctx.target} with its memory lines recorded yet (observe records them with each start)",
        )
    prediction = found.prediction
    record = _record(found.snapshot_id, prediction)
    why = stop_reason(found.snapshot_id, prediction)
    record.forced = why is not None and force and not dry_run
    record.stopped = why if why is not None and not (force or dry_run) else None
    ctx.state.prediction = record
    notes = [f"band: {prediction.band}"]
    if prediction.unknown:
        notes.append(f"unknown: needs a restart ({prediction.unknown})")
    notes += _learned_sources(prediction)
    await ctx.emit(
        TableBlock(
            f"{TITLE} (from the start of snapshot #{found.snapshot_id}, SGLang {prediction.version}; "
            "no restart)",
            ("figure", "today", "predicted (band)"),
            tuple(figure_rows(prediction)),
            "; ".join(notes),
        )
    )
    if prediction.calls:
        await ctx.emit(
            TableBlock(
                "Expectations against the predicted band",
                ("expectation", "call", "why"),
                tuple(call_rows(prediction)),
            )
        )
    if why is None or dry_run:
        return {
            "prediction": "made",
            "predicted_capacity": record.predicted_capacity,
            "fails": why is not None,
        }
    if force:
        await ctx.emit(
            TextBlock(f"{why}. force=yes: going ahead with the restart.", "Preflight: predicted to fail")
        )
        return {"prediction": "predicted-fail", "forced": True}
    ctx.state.conclusion.verdict = PREDICTED_FAIL
    raise PredictedFailureError(why)


def figures_outside_band(prediction: dict[str, Any], measured: dict[str, float | None]) -> list[str]:
    """Each predicted figure the start measured outside its band (beyond the printing's rounding)."""
    found: list[str] = []
    for figure in prediction.get("figures") or []:
        name, low, high = figure.get("name"), figure.get("low"), figure.get("high")
        value = measured.get(str(name))
        if value is None or not isinstance(low, int | float) or not isinstance(high, int | float):
            continue
        slack = MISS_TOLERANCE.get(str(name), 0.0)
        if value < low - slack or value > high + slack:
            shown = Band(float(figure.get("value") or low), float(low), float(high)).shown()
            found.append(f"{name}: predicted {shown}, measured {shown_number(value)}")
    return found


async def score_prediction(ctx: StepContext) -> dict[str, Any] | None:
    """Put the preflight's prediction next to the start the change made (`await_start` calls it
    once the start is observed; not a step of its own, so stored runs keep their step numbers).
    None when the run made no prediction (a playbook without the try's preflight)."""
    record = ctx.state.prediction
    if record is None:
        return None
    after = await ctx.store.run(get_snapshot, ctx.store.store, ctx.state.after.snapshot_id)
    if after is None:
        return {"skipped": "the start after the change was not observed"}
    measured = today_figures(figures_of(after))
    capacity = measured.get("max_running_requests")
    record.measured_capacity = round(capacity) if capacity is not None else None
    record.misses = figures_outside_band(record.prediction, measured)
    scored = record.predicted_capacity is not None and capacity is not None
    record.missed = bool(record.misses) if scored or record.misses else None
    ctx.state.prediction = record
    if record.not_made is not None:
        line = f"no prediction was made ({record.not_made}); measured effective max_running_requests {record.measured_capacity}"
    elif record.predicted_capacity is not None and capacity is not None:
        error = capacity - record.predicted_capacity
        line = (
            f"predicted effective max_running_requests {record.predicted_capacity} "
            f"({record.predicted_low}..{record.predicted_high}), measured {shown_number(capacity)} "
            f"(error {error:+.0f})"
        )
    else:
        line = "the preflight could not predict effective max_running_requests: nothing to score"
    if record.misses:
        line += "; outside the band: " + "; ".join(record.misses)
        described = ", ".join(change.describe() for change in changes_of(ctx))
        await record_observation(
            ctx,
            after,
            flag=next((c.flag or c.env_name or "" for c in changes_of(ctx)), ""),
            kind=PREDICTION_MISSED,
            text=(
                f"the prediction for {described} from snapshot #{record.snapshot_id} missed the start of "
                f"snapshot #{after.id}: " + "; ".join(record.misses)
            ),
            detail={
                "misses": record.misses,
                "snapshot_id": record.snapshot_id,
                "after_snapshot_id": after.id,
            },
        )
    await ctx.emit(TextBlock(line, "Prediction against the start"))
    return {"missed": record.missed, "measured_capacity": record.measured_capacity}


__all__ = [
    "PredictedFailureError",
    "figures_outside_band",
    "predict_before_restart",
    "score_prediction",
    "stop_reason",
]
