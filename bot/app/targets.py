"""Which configured target a command acts on: written once for the CLI, Slack and the scheduler."""

from __future__ import annotations

from bot.commands import CommandError, Invocation
from bot.config import Settings


class UnknownTargetError(CommandError):
    """No target given and no default, or a name flagbot.toml does not define."""


def resolve_target(settings: Settings, name: str | None) -> str:
    """`name`, else `default_target`; UnknownTargetError naming the configured ones."""
    chosen = name or settings.default_target
    if chosen is None:
        raise UnknownTargetError("no target: give target=NAME or set default_target in flagbot.toml")
    if chosen not in settings.targets:
        known = ", ".join(sorted(settings.targets)) or "none"
        raise UnknownTargetError(f"unknown target {chosen!r}; targets: {known}")
    return chosen


def requested_target(settings: Settings, invocation: Invocation) -> str:
    """The target a command names (`target=`, else the default), not checked: "" when neither.
    For what must not fail on an unknown target (RBAC's policy lookup, the audit line)."""
    return invocation.options.get("target") or settings.default_target or ""


def target_of(settings: Settings, invocation: Invocation) -> str:
    """The command's `target=`, else the default target."""
    return resolve_target(settings, invocation.options.get("target"))
