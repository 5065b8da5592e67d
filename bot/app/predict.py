"""`predict CHANGE... [EXPECTATION...]`: what a flag change would do to capacity, before a restart.

Read-only: it reads the target's last observed start from the store (the memory figures
`observe` recorded with its snapshot) and runs `bot.sglang.capacity_model` on it; nothing is
changed and the target is not contacted. The band comes from this target's own starts when the
store has two or more of the same model and release, else from the release's known jitter
source, and the answer says which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.commands import Invocation
from bot.sglang.capacity_model import (
    Band,
    PredictInputError,
    Prediction,
    StartFigures,
    Unknown,
    jitter_band,
    predict,
    shown_number,
    start_figures,
)
from bot.store.models import Snapshot

HISTORY = 50
"""How many of the target's latest snapshots are read (the last start and the jitter history)."""


@dataclass(frozen=True)
class PredictAnswer:
    """The prediction for one target's last start, ready to render (lines and tables)."""

    target: str
    snapshot_id: int | None
    prediction: Prediction

    @property
    def ok(self) -> bool:
        """False when an expectation is predicted to fail with confidence."""
        return not any(call.call == "fail" for call in self.prediction.calls)

    def tables(self) -> list[dict[str, Any]]:
        figures = {
            "title": f"predicted capacity of {self.target} after {'; '.join(self.prediction.changes)}",
            "columns": ["figure", "today", "predicted (band)"],
            "rows": [
                [f.name, _shown(f.today), "unknown" if self.prediction.unknown else _predicted(f.predicted)]
                for f in self.prediction.figures
            ],
        }
        steps = {
            "title": "the arithmetic, step by step",
            "columns": ["step", "formula", "SGLang source"],
            "rows": [[s.name, s.formula, s.source] for s in self.prediction.steps],
        }
        found = [figures, steps] if self.prediction.steps else [figures]
        if self.prediction.calls:
            found.append(
                {
                    "title": "expectations against the predicted band",
                    "columns": ["expectation", "call", "why"],
                    "rows": [
                        [str(c.expectation), f"{c.call}{' (confident)' if c.confident else ''}", c.why]
                        for c in self.prediction.calls
                    ],
                }
            )
        return found

    def lines(self) -> list[str]:
        p = self.prediction
        found = [
            f"from the start of snapshot #{self.snapshot_id} (SGLang {p.version}, rules of {p.rules or 'no release read'}); "
            "nothing was changed"
        ]
        if p.unknown:
            found.append(f"unknown: needs a restart ({p.unknown})")
        found.append(f"band: {p.band}")
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "target": self.target,
            "snapshot_id": self.snapshot_id,
            "prediction": self.prediction.to_json(),
            "lines": self.lines(),
            "tables": self.tables(),
        }


def _shown(value: float | None) -> str:
    return "—" if value is None else shown_number(value)


def _predicted(figure: Band | Unknown) -> str:
    return str(figure) if isinstance(figure, Unknown) else figure.shown()


def _recorded(snapshot: Snapshot) -> Mapping[str, Any] | None:
    found = snapshot.effective.get("start_figures")
    if isinstance(found, dict) and found.get("max_total_num_tokens"):
        return found
    return None


def _gpu_total_mib(snapshot: Snapshot) -> float | None:
    gpus = snapshot.effective.get("gpus")
    listed = gpus.get(snapshot.node) if isinstance(gpus, dict) else None
    if not listed and isinstance(gpus, dict):
        listed = next((value for value in gpus.values() if value), None)
    if not isinstance(listed, list) or not listed or not isinstance(listed[0], dict):
        return None
    total = listed[0].get("memory.total")
    try:
        return float(total) if total is not None else None
    except (TypeError, ValueError):
        return None


def explicit_keys(requested: Sequence[Mapping[str, Any]]) -> set[str]:
    """The `server_args` keys a launch line set: `--mem-fraction-static` -> `mem_fraction_static`."""
    return {str(item.get("flag", "")).lstrip("-").replace("-", "_") for item in requested if item.get("flag")}


def figures_of(snapshot: Snapshot) -> StartFigures:
    """The model's input from one stored start."""
    recorded = _recorded(snapshot) or {}
    return start_figures(
        recorded,
        snapshot.server_args or {},
        version=snapshot.sglang_version,
        explicit=explicit_keys(snapshot.requested_flags),
        gpu_total_mib=_gpu_total_mib(snapshot),
    )


def _history(snapshots: Sequence[Snapshot], last: Snapshot) -> list[float]:
    """Free memory before the weights of this target's starts with the same release and weights."""
    today = _recorded(last) or {}
    found: list[float] = []
    for snapshot in snapshots:
        recorded = _recorded(snapshot)
        if recorded is None or snapshot.sglang_version != last.sglang_version:
            continue
        pre, weights = recorded.get("pre_model_load_gib"), recorded.get("weight_gib")
        if isinstance(pre, int | float) and weights == today.get("weight_gib"):
            found.append(float(pre))
    return found


async def predict_change(ctx: AppContext, invocation: Invocation, target: str) -> PredictAnswer:
    """The `predict` use case: the target's last observed start, the change, the prediction."""
    if not invocation.changes:
        raise AppError("predict needs a change: e.g. `predict set --mem-fraction-static=0.85`", usage=True)
    snapshots = await ctx.store.run(ctx.store.store.snapshots, target, limit=HISTORY)
    last = next((s for s in snapshots if _recorded(s) is not None), None)
    if last is None:
        raise AppError(
            f"no start of {target} with its memory lines observed yet: run `observe target={target}` "
            "once the server is up, then predict"
        )
    jitter, band = jitter_band(_history(snapshots, last))
    try:
        prediction = predict(
            figures_of(last),
            invocation.changes,
            jitter_gib=jitter,
            band_source=band,
            expectations=invocation.expectations,
        )
    except PredictInputError as exc:
        raise AppError(f"predict: {exc}", usage=True) from None
    return PredictAnswer(target, last.id, prediction)


async def predict_json(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    """`predict_change` as JSON-ready data (lines, tables, ok), for the console's reader."""
    return (await predict_change(ctx, invocation, target)).to_json()
