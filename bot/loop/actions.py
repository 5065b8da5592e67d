"""The registry of step actions: the Python functions a playbook's steps name.

Why a registry with signatures: a playbook is written by an operator in YAML, and a typo in
an action name or an argument must be refused when the playbook is loaded, not fifteen
minutes into an experiment after the server was restarted. So each action's keyword
arguments are read from its signature once, at registration.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.store.experiments import get_experiment
from bot.store.records import add_evidence

if TYPE_CHECKING:
    from bot.config import Settings
    from bot.loop.report import Reporter
    from bot.loop.run_state import RunState
    from bot.store import AsyncStore
    from bot.target.evidence import Evidence
    from bot.target.session import TargetSession

ActionFunc = Callable[..., Awaitable[dict[str, Any]]]
BUILTIN_STEPS = "bot.loop.steps"


class StopPlaybook(Exception):  # noqa: N818 (a signal, not an error: the playbook ends successfully)
    """Raised by an action to end the playbook early and successfully; `reason` becomes the summary."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Action:
    """One registered action and what its signature accepts."""

    name: str
    summary: str
    mutating: bool
    func: ActionFunc
    arguments: tuple[str, ...]
    """Keyword arguments a step's `with:` may give."""
    required: frozenset[str]
    """Arguments without a default: a step must give them."""
    open_ended: bool = False
    """The function takes `**kwargs`: any `with:` key is accepted."""

    def accepts(self, key: str) -> bool:
        return self.open_ended or key in self.arguments


_REGISTRY: dict[str, Action] = {}


def _signature(name: str, func: ActionFunc) -> tuple[tuple[str, ...], frozenset[str], bool]:
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"action {name!r}: {func.__qualname__} must be `async def`")
    params = list(inspect.signature(func).parameters.values())
    if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
        raise TypeError(f"action {name!r}: the first parameter must be the StepContext")
    arguments: list[str] = []
    required: set[str] = set()
    open_ended = False
    for param in params[1:]:
        if param.kind is param.VAR_KEYWORD:
            open_ended = True
        elif param.kind in (param.KEYWORD_ONLY, param.POSITIONAL_OR_KEYWORD):
            arguments.append(param.name)
            if param.default is param.empty:
                required.add(param.name)
        else:
            raise TypeError(f"action {name!r}: argument {param.name!r} must be passable by keyword")
    return tuple(arguments), frozenset(required), open_ended


def action(name: str, *, summary: str, mutating: bool = False) -> Callable[[ActionFunc], ActionFunc]:
    """Register `async def f(ctx, *, arg=...) -> dict` as the action `name` (the function is returned as is)."""

    def register(func: ActionFunc) -> ActionFunc:
        arguments, required, open_ended = _signature(name, func)
        known = _REGISTRY.get(name)
        if known is not None and known.func.__qualname__ != func.__qualname__:
            raise ValueError(f"action {name!r} is already registered by {known.func.__module__}")
        _REGISTRY[name] = Action(name, summary, mutating, func, arguments, required, open_ended)
        return func

    return register


def unregister(name: str) -> None:
    """Remove an action (tests register their own and take them away afterwards)."""
    _REGISTRY.pop(name, None)


def get_action(name: str) -> Action | None:
    return _REGISTRY.get(name)


def all_actions() -> list[Action]:
    return sorted(_REGISTRY.values(), key=lambda item: item.name)


def ensure_builtin_actions() -> None:
    """Import the domain actions (`bot.loop.steps`), which register themselves on import.

    Only a missing `bot.loop.steps` itself is tolerated (tests run the engine with actions of
    their own); a missing module *inside* it is a real error and propagates.
    """
    try:
        importlib.import_module(BUILTIN_STEPS)
    except ModuleNotFoundError as exc:
        if exc.name != BUILTIN_STEPS:
            raise


@dataclass
class StepContext:
    """What an action gets: the experiment, the target, the store, and the run's state.

    `state` (a `RunState`: typed records, bot/loop/run_state.py) is stored with every step's
    result, so a run resumed after a crash sees what the earlier steps put there. `ts` is None when the target is not configured (tests, playbooks
    that never touch a target); `session()` says so clearly instead of an AttributeError.
    """

    experiment_id: int
    target: str
    ts: TargetSession | None
    store: AsyncStore
    settings: Settings
    params: dict[str, Any]
    state: RunState
    reporter: Reporter
    actor: str
    cache_dir: Path
    playbook: str
    step_index: int = 0
    hypothesis_id: int | None = None
    investigation_id: int | None = None
    admin: bool = False
    """Whether `actor` is an admin (the target's change rules: protected flags, environment)."""
    lease_lost: asyncio.Event = field(default_factory=asyncio.Event)
    """Set by the engine's heartbeat when the lease is gone: a long action (a benchmark) can stop early."""

    def session(self) -> TargetSession:
        if self.ts is None:
            raise RuntimeError(
                f"this step needs a session to target {self.target!r}, which is not configured"
            )
        return self.ts

    async def emit(self, block: Evidence) -> None:
        """Store the block with the experiment, then show it (stored first: a crash keeps it)."""
        title = getattr(block, "title", "") or ""
        await self.store.run(
            add_evidence,
            self.store.store,
            target=self.target,
            kind=block.kind,
            title=title,
            data=block.to_json(),
            experiment_id=self.experiment_id,
            investigation_id=self.investigation_id,
            step_index=self.step_index,
        )
        await self.reporter.evidence(block, self.experiment_id)

    async def cancelled(self) -> bool:
        """Whether someone asked to cancel this experiment (long actions poll it to stop early)."""
        row = await self.store.run(get_experiment, self.store.store, self.experiment_id)
        return row is not None and row.cancel_requested_by is not None
