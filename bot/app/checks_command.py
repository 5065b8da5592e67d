"""`checks [list|pause ID|resume ID|run ID|delete ID]` for the CLI and Slack, one implementation.

The store's `verification_check` table is what these change; when this process runs the
scheduler (the bot), its jobs follow at once, otherwise the bot's scheduler picks the change up
at its next sync (`SYNC_INTERVAL_S`) or start. A scheduled run also re-reads the check's status
before it looks at the target, so a paused or deleted check never runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.app.checks import CheckOutcome, after_text, run_check
from bot.app.context import AppContext
from bot.app.fleet import CheckCounts, checks_by_target, checks_by_target_block
from bot.app.notify import Notifier
from bot.app.runtime import ScheduleRuntime, active
from bot.commands import Invocation
from bot.loop import check_jobs
from bot.store import AsyncStore
from bot.store.checks import delete_check, get_check, list_checks, set_check_status
from bot.store.records import audit
from bot.store.schedule_models import VerificationCheck
from bot.target.evidence import Evidence, TableBlock, TextBlock

__all__ = ["ChecksAnswer", "check_row", "checks_command", "run_checks_command"]

COLUMNS = ("id", "target", "experiment", "after", "status", "next run", "last result", "last run", "runs")


@dataclass
class ChecksAnswer:
    """What a `checks` command did: lines to show, the table, and the JSON document."""

    ok: bool
    lines: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    outcome: CheckOutcome | None = None
    by_target: dict[str, CheckCounts] = field(default_factory=dict)
    """`checks list` with several targets configured: each target's counts, one line each."""

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "lines": self.lines,
            "checks": self.rows,
            "run": self.outcome.to_json() if self.outcome else None,
            "by_target": {target: counts.to_json() for target, counts in self.by_target.items()},
        }

    def blocks(self) -> list[Evidence]:
        out: list[Evidence] = [checks_by_target_block(self.by_target)] if self.by_target else []
        out += [TextBlock(line) for line in self.lines]
        if self.rows:
            out.append(TableBlock("Verification checks", COLUMNS, tuple(_cells(row) for row in self.rows)))
        if self.outcome is not None:
            out.extend(self.outcome.blocks)
        return out


def _when(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value is not None else None


def check_row(check: VerificationCheck, next_run: datetime | None) -> dict[str, Any]:
    return {
        "id": check.id,
        "target": check.target,
        "experiment_id": check.experiment_id,
        "after": after_text(check.after_s),
        "status": check.status,
        "next_run": next_run.isoformat() if next_run else None,
        "last_result": check.last_result,
        "last_summary": check.last_summary,
        "last_run": check.last_run_at.isoformat() if check.last_run_at else None,
        "runs": check.runs,
        "thread": {"channel": check.channel, "ts": check.thread_ts} if check.thread_ts else None,
    }


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    last = row["last_result"] or "-"
    if row["last_summary"] and row["last_result"]:
        last = f"{last}: {row['last_summary'][:80]}"
    return (
        f"#{row['id']}",
        row["target"],
        f"#{row['experiment_id']}" if row["experiment_id"] else "-",
        row["after"],
        row["status"],
        (row["next_run"] or "-")[:16].replace("T", " "),
        last,
        (row["last_run"] or "-")[:16].replace("T", " "),
        str(row["runs"]),
    )


def _next_run(check: VerificationCheck) -> datetime | None:
    """The job's next run when this process schedules it, else the check's due time."""
    if check.status != "scheduled":
        return None
    jobs = check_jobs.active()
    if jobs is not None and check.id is not None:
        found = jobs.next_run(check.id)
        if found is not None:
            return found
    return check.due_at


async def _follow() -> None:
    """When this process runs the scheduler, its jobs follow the change at once."""
    jobs = check_jobs.active()
    if jobs is not None:
        await jobs.sync()


async def run_checks_command(
    astore: AsyncStore,
    sub: str,
    check_id: int | None,
    *,
    actor: str,
    runtime: ScheduleRuntime,
) -> ChecksAnswer:
    """Do `checks SUB [ID]`; LookupError for an unknown check, ValueError for one in the wrong state."""
    store = astore.store
    if sub == "list":
        checks = await astore.run(list_checks, store)
        rows = [check_row(check, _next_run(check)) for check in checks]
        lines = [] if rows else ["no verification checks yet: a try or a revert schedules them"]
        return ChecksAnswer(True, lines, rows)
    assert check_id is not None
    check = await astore.run(get_check, store, check_id)
    if check is None:
        raise LookupError(f"no check #{check_id}")
    if sub == "run":
        outcome = await run_check(runtime, check_id, trigger="manual")
        assert outcome is not None
        await _audit(astore, actor, check, "check-run", {"result": outcome.recorded.run.result})
        run = outcome.recorded.run
        line = f"check #{check_id}: {run.result}: {run.summary}"
        if outcome.recorded.changed:
            line += f" (state {outcome.recorded.previous} -> {outcome.recorded.state})"
        return ChecksAnswer(run.result in ("pass", "fail"), [line], [], outcome)
    if sub == "delete":
        await astore.run(delete_check, store, check_id)
        await _audit(astore, actor, check, "check-delete", {})
        await _follow()
        return ChecksAnswer(True, [f"check #{check_id} deleted (with its {check.runs} recorded run(s))"])
    if check.status == "done":
        raise ValueError(f"check #{check_id} has already run; `checks run {check_id}` runs it again now")
    status = {"pause": "paused", "resume": "scheduled"}[sub]
    if check.status == status:
        return ChecksAnswer(True, [f"check #{check_id} is already {status}"])
    updated = await astore.run(set_check_status, store, check_id, status)
    await _audit(astore, actor, check, f"check-{sub}", {})
    await _follow()
    due = _when(updated.due_at) if status == "scheduled" else None
    tail = f"; it runs at {due} (at once if that has passed)" if due else "; it will not run until resumed"
    return ChecksAnswer(True, [f"check #{check_id} {status}{tail}"])


async def _audit(
    astore: AsyncStore, actor: str, check: VerificationCheck, action: str, detail: dict[str, Any]
) -> None:
    await astore.run(
        audit,
        astore.store,
        actor=actor,
        target=check.target,
        action=action,
        detail={"check_id": check.id, **detail},
        experiment_id=check.experiment_id,
    )


async def checks_command(
    ctx: AppContext, invocation: Invocation, *, actor: str, notifier: Notifier
) -> ChecksAnswer:
    """`checks [list|pause ID|resume ID|run ID|delete ID]` from any front end. `run` runs the
    check in this process now, with the scheduler's runtime when this process runs one (its
    change of state is then posted by the bot), else with `notifier`. LookupError for an unknown
    check, ValueError for one in the wrong state."""
    runtime = active() or ScheduleRuntime(
        ctx.settings, ctx.store, notifier, lease_ttl_s=ctx.lease_ttl_s, cache_dir=ctx.cache_dir
    )
    raw = invocation.positionals.get("id")
    check_id = int(str(raw)) if raw is not None else None
    sub = invocation.sub or "list"
    answer = await run_checks_command(ctx.store, sub, check_id, actor=actor, runtime=runtime)
    if sub == "list" and len(ctx.settings.targets) > 1:  # the fleet at a glance, above the list
        answer.by_target = await checks_by_target(ctx)
    return answer
