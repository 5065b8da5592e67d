"""Test-only actions for the playbook loader and the engine, registered per test and removed after.

Tests use their own actions (not `bot.loop.steps`) so the engine is tested without a target:
each action records what it saw, and some wait on events the test controls, so a test decides
exactly when a step boundary is reached instead of sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from bot.loop.actions import StepContext, StopPlaybook, action, unregister


@dataclass
class Probe:
    """What the test actions saw, and the events they wait on."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    reached: dict[str, asyncio.Event] = field(default_factory=dict)
    resume_answer: dict[str, Any] = field(default_factory=lambda: {"resume": True, "why": "healthy"})
    seen_steps: list[list[tuple[int, str, str]]] = field(default_factory=list)

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def arrived(self, name: str) -> asyncio.Event:
        return self.reached.setdefault(name, asyncio.Event())


NAMES = (
    "t_note",
    "t_fail",
    "t_stop",
    "t_wait",
    "t_check",
    "t_undo",
    "t_change",
    "t_steps_so_far",
    "t_any",
    "t_until_lost",
)


@contextmanager
def registered_actions() -> Iterator[Probe]:
    """Register the t_* actions for one test; they are unregistered however the test ends."""
    probe = Probe()

    @action("t_note", summary="record its arguments, put the label in state.custom and the value as verdict")
    async def t_note(ctx: StepContext, *, label: str = "", value: Any = None) -> dict[str, Any]:
        probe.calls.append(("t_note", {"label": label, "value": value}))
        notes = ctx.state.custom.setdefault("notes", [])
        assert isinstance(notes, list)
        notes.append(label)
        if value is not None:
            ctx.state.conclusion.verdict = str(value)
        return {"label": label, "value": value}

    @action("t_fail", summary="raise with a message")
    async def t_fail(ctx: StepContext, *, message: str = "boom") -> dict[str, Any]:
        probe.calls.append(("t_fail", {"message": message}))
        raise RuntimeError(message)

    @action("t_stop", summary="end the playbook early")
    async def t_stop(ctx: StepContext, *, reason: str) -> dict[str, Any]:
        probe.calls.append(("t_stop", {"reason": reason}))
        raise StopPlaybook(reason)

    @action("t_wait", summary="signal arrival, then wait for the test to open its gate")
    async def t_wait(ctx: StepContext, *, gate: str) -> dict[str, Any]:
        probe.calls.append(("t_wait", {"gate": gate}))
        probe.arrived(gate).set()
        await probe.gate(gate).wait()
        return {"gate": gate}

    @action("t_until_lost", summary="signal arrival, then wait until the engine says the lease is gone")
    async def t_until_lost(ctx: StepContext) -> dict[str, Any]:
        probe.arrived("lost").set()
        await ctx.lease_lost.wait()
        return {}

    @action("t_check", summary="the interrupt check: answer what the test set")
    async def t_check(ctx: StepContext) -> dict[str, Any]:
        probe.calls.append(("t_check", {"state": ctx.state.model_copy(deep=True)}))
        return dict(probe.resume_answer)

    @action("t_undo", summary="an on_failure/on_cancel step", mutating=True)
    async def t_undo(ctx: StepContext, *, rolled_back: bool = True) -> dict[str, Any]:
        probe.calls.append(("t_undo", {}))
        return {"rolled_back": rolled_back}

    @action("t_change", summary="a step that changes the target", mutating=True)
    async def t_change(ctx: StepContext, *, changes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        probe.calls.append(("t_change", {"changes": changes}))
        ctx.state.custom["changed"] = True
        return {"changes": changes or []}

    @action("t_steps_so_far", summary="read the store: which steps are recorded before this one runs")
    async def t_steps_so_far(ctx: StepContext) -> dict[str, Any]:
        from bot.store.experiments import list_steps

        steps = await ctx.store.run(list_steps, ctx.store.store, ctx.experiment_id)
        probe.seen_steps.append([(step.index, step.action, step.status) for step in steps])
        return {"seen": len(steps)}

    @action("t_any", summary="takes any argument")
    async def t_any(ctx: StepContext, **kwargs: Any) -> dict[str, Any]:
        return dict(kwargs)

    try:
        yield probe
    finally:
        for name in NAMES:
            unregister(name)


# A mutating playbook that stops at gate `g` (the engine can be killed or cancelled there) and
# whose interrupt check answers `Probe.resume_answer`: the engine and startup tests reconcile it.
CRASHY = """
mutating: true
steps:
  - {action: t_note, with: {label: a}}
  - {action: t_wait, with: {gate: g}}
  - {action: t_note, with: {label: b, value: improved}}
on_failure:
  - {action: t_undo}
on_interrupt: t_check
"""
