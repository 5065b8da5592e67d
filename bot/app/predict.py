"""`predict CHANGE... [EXPECTATION...]`: what a flag change would do to capacity, before a restart.

Read-only: it reads the target's last observed start from the store (the memory figures
`observe` recorded with its snapshot) and runs `bot.sglang.capacity_model` on it; nothing is
changed and the target is not contacted. The band comes from this target's own starts when the
store has two or more of the same model and release, else from the release's known jitter
source, and the answer says which. A flag the rules do not compute is predicted from the
workspace a try measured for it (`bot.loop.capacity.learned_costs`), its source in the steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.commands import Invocation
from bot.loop.capacity import call_rows, figure_rows, predict_for_target
from bot.sglang.capacity_model.applied_change import PredictInputError
from bot.sglang.capacity_model.prediction import Prediction


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
            "rows": [list(row) for row in figure_rows(self.prediction)],
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
                    "rows": [list(row) for row in call_rows(self.prediction)],
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


async def predict_change(ctx: AppContext, invocation: Invocation, target: str) -> PredictAnswer:
    """The `predict` use case: the target's last observed start, the change, the prediction."""
    if not invocation.changes:
        raise AppError("predict needs a change: e.g. `predict set --mem-fraction-static=0.85`", usage=True)
    try:
        found = await ctx.store.run(
            predict_for_target, ctx.store.store, target, invocation.changes, invocation.expectations
        )
    except PredictInputError as exc:
        raise AppError(f"predict: {exc}", usage=True) from None
    if found is None:
        raise AppError(
            f"no start of {target} with its memory lines observed yet: run `observe target={target}` "
            "once the server is up, then predict"
        )
    return PredictAnswer(target, found.snapshot_id, found.prediction)


async def predict_json(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    """`predict_change` as JSON-ready data (lines, tables, ok), for the console's reader."""
    return (await predict_change(ctx, invocation, target)).to_json()
