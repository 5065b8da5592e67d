"""Who may change what on a target: the environment allow-list and the protected flags
(`bot/config/change_rules.py`) applied to a command before anything runs.

Why here: the CLI and Slack (a typed command, an `@flagbot` mention, a button, an approved
request) all reach a playbook run through `bot.app.runs.run_playbook`, which checks the changes
it asks for with these functions before the engine starts (so before the preflight's dry run
and before any write). Slack also asks before its acknowledgement, so a refusal is an ephemeral
answer and no thread. What a step plans later (a revert, an isolate probe) is checked again in
the domain, against the unit, right before it is written (`bot.loop.steps.common.check_write`).

Who is an admin: in Slack, a user with the admin role (`slack.rbac.admins`); on the CLI, the
console user (the CLI has no RBAC: whoever runs it on the bot host holds the SSH key, which is
root on the nodes, so the rules that bind admins bind the CLI and no more).
"""

from __future__ import annotations

from bot.app.errors import AppError
from bot.app.playbooks import PlaybookCall, resolve_playbook, runs_playbook
from bot.commands import Invocation
from bot.config import Settings
from bot.config.change_rules import ChangeRules, changes_refusal
from bot.config.schema import TargetPolicy
from bot.sglang.change import Change

CONSOLE_IS_ADMIN = True
"""The CLI acts as an admin (see the module doc); the one place that says so."""


class ChangeRefusedError(AppError):
    """A change the target's policy does not allow this actor (the message names the rule)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, usage=True)


def rules_for(settings: Settings, target: str) -> ChangeRules:
    """The target's rules (the defaults for a target the config does not name)."""
    config = settings.targets.get(target)
    policy = config.policy if config is not None else TargetPolicy()
    return policy.change_rules(target)


def requested_changes(call: PlaybookCall) -> list[Change]:
    """Every change the run's parameters ask for (each parameter of kind `changes`)."""
    return [
        Change.from_json(item)
        for spec in call.book.params
        if spec.kind == "changes"
        for item in call.params.get(spec.name) or []
    ]


def call_refusal(settings: Settings, call: PlaybookCall, *, admin: bool) -> str | None:
    """Why the run may not change what it asks to change, or None."""
    return changes_refusal(rules_for(settings, call.target), requested_changes(call), admin=admin)


def check_call(settings: Settings, call: PlaybookCall, *, admin: bool) -> None:
    """ChangeRefusedError naming the rule when the run asks for a change the target does not allow."""
    why = call_refusal(settings, call, admin=admin)
    if why is not None:
        raise ChangeRefusedError(why)


def invocation_refusal(settings: Settings, invocation: Invocation, *, admin: bool) -> str | None:
    """Why a parsed command may not change what it asks to change (None: it may, or it is no
    playbook run). CommandError when the playbook or its parameters are wrong."""
    if not runs_playbook(invocation):
        return None
    return call_refusal(settings, resolve_playbook(settings, invocation), admin=admin)
