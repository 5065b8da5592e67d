"""`status target=all` and the checks by target: every configured target at a glance, one line each.

Why one use case for the CLI and Slack: a team with ten deployments asks "is everything all
right?" once, not ten times. Each target is read as `status` reads it (SSH, /health, the store),
at most `FLEET_READS` at once so that fifty targets do not open fifty SSH sessions together; a
target that cannot be read is a line saying so (unreachable, not connected, or the error), never
a failed table. The store is read once for the checks of every target, and once per target for
its last experiment (an indexed row, no scan).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.app.context import AppContext
from bot.app.status import TargetStatus, status
from bot.commands import Invocation
from bot.config import Settings
from bot.config.schema import ALL_TARGETS
from bot.store.checks import list_checks
from bot.store.experiments import latest_experiment
from bot.store.loop_models import Experiment
from bot.store.models import utcnow
from bot.store.schedule_models import VerificationCheck
from bot.target.errors import HostKeyError, LocalFileError, UnreachableError
from bot.target.evidence import Evidence, TableBlock

log = logging.getLogger(__name__)

FLEET_READS = 8
"""At most this many targets are read at the same time (each read is one SSH session per node)."""

COLUMNS = ("target", "reachable", "running", "/health", "known-good", "last experiment", "checks")
CHECK_COLUMNS = ("target", "scheduled", "next due", "overdue", "failed", "paused")

StatusReader = Callable[[AppContext, str], Awaitable[TargetStatus]]


def wants_fleet(settings: Settings, invocation: Invocation) -> bool:
    """`target=all`, or no target named while more than one is configured (a fleet of one is
    that target's own `status`, as it always was)."""
    named = invocation.options.get("target")
    if named is not None:
        return named == ALL_TARGETS
    return len(settings.targets) > 1


@dataclass(frozen=True)
class CheckCounts:
    """One target's verification checks, counted from the one list of every check."""

    scheduled: int = 0
    overdue: int = 0
    """Scheduled checks whose due time has passed (the scheduler runs them at its next wake)."""
    failed: int = 0
    """Checks whose last run failed (the change they verify did not hold)."""
    paused: int = 0
    next_due: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "scheduled": self.scheduled,
            "overdue": self.overdue,
            "failed": self.failed,
            "paused": self.paused,
            "next_due": None if self.next_due is None else self.next_due.isoformat(),
        }

    def text(self) -> str:
        parts = [f"{self.scheduled} scheduled"] if self.scheduled else []
        parts += [f"{self.overdue} overdue"] if self.overdue else []
        parts += [f"{self.failed} failed"] if self.failed else []
        return ", ".join(parts) or "none due"


@dataclass(frozen=True)
class FleetRow:
    """One target's line: what could be read of it, and why not when it could not."""

    target: str
    reachable: str
    """`yes`, `unreachable`, `not connected` (flagbot's side: key, known_hosts) or `error`."""
    running: str = "-"
    """Node units active/running out of all nodes, e.g. `2/2 running`."""
    health: int | None = None
    known_good: str = "-"
    """`yes` when node 0 runs the start of the known-good snapshot, `no` when not, `-` when
    no start was ever marked known-good."""
    last_experiment: Experiment | None = None
    checks: CheckCounts = CheckCounts()
    error: str | None = None
    frozen: bool = False

    def last_text(self) -> str:
        row = self.last_experiment
        if row is None:
            return "-"
        verdict = f" {row.verdict}" if row.verdict else ""
        return f"#{row.id} {row.playbook} {row.status}{verdict}"

    def cells(self) -> tuple[str, ...]:
        reachable = self.reachable if self.error is None else f"{self.reachable}: {self.error[:80]}"
        running = self.running + (" (frozen)" if self.frozen else "")
        return (
            self.target,
            reachable,
            running,
            "-" if self.health is None else str(self.health),
            self.known_good,
            self.last_text(),
            self.checks.text(),
        )

    def to_json(self) -> dict[str, Any]:
        row = self.last_experiment
        return {
            "target": self.target,
            "reachable": self.reachable,
            "error": self.error,
            "running": self.running,
            "health": self.health,
            "known_good": self.known_good,
            "frozen": self.frozen,
            "last_experiment": None
            if row is None
            else {"id": row.id, "playbook": row.playbook, "status": row.status, "verdict": row.verdict},
            "checks": self.checks.to_json(),
        }


@dataclass(frozen=True)
class FleetStatus:
    """Every configured target, in config order, one row each."""

    rows: list[FleetRow]

    @property
    def unreachable(self) -> list[str]:
        return [row.target for row in self.rows if row.reachable != "yes"]

    def to_json(self) -> dict[str, Any]:
        return {"targets": [row.to_json() for row in self.rows], "unreachable": self.unreachable}

    def blocks(self) -> list[Evidence]:
        title = f"{len(self.rows)} target{'' if len(self.rows) == 1 else 's'}" + (
            f", {len(self.unreachable)} not reached" if self.unreachable else ""
        )
        return [TableBlock(title, COLUMNS, tuple(row.cells() for row in self.rows))]


