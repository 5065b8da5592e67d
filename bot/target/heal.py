"""Heal a diverged target: once every node answers again, reconcile it and wait until it serves.

Why here and not only in `restart.reconcile`: reconciling rewrites the drop-ins and restarts the
ranks, but a target is only back when the new start is ready and observed (or rolled back when
it is not). Every mutating command calls `heal_if_diverged` first, and `flagbot reconcile`
calls it on demand, so a node lost mid-restart is brought back as soon as anyone acts on the
target, never silently left on other flags than its peers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bot.target.errors import TargetError
from bot.target.evidence import Evidence, TextBlock
from bot.target.readiness import Progress
from bot.target.restart import RestartReport, reconcile
from bot.target.rollback import StartOutcome, drain_notes, ensure_ready
from bot.target.session import TargetSession


class HealApprovalError(TargetError):
    """A diverged target whose policy has `require_approval`, healed by a run nobody approved to
    restart it (a `verify`, a `baseline pin`): refused, nothing restarted."""

    def __init__(self, target: str, nodes: list[str], reason: str | None) -> None:
        super().__init__(
            f"target {target} is diverged ({', '.join(nodes) or '?'}: {reason or 'reason not recorded'}); "
            f"healing it restarts every rank, and {target}'s policy has require_approval, which this "
            f"command did not go through: run `reconcile target={target}` (it asks an approver), "
            "then this command again"
        )
        self.target = target


@dataclass
class HealResult:
    """What reconciling a diverged target did: the restart, then the start awaited."""

    target: str
    nodes: list[str]
    reason: str | None
    restart: RestartReport
    start: StartOutcome
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        observation = self.start.observation
        return observation is not None and observation.healthy

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "ok": self.ok,
            "diverged_nodes": self.nodes,
            "diverged_reason": self.reason,
            "restart": {"phase": self.restart.phase, "nodes": [n.__dict__ for n in self.restart.nodes]},
            "start": self.start.to_json(),
            "evidence": [block.to_json() for block in self.evidence],
        }


async def heal_if_diverged(
    ts: TargetSession,
    *,
    cache_dir: Path | None = None,
    client: httpx.AsyncClient | None = None,
    timeout: float | None = None,
    on_progress: Progress | None = None,
    restart_approved: bool = True,
) -> HealResult | None:
    """None when the target is not diverged; else reconcile, wait ready, observe (or roll back).

    Reconciling restarts the target: on a target whose policy has `require_approval` it is done
    only for a run whose restart was approved (`restart_approved`); otherwise `HealApprovalError`,
    and nothing is touched.

    A node still unreachable raises `RestartError` from `reconcile`: the target stays diverged
    and the caller's command is refused with that message. The reconciled start is observed
    without becoming known-good: the flags flagbot meant may belong to an experiment whose
    verdict is still open.
    """
    divergence = await ts.ledger.divergence()
    if divergence is None:
        return None
    if ts.target.policy.require_approval and not restart_approved:
        raise HealApprovalError(ts.name, divergence.nodes, divergence.reason)
    report = await reconcile(ts)
    previous = {node.node: node.old_invocation for node in report.nodes}
    start = await ensure_ready(
        ts,
        previous=previous,
        timeout=timeout,
        cache_dir=cache_dir,
        client=client,
        on_progress=on_progress,
        promote=False,
    )
    result = HealResult(ts.name, divergence.nodes, divergence.reason, report, start)
    result.evidence.append(TextBlock(_describe(result), "Reconciled"))
    if start.observation is not None:
        result.evidence.extend(start.observation.evidence)
    if start.rollback is not None:
        result.evidence.extend(start.rollback.evidence)
    return result


def _describe(result: HealResult) -> str:
    nodes = ", ".join(result.nodes)
    head = f"{result.target} was diverged ({nodes}: {result.reason or 'reason not recorded'})"
    if result.ok:
        obs = result.start.observation
        capacity = obs.effective.get("max_running_requests") if obs else None
        traffic = f"\n{result.start.traffic}" if result.start.traffic else ""
        return (
            f"{head}; every node now has the drop-in flagbot meant, the ranks were restarted together "
            f"and the server is ready (max_running_requests {capacity}).{drain_notes(result.restart)}{traffic}"
        )
    if result.start.rollback is not None:
        return f"{head}; the reconciled start did not become ready, so it was rolled back: " + (
            "healthy again" if result.start.rollback.ok else "the rollback did not bring it back either"
        )
    failure = result.start.readiness.failure
    return f"{head}; the reconciled start did not become ready: {failure.message if failure else 'unknown'}"
