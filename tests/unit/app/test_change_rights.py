"""The application layer's use of the change rules (bot/app/change_rights.py): which commands
they apply to, which target's policy, and the error a front end gets."""

from __future__ import annotations

import pytest

from bot.app.change_rights import (
    CONSOLE_IS_ADMIN,
    ChangeRefusedError,
    check_call,
    invocation_refusal,
    rules_for,
)
from bot.app.playbooks import resolve_playbook
from bot.commands import parse_command
from bot.config import Settings

SETTINGS = Settings.model_validate(
    {
        "default_target": "dev",
        "targets": {
            "dev": {"unit": "sglang.service", "nodes": [{"host": "127.0.0.1", "port": 9}]},
            "prod": {
                "unit": "sglang.service",
                "nodes": [{"host": "127.0.0.1", "port": 9}],
                "policy": {"protected_flags_mode": "refuse", "env_allow": ["NCCL_*"]},
            },
        },
    }
)


def refusal(text: str, *, admin: bool) -> str | None:
    return invocation_refusal(SETTINGS, parse_command(text), admin=admin)


def test_try_its_dry_run_and_run_of_a_builtin_are_checked_with_the_target_s_policy() -> None:
    for text in (
        "try add --model-path /m",
        "try dry-run=yes add --model-path /m",
        'run try "changes=add --model-path /m"',
    ):
        why = refusal(text, admin=False)
        assert why is not None and "protected flag of target dev" in why, text
        assert refusal(text, admin=True) is None, text
        why = refusal(text + " target=prod", admin=True)
        assert why is not None and 'protected_flags_mode = "refuse"' in why, text
    assert refusal("try env set TORCH_NCCL_BLOCKING_WAIT=1", admin=False) is None
    why = refusal("try env set TORCH_NCCL_BLOCKING_WAIT=1 target=prod", admin=False)
    assert why is not None and "not in policy.env_allow of target prod (NCCL_*)" in why


@pytest.mark.parametrize(
    "text", ["status", "observe", "revert", "verify max_running_requests>=1", "baseline pin", "rollback"]
)
def test_commands_that_ask_for_no_change_are_not_refused_up_front(text: str) -> None:
    assert refusal(text, admin=False) is None


def test_check_call_raises_a_usage_error_naming_the_rule() -> None:
    call = resolve_playbook(SETTINGS, parse_command("try env set LD_PRELOAD=/x.so"))
    with pytest.raises(ChangeRefusedError) as raised:
        check_call(SETTINGS, call, admin=CONSOLE_IS_ADMIN)
    assert raised.value.usage and raised.value.exit_code == 2
    assert raised.value.message.startswith("LD_PRELOAD changes how a process starts")


def test_an_unnamed_target_gets_the_default_rules() -> None:
    rules = rules_for(SETTINGS, "elsewhere")
    assert rules.target == "elsewhere" and rules.protected_flags_mode == "admin"
    assert "--model-path" in rules.protected_flags
