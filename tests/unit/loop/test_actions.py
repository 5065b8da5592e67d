"""The action registry: signatures are read at registration, so playbooks can be checked at load."""

from __future__ import annotations

from typing import Any

import pytest

from bot.loop import actions
from bot.loop.actions import StepContext, action, all_actions, ensure_builtin_actions, get_action, unregister
from tests.support.loop_actions import Probe


def test_arguments_and_required_ones_come_from_the_signature(probe: Probe) -> None:
    note = get_action("t_note")
    assert note is not None
    assert note.arguments == ("label", "value") and note.required == frozenset()
    assert not note.accepts("other") and not note.mutating
    stop = get_action("t_stop")
    assert stop is not None and stop.required == frozenset({"reason"})
    undo = get_action("t_undo")
    assert undo is not None and undo.mutating
    any_ = get_action("t_any")
    assert any_ is not None and any_.accepts("anything")
    assert {"t_note", "t_stop"} <= {item.name for item in all_actions()}


def test_unregister_removes_an_action(probe: Probe) -> None:
    unregister("t_any")
    assert get_action("t_any") is None


def test_a_sync_function_is_refused() -> None:
    def sync(ctx: StepContext) -> dict[str, Any]:
        return {}

    with pytest.raises(TypeError, match="must be `async def`"):
        action("t_sync", summary="")(sync)  # type: ignore[arg-type]
    assert get_action("t_sync") is None


def test_positional_only_arguments_are_refused() -> None:
    async def positional(ctx: StepContext, *args: int) -> dict[str, Any]:
        return {}

    with pytest.raises(TypeError, match="argument 'args' must be passable by keyword"):
        action("t_pos", summary="")(positional)


def test_a_second_function_under_a_taken_name_is_refused(probe: Probe) -> None:
    async def other(ctx: StepContext) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match="action 't_note' is already registered"):
        action("t_note", summary="")(other)


def test_a_missing_steps_package_is_tolerated_but_a_broken_one_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(actions, "BUILTIN_STEPS", "bot.loop.no_such_steps")
    ensure_builtin_actions()
    monkeypatch.setattr(actions, "BUILTIN_STEPS", "tests.support.loop_broken_steps")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency"):
        ensure_builtin_actions()