def count_checks(
    checks: Sequence[VerificationCheck], targets: Sequence[str], now: datetime
) -> dict[str, CheckCounts]:
    """Each target's checks counted from one list of every check (one store read for the fleet)."""
    by_status: Counter[tuple[str, str]] = Counter()
    overdue: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    next_due: dict[str, datetime] = {}
    for check in checks:
        by_status[(check.target, check.status)] += 1
        if check.last_result == "fail":
            failed[check.target] += 1
        if check.status == "scheduled":
            if check.due_at <= now:
                overdue[check.target] += 1
            if check.target not in next_due or check.due_at < next_due[check.target]:
                next_due[check.target] = check.due_at
    return {
        target: CheckCounts(
            scheduled=by_status[(target, "scheduled")],
            overdue=overdue[target],
            failed=failed[target],
            paused=by_status[(target, "paused")],
            next_due=next_due.get(target),
        )
        for target in targets
    }


def checks_by_target_block(counts: dict[str, CheckCounts]) -> TableBlock:
    """The checks of every target at a glance (`checks` shows it above the list of checks)."""
    rows = tuple(
        (
            target,
            str(c.scheduled),
            "-" if c.next_due is None else c.next_due.strftime("%Y-%m-%d %H:%M"),
            str(c.overdue),
            str(c.failed),
            str(c.paused),
        )
        for target, c in counts.items()
    )
    return TableBlock("Checks by target", CHECK_COLUMNS, rows)


def row_of(found: TargetStatus, last: Experiment | None, checks: CheckCounts) -> FleetRow:
    """A target read: its nodes' units, /health, and whether node 0 runs the known-good start."""
    states = [node.state for node in found.nodes]
    running = sum(1 for s in states if s is not None and (s.active, s.sub) == ("active", "running"))
    reached = [s for s in states if s is not None]
    reachable = "yes" if len(reached) == len(states) else next(n.kind for n in found.nodes if n.state is None)
    latest = found.latest_snapshot
    node0 = found.nodes[0].state if found.nodes else None
    if found.known_good_snapshot_id is None:
        known = "-"
    elif (
        latest is not None
        and latest.id == found.known_good_snapshot_id
        and node0 is not None
        and node0.invocation == latest.invocation_id
    ):
        known = "yes"
    else:
        known = "no"
    return FleetRow(
        target=found.target,
        reachable=reachable,
        running=f"{running}/{len(states)} running",
        health=found.health,
        known_good=known,
        last_experiment=last,
        checks=checks,
        frozen=found.freeze is not None,
        error=None
        if reachable == "yes"
        else "; ".join(n.error or "" for n in found.nodes if n.state is None),
    )


def failed_read_kind(exc: Exception) -> str:
    """How a target whose read failed is shown: `not connected` (a problem on flagbot's side:
    key file, known_hosts, host key), `unreachable` (the network or the node), `error` (else)."""
    if isinstance(exc, LocalFileError | HostKeyError):
        return "not connected"
    if isinstance(exc, UnreachableError | OSError | TimeoutError):
        return "unreachable"
    return "error"


async def fleet_status(
    ctx: AppContext,
    *,
    targets: Sequence[str] | None = None,
    read: StatusReader = status,
    limit: int = FLEET_READS,
) -> FleetStatus:
    """Every target's line (or `targets`', e.g. those a Slack user may view), read concurrently,
    at most `limit` at once; a read that fails is that target's line (logged), the others are
    unaffected."""
    store = ctx.store
    counts = await checks_by_target(ctx)
    gate = asyncio.Semaphore(limit)

    async def one(target: str) -> FleetRow:
        last = await store.run(latest_experiment, store.store, target)
        async with gate:
            try:
                found = await read(ctx, target)
            except Exception as exc:  # one target's failure is its own line, never the table's
                log.info("status of %s for the fleet table: %s", target, exc)
                why = str(exc) or type(exc).__name__
                return FleetRow(
                    target, failed_read_kind(exc), last_experiment=last, checks=counts[target], error=why
                )
        return row_of(found, last, counts[target])

    chosen = list(ctx.settings.targets) if targets is None else list(targets)
    return FleetStatus(list(await asyncio.gather(*(one(target) for target in chosen))))


async def checks_by_target(ctx: AppContext) -> dict[str, CheckCounts]:
    """The checks of every configured target, counted from one read of the store."""
    store = ctx.store
    checks = await store.run(list_checks, store.store, None, limit=100_000)
    return count_checks(checks, list(ctx.settings.targets), utcnow())
