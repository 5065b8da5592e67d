"""From an anomaly to hypotheses: which change since the baseline most likely moved the metric.

Why: the seeds' operator guessed the wrong culprit first (the allreduce fusion flag, inert on
that GPU) and paid a model reload for it. Ranking the suspects before removing any puts the
evidence flagbot already has to work: what the knowledge base says each flag does to memory
and capacity (or speed), whether the flag can act on this GPU at all (a probable no-op is an
unlikely culprit unless it has known side effects), and what earlier experiments observed.
Candidates are the flags added, changed or removed since the baseline, the implied flags that
appeared (SGLang's own adjustments), and memory that moved between the two starts.

Scores are relative (only the order matters) and every contribution is written into `why`,
so a human can disagree with a reason rather than with a number. `rank_order` gives `isolate`
its probe order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.loop.knowledge import KnowledgeBase, ObservationLike, describe_observation, observation_stance
from bot.sglang.catalog import FlagCatalog
from bot.target.snapshot_facts import is_release_difference

CAPACITY_METRICS = frozenset(
    {"max_running_requests", "max_total_num_tokens", "available_gpu_mem_gb", "max_req_input_len"}
)
"""Metrics decided at startup by memory; others (throughput, latency) are speed metrics."""
_CAPACITY_WEIGHT = {"lowers": 1.0, "depends": 0.5, "unknown": 0.3, "raises": -0.5, "none": -0.7}
_SPEED_WEIGHT = {"slower": 1.0, "depends": 0.3, "unknown": 0.3, "faster": -0.3, "none": -0.7}
GATED_FACTOR = 0.3
"""A flag that probably does nothing on this GPU keeps this share of its score..."""
GATED_SIDE_EFFECTS_FACTOR = 0.7
"""...or this share when it has known side effects."""
MEMORY_MOVED = 0.02
"""Relative change of a memory figure that counts as moved (restart jitter stays below it)."""

Snapshotish = Mapping[str, Any] | Any
"""A `bot.store.models.Snapshot` row or a dict with its keys."""


@dataclass(frozen=True)
class ProposedHypothesis:
    """One suspect, ready to become a stored `Hypothesis` and the experiment that tests it."""

    variable: str
    """A flag (`--enable-fused-moe-sum-all-reduce`) or `memory`."""
    kind: Literal["flag", "implied", "memory"]
    statement: str
    why: tuple[str, ...]
    score: float
    experiment: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "kind": self.kind,
            "statement": self.statement,
            "why": list(self.why),
            "score": round(self.score, 3),
            "experiment": self.experiment,
        }


def _get(snapshot: Snapshotish, key: str) -> Any:
    """A snapshot's JSON column (a row, or its `to_json` mapping), None when it has none.

    Any: the callers walk the stored document as the shape they know it has."""
    if isinstance(snapshot, Mapping):
        return snapshot.get(key)
    return getattr(snapshot, key, None)


def _flags(snapshot: Snapshotish, catalog: FlagCatalog | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in _get(snapshot, "requested_flags") or []:
        name = str(item.get("flag"))
        if catalog is not None:
            with contextlib.suppress(ValueError):
                name = catalog.canonical(name)
        out[name] = item.get("value")
    return out


def _capability(snapshot: Snapshotish) -> str | None:
    gpus = (_get(snapshot, "effective") or {}).get("gpus") or {}
    for node_gpus in gpus.values() if isinstance(gpus, Mapping) else []:
        for gpu in node_gpus:
            if gpu.get("compute_cap") is not None:
                return str(gpu["compute_cap"])
    return None


def _word(value: object) -> str:
    if value is None:
        return "on"
    return " ".join(value) if isinstance(value, list | tuple) else str(value)


def _change_words(
    flag: str, before: object, after: object, present_before: bool, present_after: bool
) -> tuple[str, str]:
    """(what happened, the change that undoes it) in the grammar's words."""
    if not present_before:
        return f"adding {flag}", f"remove {flag}"
    if not present_after:
        return f"removing {flag}", f"add {flag}" + ("" if before is None else f" {_word(before)}")
    return f"changing {flag} from {_word(before)} to {_word(after)}", f"set {flag}={_word(before)}"


class _Scorer:
    def __init__(
        self,
        kb: KnowledgeBase,
        observations: Sequence[ObservationLike],
        metric: str,
        capability: str | None,
    ) -> None:
        self.kb, self.observations, self.metric, self.capability = kb, observations, metric, capability
        self.capacity = metric in CAPACITY_METRICS

    def flag(self, flag: str, base: float) -> tuple[float, list[str]]:
        """Score contributions of what is known about `flag`: KB effect, gating, observations."""
        score, why = base, []
        entry = self.kb.entry(flag)
        if entry is None:
            score += 0.3
            why.append(f"{flag} is not in the knowledge base: its effect is unknown")
        elif self.capacity:
            score += _CAPACITY_WEIGHT[entry.memory.capacity]
            refs = "; ".join(s.ref for s in entry.sources_about("memory")[:2])
            why.append(
                f"knowledge base: {entry.memory.capacity} capacity: {entry.memory.text.strip()} ({refs})"
            )
        else:
            score += _SPEED_WEIGHT[entry.speed.direction]
            why.append(f"knowledge base: speed {entry.speed.direction}: {entry.speed.text.strip()}")
        gate = self.kb.gating(flag, self.capability) if self.capability else None
        if gate is not None:
            score *= GATED_SIDE_EFFECTS_FACTOR if gate.side_effects else GATED_FACTOR
            why.append(gate.text)
        elif entry is not None and entry.requires.compute_capability is not None and self.capability:
            why.append(f"{flag} can act on this GPU (compute capability {self.capability})")
        for obs in self.observations:
            if obs.flag != flag:
                continue
            stance = observation_stance(obs, self.metric)
            same_gpu = self.capability is None or obs.compute_capability in (None, self.capability)
            weight = 1.0 if same_gpu else 0.5
            score += (1.5 if stance > 0 else -1.0 if stance < 0 else 0.0) * weight
            why.append(describe_observation(obs))
        return max(score, 0.01), why


