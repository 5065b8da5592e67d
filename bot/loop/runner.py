"""One run of a playbook, step by step: the part of the engine that a fresh run and a resumed
run share.

Why every step is checkpointed before the next starts: the engine may die at any moment (a
node reboot, a deploy of flagbot itself), and the next flagbot must know exactly which step
was in flight and what the earlier ones left in its `RunState`, to resume or roll back correctly.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.loop.actions import StepContext, StopPlaybook, get_action
from bot.loop.lease_guard import HeldLease
from bot.loop.playbook import Playbook, StepSpec
from bot.loop.report import RunOutcome
from bot.store.experiments import (
    cancel_requester,
    finish_step,
    get_experiment,
    list_steps,
    start_step,
    update_experiment,
)
from bot.store.models import utcnow
from bot.store.records import audit, evidence_of
from bot.target.errors import never_reached

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepEnd:
    status: str
    result: dict[str, Any]
    error: str | None = None


class Run:
    """Drives one experiment's steps from `cursor`; `ctx` carries its state between steps."""

    def __init__(self, playbook: Playbook, ctx: StepContext, *, lease: HeldLease | None) -> None:
        self.playbook = playbook
        self.ctx = ctx
        self.lease = lease
        """The target's lease the engine holds for this run (None for a read-only playbook); its
        holder renews it and says when it is lost."""
        self.preface: str | None = None
        """Put before the summary (a resumed run: it was interrupted, so its story says so)."""

    @property
    def store(self) -> Any:
        return self.ctx.store

    async def _db(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await self.store.run(func, self.store.store, *args, **kwargs)

    async def audit(self, action: str, detail: dict[str, Any] | None = None) -> None:
        await self._db(
            audit,
            actor=self.ctx.actor,
            target=self.ctx.target,
            action=action,
            detail=detail,
            experiment_id=self.ctx.experiment_id,
        )

    @property
    def lost(self) -> str | None:
        """Why the lease is no longer ours (None while it is, or when there is none)."""
        if self.lease is None or not self.lease.lost.is_set():
            return None
        return self.lease.lost_reason

    # --- steps ----------------------------------------------------------------------------------

    async def step(self, index: int, spec: StepSpec) -> StepEnd:
        """Start, run and finish one step; the result and state are committed before returning."""
        ctx = self.ctx
        found = get_action(spec.action)
        args = spec.resolve(ctx.params)
        row = await self._db(
            start_step, ctx.experiment_id, index=index, name=spec.name, action=spec.action, args=args
        )
        await ctx.reporter.step(ctx.experiment_id, index, spec.name, "running", "")
        ctx.step_index = index
        end: StepEnd
        try:
            if found is None:  # unregistered since the playbook was loaded
                raise LookupError(f"action {spec.action!r} is not registered")
            result = await found.func(ctx, **args)
            end = StepEnd("ok", _jsonable(result, "result"))
        except StopPlaybook as stop:
            end = StepEnd("stopped", {"stopped": stop.reason})
        except asyncio.CancelledError:
            raise  # the engine itself is stopping: the step stays "running" for reconcile to see
        except Exception as exc:
            end = StepEnd("failed", {}, str(exc) or type(exc).__name__)
            if (
                never_reached(exc)
                and not ctx.state.restart.applied
                and ctx.state.conclusion.not_started is None
            ):
                ctx.state.conclusion.not_started = f"could not connect: {end.error}"
        try:
            state = _jsonable(ctx.state.dump(), "state")
        except ValueError as exc:
            end, state = StepEnd("failed", {}, str(exc)), {}
        await self._db(
            finish_step, row.id, status=end.status, result=end.result, error=end.error, state=state
        )
        detail = end.error or end.result.get("stopped") or end.result.get("summary") or ""
        await ctx.reporter.step(ctx.experiment_id, index, spec.name, end.status, str(detail))
        return end

    async def handlers(self, specs: tuple[StepSpec, ...]) -> bool:
        """Run on_failure / on_cancel steps (all of them, even after one fails); True if one rolled back.

        They are numbered after the playbook's steps, so the step list reads in the order things ran;
        the cursor is put back afterwards to the playbook step where the run ended.
        """
        if not specs:
            return False
        row = await self._db(get_experiment, self.ctx.experiment_id)
        rolled_back = False
        base = max(len(self.playbook.steps), self.ctx.step_index + 1)
        for offset, spec in enumerate(specs):
            end = await self.step(base + offset, spec)
            rolled_back = rolled_back or end.result.get("rolled_back") is True
        await self._db(
            update_experiment, self.ctx.experiment_id, cursor=row.cursor
        )  # where the playbook stopped
        return rolled_back

    async def cancel_requested(self) -> str | None:
        """Who asked this run to stop (one column read at each step boundary, not the whole row)."""
        who: str | None = await self._db(cancel_requester, self.ctx.experiment_id)
        return who

    # --- the run --------------------------------------------------------------------------------

    async def drive(self, cursor: int) -> RunOutcome:
        """Run the steps from `cursor` to the end, a failure, a cancel or a lost lease."""
        status, summary = "succeeded", None
        try:
            status, summary = await self._steps(cursor)
        except asyncio.CancelledError:
            await asyncio.shield(self._stopped_mid_step())
            raise
        return await self.finish(status, summary)

    async def _steps(self, cursor: int) -> tuple[str, str | None]:
        ctx, book = self.ctx, self.playbook
        row = await self._db(get_experiment, ctx.experiment_id)
        started = {} if row is not None and row.started_at is not None else {"started_at": utcnow()}
        await self._db(update_experiment, ctx.experiment_id, status="running", **started)
        for index in range(cursor, len(book.steps)):
            if self.lost is not None:
                return "interrupted", f"stopped before step {index + 1}: {self.lost}"
            who = await self.cancel_requested()
            if who is not None:
                await self.audit("cancel", {"requested_by": who, "before_step": index})
                rolled_back = await self.handlers(book.on_cancel)
                done = "; rolled back" if rolled_back else ""
                return "cancelled", f"cancelled by {who} before step {index + 1}{done}"
            spec = book.steps[index]
            end = await self.step(index, spec)
            if end.status == "stopped":
                return "succeeded", str(end.result["stopped"])
            if end.status == "failed":
                return await self.failed(f"step {index + 1} ({spec.name}) failed: {end.error}")
        return "succeeded", None

    async def failed(self, why: str) -> tuple[str, str]:
        rolled_back = await self.handlers(self.playbook.on_failure)
        return ("rolled-back", f"{why}; rolled back") if rolled_back else ("failed", why)

    async def _stopped_mid_step(self) -> None:
        """The engine is being stopped (Ctrl-C, shutdown): say so on the row; reconcile decides."""
        try:
            await self._db(
                update_experiment,
                self.ctx.experiment_id,
                status="interrupted",
                summary=f"the engine stopped during step {self.ctx.step_index + 1}",
            )
            await self.audit("interrupt", {"step": self.ctx.step_index, "why": "engine stopped"})
        except Exception as exc:  # best effort: reconcile finds a "running" row just as well
            log.warning("could not mark experiment #%s interrupted: %s", self.ctx.experiment_id, exc)

    async def finish(self, status: str, summary: str | None) -> RunOutcome:
        """Write the ending (verdict and summary from state unless the engine has its own) and report it."""
        ctx = self.ctx
        verdict = ctx.state.conclusion.verdict
        summary = summary or ctx.state.conclusion.summary
        if self.preface is not None:
            summary = f"{self.preface}; {summary}" if summary else self.preface
        final = {"status": status, "verdict": None if verdict is None else str(verdict), "summary": summary}
        finished_at = None if status == "interrupted" else utcnow()
        await self._db(update_experiment, ctx.experiment_id, finished_at=finished_at, **final)
        await self.audit("finish", final)
        outcome = await outcome_of(ctx.store, ctx.experiment_id)
        await ctx.reporter.finished(outcome)
        return outcome


async def outcome_of(store: Any, experiment_id: int) -> RunOutcome:
    """The experiment as it stands in the store: row, steps and evidence count."""
    row = await store.run(get_experiment, store.store, experiment_id)
    steps = await store.run(list_steps, store.store, experiment_id)
    evidence = await store.run(evidence_of, store.store, experiment_id)
    return RunOutcome(
        experiment_id=experiment_id,
        playbook=row.playbook,
        target=row.target,
        status=row.status,
        verdict=row.verdict,
        summary=row.summary,
        steps=[
            {
                "index": step.index,
                "name": step.name,
                "action": step.action,
                "status": step.status,
                "error": step.error,
                "result": step.result,
            }
            for step in steps
        ],
        evidence=len(evidence),
    )


def _jsonable(value: Any, what: str) -> dict[str, Any]:
    """Results and state are stored as JSON: refuse anything else as the step's own error."""
    if not isinstance(value, dict):
        raise ValueError(f"the action's {what} must be a dict, got {type(value).__name__}")
    try:
        return dict(json.loads(json.dumps(value)))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the action's {what} is not JSON: {exc}") from None
