"""The capacity model (`bot.sglang.capacity_model`) fed from the store: a target's recorded starts,
its jitter history, and the flag workspaces the knowledge base learned from earlier tries.

Why here and not in `bot.app.predict`: the `predict` command, the `try` preflight (which stops a
change predicted to fail before its restart), the step that scores a try's prediction against
its measured start and the `learn` step that measures a flag's workspace all read the same inputs
the same way; the loop is the lowest layer all four can import.

Where each input comes from is kept with it: the start is a stored snapshot (its id), the band
says which starts it was taken from, and a learned workspace names its knowledge fact, the
experiment and the target that measured it, and the model, GPU, tensor parallelism and SGLang
release it holds for (a workspace is per GPU, and depends on all four).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.sglang.capacity_model.applied_change import MODELLED_FLAGS, LearnedCost
from bot.sglang.capacity_model.figures import Band, StartFigures, Unknown, shown_number, start_figures
from bot.sglang.capacity_model.prediction import Prediction, jitter_band, predict
from bot.sglang.change import Change
from bot.sglang.expectation import Expectation
from bot.store.loop_models import KnowledgeObservation
from bot.store.models import Snapshot
from bot.store.observations import list_observations
from bot.store.store import Store

HISTORY = 50
"""How many of the target's latest snapshots are read (the last start and the jitter history)."""
MEMORY_COST = "memory-cost"
"""Knowledge observation kind: the workspace a flag took before the memory profile, measured by a try."""
PREDICTION_MISSED = "prediction-missed"
"""Knowledge observation kind: a try's start fell outside the band its preflight predicted."""
PREDICTED_FAIL = "predicted-fail"
"""The verdict of a try its preflight stopped before the restart (an expectation predicted to fail)."""


def recorded_figures(snapshot: Snapshot) -> Mapping[str, Any] | None:
    """The memory figures `observe` stored with a start, None when its lines were not seen."""
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


def gpu_facts(snapshot: Snapshot | None) -> tuple[str | None, str | None]:
    """(GPU name, compute capability) of node 0's first GPU in a snapshot, when nvidia-smi answered."""
    if snapshot is None:
        return None, None
    gpus = (snapshot.effective or {}).get("gpus") or {}
    for found in gpus.values():
        if found:
            first = found[0]
            cap = first.get("compute_cap")
            return first.get("name"), None if cap is None else str(cap)
    return None, None


def explicit_keys(requested: Sequence[Mapping[str, Any]]) -> set[str]:
    """The `server_args` keys a launch line set: `--mem-fraction-static` -> `mem_fraction_static`."""
    return {str(item.get("flag", "")).lstrip("-").replace("-", "_") for item in requested if item.get("flag")}


def figures_of(snapshot: Snapshot) -> StartFigures:
    """The model's input from one stored start."""
    return start_figures(
        recorded_figures(snapshot) or {},
        snapshot.server_args or {},
        version=snapshot.sglang_version,
        explicit=explicit_keys(snapshot.requested_flags),
        gpu_total_mib=_gpu_total_mib(snapshot),
    )


def free_memory_history(snapshots: Sequence[Snapshot], last: Snapshot) -> list[float]:
    """Free memory before the weights of this target's starts with the same release and weights:
    every observed start adds its figure, so the band narrows or widens with what the target did."""
    today = recorded_figures(last) or {}
    found: list[float] = []
    for snapshot in snapshots:
        recorded = recorded_figures(snapshot)
        if recorded is None or snapshot.sglang_version != last.sglang_version:
            continue
        pre, weights = recorded.get("pre_model_load_gib"), recorded.get("weight_gib")
        if isinstance(pre, int | float) and weights == today.get("weight_gib"):
            found.append(float(pre))
    return found


@dataclass(frozen=True)
class StartIdentity:
    """What a learned workspace holds for: the model served, the GPU, the tensor parallelism (a
    workspace is per GPU and shrinks as the model is split) and the SGLang release."""

    model: str | None
    gpu: str | None
    tp_size: int
    version: str | None

    @property
    def complete(self) -> bool:
        return None not in (self.model, self.gpu, self.version)

    def describe(self) -> str:
        return f"{self.model or '?'} on {self.gpu or '?'} (tp {self.tp_size}), SGLang {self.version or '?'}"


def identity_of(snapshot: Snapshot) -> StartIdentity:
    args = snapshot.server_args or {}
    model = args.get("model_path")
    tp = args.get("tp_size")
    return StartIdentity(
        model=str(model) if model else None,
        gpu=gpu_facts(snapshot)[0],
        tp_size=tp if isinstance(tp, int) and not isinstance(tp, bool) and tp > 0 else 1,
        version=snapshot.sglang_version,
    )


