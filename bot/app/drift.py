"""The drift watch: has a target moved away from what flagbot recorded, behind flagbot's back?

Per target, on `schedules.drift_cron`, without restarting or loading anything:

- **hand edit**: each node's `systemctl cat` against the checksum flagbot left it with (the
  target ledger, `bot.target.dropin.check_unedited`); for a unit flagbot never changed, against
  the text the first watch saw;
- **restart outside flagbot**: node 0's InvocationID against the start flagbot last recorded as
  known-good (the first invocation the watch saw, for a target without one); `flagbot observe`
  records the new start and so acknowledges it;
- **capacity**: the running start's effective values (journal of this invocation, /server_info)
  against the pinned baseline's (else the known-good start's), with `[verdicts.capacity]`'s
  tolerances;
- **throughput**: the newest measurement set of the running start (from a check or `flagbot
  bench`; the watch never benchmarks itself) against the baseline's set, same profile, judged by
  `bot.bench.verdict`.

The findings are stored every time; a change of the set of findings is an event, posted once
with its evidence to `slack.investigation_channel` (and printed by the CLI).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.app.notify import Notice
from bot.app.owed_posts import late_note, owed_window, post_once
from bot.app.runtime import ScheduleRuntime
from bot.bench.capacity import judge_capacity, parse_tolerance
from bot.bench.compare_sets import compare_by_id
from bot.bench.verdict import VerdictSettings
from bot.config import Settings
from bot.store import Snapshot, Store
from bot.store.baselines import current_baseline
from bot.store.bench_repo import latest_sets, load_set
from bot.store.drift import DriftChange, get_drift, record_drift, set_drift_posted, unposted_drift_event
from bot.store.leases import current
from bot.store.schedule_models import DriftEvent
from bot.store.snapshots import get_snapshot
from bot.target.dropin import HandEditError, check_unedited, unit_diff
from bot.target.evidence import (
    ComparisonRow,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TextBlock,
    evidence_from_json,
)
from bot.target.known_good import known_good
from bot.target.ledger import sha256_text
from bot.target.nodestate import node_state
from bot.target.observe import observe
from bot.target.session import TargetSession

__all__ = ["DriftOutcome", "watch_drift"]

log = logging.getLogger(__name__)

DRIFT_POST = "drift-post"
"""The claim of a drift event's post (`bot.app.owed_posts`): one per event, across replicas."""


@dataclass(frozen=True)
class DriftOutcome:
    target: str
    findings: list[dict[str, Any]]
    change: DriftChange | None
    posted: str | None = None
    skipped: str | None = None


def finding(key: str, what: str, *blocks: Evidence) -> dict[str, Any]:
    return {"key": key, "what": what, "evidence": [block.to_json() for block in blocks]}


async def _hand_edits(ts: TargetSession, reference: dict[str, Any]) -> list[dict[str, Any]]:

    found = []
    units = dict(reference.get("units") or {})
    for node in ts.nodes:
        try:
            text = await check_unedited(node, ts.ledger)
        except HandEditError as edit:
            found.append(_edit(node.name, node.unit, edit.diff))
            continue
        checksum, _ = await ts.ledger.unit_as_left(node.name)
        if checksum is not None:
            continue
        seen = units.get(node.name)
        if seen is None:
            units[node.name] = text  # first look at a unit flagbot never changed: the reference
        elif sha256_text(seen) != sha256_text(text):
            found.append(_edit(node.name, node.unit, unit_diff(seen, text, node.name)))
    reference["units"] = units
    return found


def _edit(node: str, unit: str, diff: str) -> dict[str, Any]:
    lines = tuple(diff.splitlines()[:60])
    return finding(
        f"hand-edit:{node}",
        f"{unit} on {node} was changed outside flagbot",
        JournalExcerpt(
            f"{unit} on {node}: what differs from what flagbot recorded", node, "systemctl cat " + unit, lines
        ),
    )


async def _look(rt: ScheduleRuntime, ts: TargetSession, reference: dict[str, Any]) -> list[dict[str, Any]]:

    store = rt.store
    findings = await _hand_edits(ts, reference)
    state = await node_state(ts.node0)
    good = await store.run(known_good, store.store, ts.name)
    if good is None and reference.get("invocation") is None:  # seen stopped: the next invocation counts
        reference["invocation"] = state.invocation
    recorded = good.invocation_id if good is not None else reference["invocation"]
    if state.invocation and recorded and state.invocation != recorded:
        findings.append(
            finding(
                "restart",
                f"{ts.name} was restarted outside flagbot: node 0 runs invocation {state.invocation}, "
                f"flagbot recorded {recorded}",
                TextBlock(
                    f"InvocationID {recorded} (recorded) -> {state.invocation} (running); "
                    f"ActiveState {state.active}; `flagbot observe` records the new start",
                    "Restarted outside flagbot",
                ),
            )
        )
    baseline = await store.run(current_baseline, store.store, ts.name)
    reference_snapshot = (
        await store.run(get_snapshot, store.store, baseline.snapshot_id) if baseline else good
    )
    if reference_snapshot is not None:
        findings += await _capacity(rt, ts, reference_snapshot)
    if baseline is not None and baseline.set_id is not None:
        findings += await store.run(
            _throughput, store.store, ts.name, baseline.set_id, state.invocation, rt.settings
        )
    return findings


