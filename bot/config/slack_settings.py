"""The `[slack]` section and the role lists: who may do what, by Slack id, globally and per target.

Why its own module: roles are the security contract of the Slack front end (docs/slack.md, RBAC),
read by `bot.slack.rbac`; the principals' rule (ids only, never display names) lives once, here.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from bot.config.section_base import Strict

_SLACK_ID = re.compile(r"^[UWS][A-Z0-9]+$")
_MENTION = re.compile(r"^<[@!]?(?:subteam\^)?([UWS][A-Z0-9]+)(?:\|[^>]*)?>$")


def _slack_principal(value: str) -> str:
    """A Slack user id (`U…`, `W…`), a user-group id (`S…`) or `"*"`: never a display name,
    which anyone can change to impersonate someone else."""
    if value == "*" or _SLACK_ID.match(value):
        return value
    mention = _MENTION.match(value.strip())
    if mention:
        raise ValueError(f"write the bare id {mention.group(1)!r}, not the mention syntax")
    if value[:1] in ("C", "G", "D") and value[1:].isalnum() and value[1:].upper() == value[1:]:
        raise ValueError("that is a channel id; use a user id (U…/W…) or a user-group id (S…)")
    raise ValueError(
        "not a Slack user or user-group id: use the user id, e.g. U012ABCDEF (profile, ⋮, "
        'Copy member ID), a user-group id (S…) or "*"; display names are never accepted'
    )


SlackPrincipal = Annotated[str, AfterValidator(_slack_principal)]


class SlackRBAC(Strict):
    """Slack user ids (`U…`/`W…`) or user-group ids (`S…`) per role; `"*"` is everyone.

    viewers run read-only commands, operators mutating ones, approvers approve a production
    restart someone else requested, admins everything (docs/slack.md, RBAC contract).
    """

    admins: list[SlackPrincipal] = Field(default_factory=list)
    operators: list[SlackPrincipal] = Field(default_factory=list)
    approvers: list[SlackPrincipal] = Field(default_factory=list)
    viewers: list[SlackPrincipal] = Field(default_factory=lambda: ["*"])

    def group_ids(self) -> set[str]:
        """Every user-group id named in any role (resolved with `usergroups.users.list`)."""
        return {
            entry
            for entries in (self.admins, self.operators, self.approvers, self.viewers)
            for entry in entries
            if entry.startswith("S")
        }


class TargetRBAC(Strict):
    """A target's own role lists; a list left out (None) is `[slack.rbac]`'s.

    A list given *replaces* the global one for this target rather than adding to it: whoever
    reads `[targets.NAME.rbac] operators` sees every operator of that target, and a global
    operator does not keep rights on a team's target by being forgotten there. An empty list
    (`operators = []`) means nobody in that role on this target (admins still imply it, unless
    `admins` is replaced too).
    """

    admins: list[SlackPrincipal] | None = None
    operators: list[SlackPrincipal] | None = None
    approvers: list[SlackPrincipal] | None = None
    viewers: list[SlackPrincipal] | None = None

    def group_ids(self) -> set[str]:
        """Every user-group id this target's own lists name."""
        return {
            entry
            for entries in (self.admins, self.operators, self.approvers, self.viewers)
            for entry in entries or ()
            if entry.startswith("S")
        }


class SlackSettings(Strict):
    channels: list[str] = Field(default_factory=list, description="channels flagbot answers in; empty: any")
    investigation_channel: str | None = None
    rbac: SlackRBAC = SlackRBAC()
    """Roles by Slack user id and user-group id (bot.slack.rbac)."""
    read_commands_per_minute: int = Field(default=10, ge=1, le=10_000)
    """Read-only commands one Slack user may run in any 60 s; more are refused in the ack
    (`help` does not count; bot.slack.rate_limit)."""

    @model_validator(mode="before")
    @classmethod
    def _confirm_mutating_removed(cls, data: object) -> object:
        """`confirm_mutating` was never read: a config that sets it believes restarts are confirmed.
        Refused with where the setting lives, rather than ignored (a silent no-op on a safety switch)."""
        if isinstance(data, dict) and "confirm_mutating" in data:
            raise ValueError(
                "confirm_mutating is no longer a setting (it never had an effect): a restart from Slack "
                "waits for the requester's confirmation click per target, with "
                "[targets.NAME.policy] confirm_restart = true; delete confirm_mutating from [slack]"
            )
        return data


__all__ = ["SlackPrincipal", "SlackRBAC", "SlackSettings", "TargetRBAC"]