def cost_detail(
    identity: StartIdentity,
    workspace_gib: float,
    before: int | None,
    after: int | None,
    *,
    value: str | tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The detail a memory-cost observation is stored with (read back by `learned_costs`):
    `value` is the flag's value in the try that measured it (None for a switch)."""
    return {
        "workspace_gib": round(workspace_gib, 4),
        "value": list(value) if isinstance(value, tuple) else value,
        "model": identity.model,
        "tp_size": identity.tp_size,
        "before_snapshot_id": before,
        "after_snapshot_id": after,
    }


def learned_costs(
    observations: Sequence[KnowledgeObservation], identity: StartIdentity
) -> dict[str, LearnedCost]:
    """flag -> its newest learned workspace measured with the same model, GPU, tensor parallelism
    and SGLang release as `identity`, on any target; none when the identity is not fully known
    (a workspace measured elsewhere is never applied on a guess). `observations` newest first,
    as `list_observations` gives them (retracted facts are not among them)."""
    if not identity.complete:
        return {}
    found: dict[str, LearnedCost] = {}
    for obs in observations:
        detail = obs.detail or {}
        gib = detail.get("workspace_gib")
        if (
            obs.kind != MEMORY_COST
            or obs.flag in found
            or obs.flag in MODELLED_FLAGS
            or not isinstance(gib, int | float)
            or isinstance(gib, bool)
            or detail.get("model") != identity.model
            or obs.gpu_name != identity.gpu
            or obs.sglang_version != identity.version
            or detail.get("tp_size") != identity.tp_size
        ):
            continue
        value = detail.get("value")
        found[obs.flag] = LearnedCost(
            obs.flag,
            float(gib),
            f"knowledge fact #{obs.id}: measured"
            + (f" by experiment #{obs.experiment_id}" if obs.experiment_id is not None else "")
            + f" on {obs.target} ({identity.describe()})",
            tuple(str(v) for v in value)
            if isinstance(value, list)
            else None
            if value is None
            else str(value),
        )
    return found


def _shown(value: float | None) -> str:
    return "—" if value is None else shown_number(value)


def figure_rows(prediction: Prediction) -> list[tuple[str, str, str]]:
    """(figure, today, predicted with its band) for each figure: what `predict` and the try's
    preflight both show."""
    return [
        (
            f.name,
            _shown(f.today),
            "unknown"
            if prediction.unknown
            else str(f.predicted)
            if isinstance(f.predicted, Unknown)
            else f.predicted.shown(),
        )
        for f in prediction.figures
    ]


def call_rows(prediction: Prediction) -> list[tuple[str, str, str]]:
    """(expectation, call, why) for each expectation judged against the predicted band."""
    return [
        (str(c.expectation), f"{c.call}{' (confident)' if c.confident else ''}", c.why)
        for c in prediction.calls
    ]


def headline(prediction: Prediction) -> Band | None:
    """The predicted effective max_running_requests (the figure a try's verdict guards), when known."""
    found = prediction.figure("max_running_requests").predicted
    return found if isinstance(found, Band) else None


@dataclass(frozen=True)
class TargetPrediction:
    """A prediction for one target, with the stored start it was made from."""

    target: str
    snapshot_id: int | None
    prediction: Prediction

    @property
    def confident_failures(self) -> list[str]:
        """The expectations the whole predicted band fails, each with why."""
        return [f"{call.expectation}: {call.why}" for call in self.prediction.calls if call.call == "fail"]


def predict_for_target(
    store: Store, target: str, changes: Sequence[Change], expectations: Sequence[Expectation] = ()
) -> TargetPrediction | None:
    """The prediction of `changes` from the target's last start with its memory lines recorded,
    its own jitter history and every workspace learned for its model, GPU and release; None when
    no start of the target recorded its memory lines yet. PredictInputError for an unreadable change."""
    snapshots = store.snapshots(target, limit=HISTORY)
    last = next((s for s in snapshots if recorded_figures(s) is not None), None)
    if last is None:
        return None
    jitter, band = jitter_band(free_memory_history(snapshots, last))
    learned = learned_costs(list_observations(store), identity_of(last))
    prediction = predict(
        figures_of(last),
        changes,
        jitter_gib=jitter,
        band_source=band,
        expectations=expectations,
        learned=learned,
    )
    return TargetPrediction(target, last.id, prediction)


__all__ = [
    "HISTORY",
    "MEMORY_COST",
    "PREDICTED_FAIL",
    "PREDICTION_MISSED",
    "StartIdentity",
    "TargetPrediction",
    "call_rows",
    "cost_detail",
    "explicit_keys",
    "figure_rows",
    "figures_of",
    "free_memory_history",
    "gpu_facts",
    "headline",
    "identity_of",
    "learned_costs",
    "predict_for_target",
    "recorded_figures",
]
