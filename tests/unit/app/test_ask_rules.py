"""`policy.on_regression = "ask"`: the timeout rule (`bot.app.ask.due_action`: the default is due
only past the deadline of a question still pending) and the two settings' validation."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from bot.app.ask import due_action
from bot.config.schema import TargetPolicy
from bot.store.loop_models import Experiment
from tests.support.pending_decision import ASKED_AT, pending_state

DEADLINE = ASKED_AT + timedelta(minutes=30)


def asked(*, kept: bool | None = None, default: str = "revert", deadline: Any = DEADLINE) -> Experiment:
    state = pending_state(deadline, default)
    conclusion = state["conclusion"]
    assert isinstance(conclusion, dict)
    if kept is not None:
        conclusion["kept"] = kept
    return Experiment(
        id=7,
        target="lab",
        playbook="try",
        params={},
        actor="x",
        status="succeeded",
        verdict="regressed",
        state=state,
    )


@pytest.mark.parametrize("default", ["revert", "keep"])
def test_past_the_deadline_the_default_is_due(default: str) -> None:
    assert due_action(asked(default=default), DEADLINE) == default
    assert due_action(asked(default=default), DEADLINE + timedelta(days=3)) == default


def test_before_the_deadline_nothing_is_due() -> None:
    assert due_action(asked(), DEADLINE - timedelta(seconds=1)) is None


@pytest.mark.parametrize("kept", [True, False])
def test_an_answered_question_has_nothing_due(kept: bool) -> None:
    assert due_action(asked(kept=kept), DEADLINE + timedelta(hours=1)) is None


def test_a_run_that_asked_nothing_has_nothing_due() -> None:
    assert due_action(asked(deadline=None), DEADLINE + timedelta(hours=1)) is None


def test_the_settings_default_and_bounds() -> None:
    policy = TargetPolicy()
    assert (policy.ask_timeout, policy.ask_default) == (timedelta(minutes=30), "revert")
    assert TargetPolicy.model_validate({"ask_timeout": "24h", "ask_default": "keep"}).ask_default == "keep"
    for bad in ("0s", "30s", "25h"):
        with pytest.raises(ValidationError, match="ask_timeout must be between 1m and 24h"):
            TargetPolicy.model_validate({"ask_timeout": bad})
    with pytest.raises(ValidationError, match="ask_default"):
        TargetPolicy.model_validate({"ask_default": "ignore"})