def _snapshot(store: Store, snapshot_id: int) -> Snapshot | None:

    found: Snapshot | None = get_snapshot(store, snapshot_id)
    return found


async def _capacity(rt: ScheduleRuntime, ts: TargetSession, reference: Snapshot) -> list[dict[str, Any]]:

    obs = await observe(ts, cache_dir=rt.cache(), store=False, promote=False)
    rows, moved = [], []
    for metric, tolerance in rt.settings.verdicts.capacity.items():
        want, got = reference.effective.get(metric), obs.effective.get(metric)
        if want is None or got is None:
            continue
        verdict = judge_capacity(metric, want, got, parse_tolerance(tolerance))
        away = verdict.verdict in ("improved", "regressed")
        rows.append(ComparisonRow(metric, str(want), str(got), tolerance, verdict.verdict))
        if away:
            moved.append(f"{metric} {want} -> {got}")
    if not moved:
        return []
    return [
        finding(
            "capacity",
            f"effective capacity of {ts.name} moved from snapshot #{reference.id}: " + ", ".join(moved),
            MetricComparison(
                f"Effective capacity: snapshot #{reference.id} vs the running start", tuple(rows)
            ),
        )
    ]


def _throughput(
    store: Store, target: str, baseline_set: int, invocation: str | None, settings: Settings
) -> list[dict[str, Any]]:

    base = load_set(store, baseline_set)
    if base is None:
        return []
    for candidate in latest_sets(store, target, limit=20):
        if candidate.id == baseline_set or candidate.id is None or candidate.profile != base.set.profile:
            continue
        loaded = load_set(store, candidate.id)
        if loaded is None or loaded.snapshot is None or loaded.snapshot.invocation_id != invocation:
            continue
        compared = compare_by_id(
            store,
            baseline_set,
            candidate.id,
            VerdictSettings.from_config(settings.verdicts),
            save=False,
            single_look=True,
        )
        if compared.result.verdict != "regressed":
            return []
        return [
            finding(
                "throughput",
                f"set #{candidate.id} of the running start regressed against the baseline's set #{baseline_set}",
                TextBlock("\n".join(compared.result.lines()), "Throughput against the baseline"),
            )
        ]
    return []


async def watch_drift(rt: ScheduleRuntime, target: str) -> DriftOutcome:
    """Look once, store the findings, tell a change of state. A target whose lease is held (a
    running experiment is changing it on purpose) is skipped."""

    store = rt.store
    if target not in rt.settings.targets:
        return DriftOutcome(target, [], None, skipped=f"target {target!r} is not configured")
    async with rt.looking():  # the lease is read once it is this watch's turn, not before
        lease = await store.run(current, store.store, target)
        if lease is not None and not lease.expired(rt.clock()):
            return DriftOutcome(target, [], None, skipped=f"{target} is busy: {lease.describe()}")
        state = await store.run(get_drift, store.store, target)
        reference = dict(state.reference) if state is not None else {}
        try:
            async with rt.session(target) as ts:
                findings = await _look(rt, ts, reference)
        except Exception as exc:  # unreachable, refused: nothing to compare; the next watch tries again
            log.warning("drift watch of %s could not look: %s", target, exc)
            return DriftOutcome(
                target, [], None, skipped=f"could not look at {target}: {exc}".splitlines()[0]
            )
    change = await store.run(
        record_drift, store.store, target, findings=findings, reference=reference, now=rt.clock()
    )
    posted = None
    if change.event is not None and (change.new or change.resolved):
        posted = await _post_once(rt, target, change.event, late=False)
    elif change.event is None:
        owed = await store.run(unposted_drift_event, store.store, target, **owed_window(rt.clock()))
        if owed is not None:
            log.warning(
                "drift event #%s on %s was recorded but never posted; posting it now", owed.id, target
            )
            posted = await _post_once(rt, target, owed, late=True)
    return DriftOutcome(target, findings, change, posted)


async def _post_once(rt: ScheduleRuntime, target: str, event: DriftEvent, *, late: bool) -> str | None:
    """Post an event once across replicas (`bot.app.owed_posts.post_once`)."""

    async def remember(ts: str) -> None:
        if event.id is not None:
            await rt.store.run(set_drift_posted, rt.store.store, event.id, ts)

    return await post_once(rt, DRIFT_POST, event.id, _notice(rt, target, event, late=late), remember)


def _notice(rt: ScheduleRuntime, target: str, event: DriftEvent, *, late: bool) -> Notice:
    parts = [item["what"] for item in event.findings]
    if event.resolved:
        parts.append("no longer seen: " + ", ".join(event.resolved))
    late_text = f" ({late_note(event.at)})" if late else ""
    head = f"drift on {target}{'' if event.state == 'drift' else ' resolved'}{late_text}: "
    blocks = tuple(evidence_from_json(block) for item in event.findings for block in item["evidence"])
    return Notice(head + "; ".join(parts), blocks, rt.settings.slack.investigation_channel, None)