def _memory_moved(baseline: Snapshotish, current: Snapshotish) -> list[str]:
    before, after = _get(baseline, "effective") or {}, _get(current, "effective") or {}
    args_before, args_after = _get(baseline, "server_args") or {}, _get(current, "server_args") or {}
    figures = [
        ("max_total_num_tokens", before.get("max_total_num_tokens"), after.get("max_total_num_tokens")),
        ("available_gpu_mem_gb", before.get("available_gpu_mem_gb"), after.get("available_gpu_mem_gb")),
        (
            "mem_fraction_static",
            args_before.get("mem_fraction_static"),
            args_after.get("mem_fraction_static"),
        ),
    ]
    moved = []
    for name, old, new in figures:
        if not (isinstance(old, int | float) and isinstance(new, int | float)) or not old:
            continue
        if abs(new - old) / abs(old) >= MEMORY_MOVED:
            moved.append(f"{name} {old} -> {new}")
    return moved


def rank_hypotheses(
    baseline: Snapshotish,
    current: Snapshotish,
    *,
    regressed: Sequence[str],
    kb: KnowledgeBase,
    observations: Sequence[ObservationLike] = (),
    catalog: FlagCatalog | None = None,
    compute_capability: str | None = None,
) -> list[ProposedHypothesis]:
    """Suspects for the first regressed metric, most likely first (see the module docstring)."""
    metric = regressed[0] if regressed else "max_running_requests"
    capability = compute_capability or _capability(current) or _capability(baseline)
    scorer = _Scorer(kb, observations, metric, capability)
    values = (_get(baseline, "effective") or {}).get(metric), (_get(current, "effective") or {}).get(metric)
    moved = f" ({values[0]} -> {values[1]})" if None not in values else ""
    old_flags, new_flags = _flags(baseline, catalog), _flags(current, catalog)
    changed = [flag for flag in new_flags if flag not in old_flags or old_flags[flag] != new_flags[flag]]
    removed = [flag for flag in old_flags if flag not in new_flags]
    out: list[ProposedHypothesis] = []
    for flag in [*changed, *removed]:
        what, undo = _change_words(
            flag, old_flags.get(flag), new_flags.get(flag), flag in old_flags, flag in new_flags
        )
        score, why = scorer.flag(flag, 1.0 if flag in new_flags else 0.6)
        out.append(
            ProposedHypothesis(
                flag,
                "flag",
                f"{what} lowers {metric}{moved}",
                tuple(why),
                score,
                {"playbook": "try", "changes": [undo], "metric": metric},
            )
        )
    implied_before = _get(baseline, "implied") or {}
    for field, entry in sorted((_get(current, "implied") or {}).items()):
        before = implied_before.get(field)
        if before is not None and before.get("value") == entry.get("value"):
            continue
        if is_release_difference(entry):
            continue  # differs from another release's default: not something SGLang set itself
        flag = _flag_of(field, catalog)
        if flag in changed or flag in removed:
            continue  # requested, not implied: already a candidate
        score, why = scorer.flag(flag, 0.8)
        why.insert(
            0,
            f"SGLang set {field}={entry.get('value')!r} itself (was {entry.get('was')!r}), new since the baseline",
        )
        out.append(
            ProposedHypothesis(
                flag,
                "implied",
                f"the implied {field}={entry.get('value')!r} lowers {metric}{moved}",
                tuple(why),
                score,
                {"playbook": "isolate", "flags": changed + removed, "metric": metric},
            )
        )
    figures = _memory_moved(baseline, current)
    if figures:
        score = 1.2 if scorer.capacity else 0.4
        out.append(
            ProposedHypothesis(
                "memory",
                "memory",
                f"less memory for the KV pool lowers {metric}{moved}",
                (f"memory moved between the two starts: {', '.join(figures)}",),
                score,
                {"playbook": "isolate", "flags": changed + removed, "metric": metric},
            )
        )
    return sorted(out, key=lambda h: (-h.score, h.variable))


def _flag_of(field: str, catalog: FlagCatalog | None) -> str:
    if catalog is not None:
        for spec in catalog:
            if spec.field == field and spec.negates is None:
                return spec.name
    return "--" + field.replace("_", "-")


def rank_order(changed_flags: Sequence[str], proposals: Sequence[ProposedHypothesis]) -> list[str]:
    """`changed_flags` with the most likely culprit first; flags no proposal names keep their order, last."""
    score = {}
    for proposal in proposals:
        if proposal.kind == "flag" and proposal.variable not in score:
            score[proposal.variable] = proposal.score
    ranked = sorted((flag for flag in changed_flags if flag in score), key=lambda flag: -score[flag])
    return ranked + [flag for flag in changed_flags if flag not in score]
