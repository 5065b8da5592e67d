"""Who may do what in Slack: roles by Slack user id and user-group id, decisions by risk tier.

Roles come from `[slack.rbac]` (ids only: a display name can be changed by its owner to anyone
else's, an id cannot), and for one target from its own `[targets.NAME.rbac]`, whose lists
replace the global ones on that target (`role_table`): team A operates its targets only. Every
decision about a target is taken with that target's table, and a refusal names the target and
the list to be added to. The tier of a command comes from the one registry
(`Invocation.tier`, which includes the subcommand), so a new command is covered the day it is
registered:

- viewer: read-only commands; operator: mutating commands (implies viewer);
- approver: approves a production restart someone *else* requested, never their own;
- admin: everything (implies the other three); only an admin may `baseline pin|set`,
  `checks delete`, `unfreeze` (an operator may `freeze`), `cancel` someone else's run, or use `force=` / `keep=always` on a
  production target (one whose policy has `require_approval = true`).

A restart of a production target needs an approval (`needs="approval"`, for admins too: four
eyes), and so does a dry run there (`try ... dry-run=yes`: the preflight runs SGLang's own
argument code on node 0); a restart of a target with `confirm_restart = true` the requester's own
click (`needs="confirmation"`). A command that runs a playbook is decided by what the playbook's
steps do (`PlaybookEffects`: restarts, runs the dry run, pins the baseline, forces the write),
so `run NAME` needs what the command behind it needs. Every decision, allowed or refused, is written to the audit trail
with `audit_decision`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from bot.app.playbooks import PlaybookEffects
from bot.commands.grammar import Invocation
from bot.config import Settings
from bot.config.schema import TargetPolicy
from bot.config.slack_settings import SlackRBAC
from bot.store import AsyncStore
from bot.store.loop_models import AuditEvent
from bot.store.records import audit

log = logging.getLogger(__name__)

Role = Literal["viewer", "operator", "approver", "admin"]
Needs = Literal["none", "confirmation", "approval"]

ROLES: tuple[Role, ...] = ("viewer", "operator", "approver", "admin")
_IMPLIES: dict[Role, frozenset[Role]] = {
    "admin": frozenset({"admin", "approver", "operator", "viewer"}),
    "operator": frozenset({"operator", "viewer"}),
    "approver": frozenset({"approver"}),
    "viewer": frozenset({"viewer"}),
}
_LIST_OF: dict[Role, str] = {
    "viewer": "viewers",
    "operator": "operators",
    "approver": "approvers",
    "admin": "admins",
}

RESTARTS = frozenset({"try", "revert", "isolate", "run", "rollback", "reconcile", "restart"})
"""Commands that restart the target (so a production target's approval applies). `cancel` is
left out on purpose: stopping a run must never wait for a second person."""

ADMIN_SUBS: frozenset[tuple[str, str | None]] = frozenset(
    {("baseline", "pin"), ("baseline", "set"), ("checks", "delete"), ("unfreeze", None)}
)
_ADMIN_WHY = {
    ("baseline", "pin"): "replaces the target's baseline",
    ("baseline", "set"): "replaces the target's baseline",
    ("checks", "delete"): "deletes a scheduled check",
    ("unfreeze", ""): "lifts a change freeze someone declared",
}
_OFF = frozenset({"no", "false", "0", "off"})


@dataclass(frozen=True)
class RoleTable:
    """The role lists that hold on one target (or, `target` None, on none: `[slack.rbac]`), and
    where each list is configured, so that a refusal tells the admin which list to edit."""

    rbac: SlackRBAC
    target: str | None = None
    own: frozenset[Role] = frozenset()
    """The roles whose list the target replaces (`[targets.NAME.rbac]`)."""

    def config_key(self, role: Role) -> str:
        """`targets.B.rbac.operators` when target B names its own operators, else `slack.rbac.operators`."""
        if self.target is not None and role in self.own:
            return f"targets.{self.target}.rbac.{_LIST_OF[role]}"
        return f"slack.rbac.{_LIST_OF[role]}"

    def on(self) -> str:
        """` on target B`, or nothing for a decision about no target."""
        return f" on target {self.target}" if self.target else ""


def role_table(settings: Settings, target: str | None) -> RoleTable:
    """The role lists for `target`: each list the target names in `[targets.NAME.rbac]`
    replaces `[slack.rbac]`'s (never adds to it: see `TargetRBAC`), the others are the global
    ones. An unknown or empty target name gets the global table (its command is refused as
    unknown anyway)."""
    rbac = settings.slack.rbac
    found = settings.targets.get(target) if target else None
    if found is None:
        return RoleTable(rbac)
    lists = found.rbac
    replaced: dict[Role, list[str] | None] = {
        "admin": lists.admins,
        "operator": lists.operators,
        "approver": lists.approvers,
        "viewer": lists.viewers,
    }
    own = frozenset(role for role, entries in replaced.items() if entries is not None)
    effective = SlackRBAC(
        admins=rbac.admins if lists.admins is None else lists.admins,
        operators=rbac.operators if lists.operators is None else lists.operators,
        approvers=rbac.approvers if lists.approvers is None else lists.approvers,
        viewers=rbac.viewers if lists.viewers is None else lists.viewers,
    )
    return RoleTable(effective, target, own)


GLOBAL_TABLE_KEYS = RoleTable(SlackRBAC())
"""Where the lists are when no target's table is known: `[slack.rbac]` (for messages only)."""


@dataclass(frozen=True)
class Decision:
    """Whether a command (or an approval) may go ahead, and the sentence the user sees."""

    allowed: bool
    reason: str
    needs: Needs = "none"
    role: Role | None = None
    """The role the decision rested on (None when no role could allow it, e.g. own approval)."""


def roles_of(user_id: str, group_ids: Iterable[str], rbac: SlackRBAC) -> frozenset[Role]:
    """The user's roles: an entry matches the user's id, one of `group_ids`, or is `"*"`."""
    principals = {user_id, "*", *group_ids}
    roles: set[Role] = set()
    by_role: tuple[tuple[Role, list[str]], ...] = (
        ("admin", rbac.admins),
        ("operator", rbac.operators),
        ("approver", rbac.approvers),
        ("viewer", rbac.viewers),
    )
    for role, entries in by_role:
        if principals.intersection(entries):
            roles |= _IMPLIES[role]
    return frozenset(roles)


def command_label(invocation: Invocation) -> str:
    """`try`, `baseline pin`, `checks delete`: how the command is named to users and in the audit."""
    return f"{invocation.name} {invocation.sub}" if invocation.sub else invocation.name


def decide(
    invocation: Invocation,
    roles: frozenset[Role],
    *,
    actor: str,
    target_policy: TargetPolicy | None,
    run_owner: str | None = None,
    effects: PlaybookEffects | None = None,
    table: RoleTable = GLOBAL_TABLE_KEYS,
) -> Decision:
    """May `actor` (with `roles`, held on the command's target: `role_table`) run `invocation`
    on a target with `target_policy`? `table` is that target's: a refusal names the target and
    the list to be added to.

    `target_policy` is None for commands about no target; `run_owner` is who started the run a
    `cancel` names: a Slack user id, or the actor of a run started elsewhere (`cli:alice@host`,
    someone else's for every Slack user); None when no such run exists (nothing to protect).
    `effects` is what the command's playbook does (`bot.app.playbooks.playbook_effects`); None
    for a command that runs no playbook, when the command's name decides (`RESTARTS`).
    """
    label = command_label(invocation)
    production = target_policy is not None and target_policy.require_approval
    if invocation.tier == "read-only":
        if "viewer" not in roles:
            return _refuse(label, "is read-only", "viewer", actor, roles, table)
        return Decision(True, f"`{label}` is read-only; you ({actor}) have {_have(roles)}.", role="viewer")

    admin_why = _admin_only(
        invocation, actor=actor, production=production, run_owner=run_owner, effects=effects
    )
    if admin_why is not None:
        if "admin" not in roles:
            return _refuse(label, admin_why, "admin", actor, roles, table)
    elif "operator" not in roles:
        return _refuse(label, "changes the target", "operator", actor, roles, table)
    role: Role = "admin" if admin_why is not None else "operator"

    restarts, executes = _restarts(invocation, effects), _executes(invocation, effects)
    if target_policy is not None:
        if target_policy.require_approval and (restarts or executes):
            expiry = _duration(target_policy.approval_expiry)
            what = (
                "restarts a production target"
                if restarts
                else "runs SGLang's argument code on node 0 of a production target (the dry run)"
            )
            return Decision(
                True,
                f"`{label}` {what}: someone with the approver role other than "
                f"you ({actor}) must approve it within {expiry}.",
                needs="approval",
                role=role,
            )
        if target_policy.confirm_restart and restarts:
            return Decision(
                True,
                f"`{label}` restarts the target: confirm it with the button (the target's policy "
                "has confirm_restart).",
                needs="confirmation",
                role=role,
            )
    return Decision(True, f"`{label}` changes the target; you ({actor}) have {_have(roles)}.", role=role)


def may_approve(
    approver_id: str,
    approver_roles: frozenset[Role],
    requester_id: str,
    *,
    expires_at: datetime | None = None,
    now: datetime | None = None,
    table: RoleTable = GLOBAL_TABLE_KEYS,
) -> Decision:
    """May `approver_id` (with `approver_roles` on the restart's target, whose `table` it is)
    approve the production restart `requester_id` asked for?

    Never their own request, whatever their roles; an expired request (`now >= expires_at`)
    cannot be approved by anyone.
    """
    if approver_id == requester_id:
        return Decision(
            False,
            f"you ({approver_id}) requested this restart: someone else with the approver role must "
            "approve it.",
        )
    if expires_at is not None and now is not None and now >= expires_at:
        return Decision(
            False,
            f"this approval request expired at {expires_at:%Y-%m-%d %H:%M %Z}; "
            f"{requester_id} has to run the command again.",
        )
    if "approver" not in approver_roles and "admin" not in approver_roles:
        return Decision(
            False,
            f"approving a production restart needs the approver role{table.on()}; you ({approver_id}) "
            f"have {_have(approver_roles)}{table.on()}. Ask an admin to add you to "
            f"{table.config_key('approver')}",
        )
    role: Role = "approver" if "approver" in approver_roles else "admin"
    return Decision(True, f"{approver_id} approved the restart {requester_id} requested.", role=role)


def decide_click(
    action: str, roles: frozenset[Role], *, actor: str, table: RoleTable = GLOBAL_TABLE_KEYS
) -> Decision:
    """May `actor` press a card's button (Revert, Keep, Re-run, Isolate, Restart anyway, Cancel,
    Run this experiment)? Each changes the target or records the team's decision: the operator role at
    least, on the experiment's target (`roles` and `table` are that target's); the command a
    button stands for is then decided as if typed."""
    if "operator" in roles or "admin" in roles:
        return Decision(True, f"the {action} button; you ({actor}) have {_have(roles)}.", role="operator")
    return _refuse(f"{action} button", "acts on the target for the team", "operator", actor, roles, table)


def _admin_only(
    invocation: Invocation,
    *,
    actor: str,
    production: bool,
    run_owner: str | None,
    effects: PlaybookEffects | None = None,
) -> str | None:
    """Why this mutating invocation needs an admin, or None when an operator may run it."""
    if (invocation.name, invocation.sub) in ADMIN_SUBS:
        return _ADMIN_WHY[(invocation.name, invocation.sub or "")]
    if effects is not None and effects.pins_baseline:
        return (
            f"runs playbook {effects.playbook}, which replaces the target's baseline (as `baseline pin` does)"
        )
    if production and effects is not None and effects.forces:
        return (
            f"runs playbook {effects.playbook}, which writes over a hand edit (force) on a production "
            "target: that overrides a safety check"
        )
    if invocation.name == "cancel" and run_owner is not None and run_owner != actor:
        return f"stops a run {run_owner} started"
    if production:
        force = invocation.options.get("force")
        if force is not None and force.strip().lower() not in _OFF:
            return "with force= on a production target overrides a safety check"
        if invocation.options.get("keep", "").lower() == "always":
            return "with keep=always on a production target keeps the change whatever the verdict"
    return None


def _dry_run(invocation: Invocation) -> bool:
    return invocation.options.get("dry-run", "no").lower() in ("yes", "true", "1")


def _restarts(invocation: Invocation, effects: PlaybookEffects | None) -> bool:
    if effects is not None:
        return effects.restarts
    return invocation.name in RESTARTS and not _dry_run(invocation)


def _executes(invocation: Invocation, effects: PlaybookEffects | None) -> bool:
    """Runs code on a node without restarting it: the preflight's dry run (`try dry-run=yes`)."""
    if effects is not None:
        return effects.executes
    return invocation.name in RESTARTS and _dry_run(invocation)


def _refuse(
    label: str, what: str, role: Role, actor: str, roles: frozenset[Role], table: RoleTable
) -> Decision:
    """The refusal names the role, the target it is needed on, and the list that grants it."""
    return Decision(
        False,
        f"`{label}` {what}: it needs the {role} role{table.on()}; you ({actor}) have "
        f"{_have(roles)}{table.on()}. Ask an admin to add you to {table.config_key(role)}",
        role=role,
    )


def _have(roles: frozenset[Role]) -> str:
    named = [role for role in ROLES if role in roles]
    return ", ".join(named) if named else "no role"


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# --- user groups ------------------------------------------------------------------------------


class UserGroupsClient(Protocol):
    """The one Web API method RBAC uses; `slack_sdk.web.async_client.AsyncWebClient` has it."""

    async def usergroups_users_list(self, *, usergroup: str) -> Any: ...


@dataclass
class GroupCache:
    """Members of each user group, kept `ttl` seconds; concurrent lookups of a group share one call.

    A failed lookup (missing `usergroups:read` scope, rate limit, network) is logged, not cached,
    and counts as "not a member": RBAC fails closed.
    """

    ttl: float = 300.0
    clock: Callable[[], float] = time.monotonic
    _members: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    _pending: dict[str, asyncio.Future[frozenset[str] | None]] = field(default_factory=dict)

    async def members(self, client: UserGroupsClient, group_id: str) -> frozenset[str] | None:
        cached = self._members.get(group_id)
        if cached is not None and self.clock() - cached[0] < self.ttl:
            return cached[1]
        pending = self._pending.get(group_id)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(client, group_id))
            self._pending[group_id] = pending
            pending.add_done_callback(lambda _: self._pending.pop(group_id, None))
        return await asyncio.shield(pending)

    async def _fetch(self, client: UserGroupsClient, group_id: str) -> frozenset[str] | None:
        try:
            response = await client.usergroups_users_list(usergroup=group_id)
            users = frozenset(str(user) for user in response["users"])
        except Exception as exc:
            log.warning("cannot list the members of Slack user group %s: %s", group_id, exc)
            return None
        self._members[group_id] = (self.clock(), users)
        return users

    def clear(self) -> None:
        self._members.clear()


DEFAULT_GROUP_CACHE = GroupCache()


async def groups_of(
    client: UserGroupsClient,
    user_id: str,
    group_ids_in_config: Iterable[str],
    *,
    cache: GroupCache | None = None,
) -> set[str]:
    """The configured user groups (`S…` ids) `user_id` belongs to, by `usergroups.users.list`.

    Each group is asked for at most once per cache lifetime (5 minutes by default).
    """
    chosen = DEFAULT_GROUP_CACHE if cache is None else cache
    wanted = sorted({group for group in group_ids_in_config if group.startswith("S")})
    members = await asyncio.gather(*(chosen.members(client, group) for group in wanted))
    return {group for group, users in zip(wanted, members, strict=True) if users and user_id in users}


# --- audit ------------------------------------------------------------------------------------


async def audit_decision(
    astore: AsyncStore,
    decision: Decision,
    *,
    actor: str,
    target: str | None,
    command: str,
    roles: frozenset[Role],
    channel: str | None = None,
    experiment_id: int | None = None,
    detail: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Record one decision, allowed or refused, as the audit event `slack:<command>`.

    `command` is `command_label(invocation)` (or e.g. `approve` for an approval click);
    `target` is the target name, None for commands about no target (stored as "").
    """
    event_detail: dict[str, Any] = {
        "allowed": decision.allowed,
        "reason": decision.reason,
        "needs": decision.needs,
        "role": decision.role,
        "roles": [role for role in ROLES if role in roles],
        "channel": channel,
        **(detail or {}),
    }
    return await astore.run(
        audit,
        astore.store,
        actor=actor,
        target=target or "",
        action=f"slack:{command}"[:64],
        detail=event_detail,
        experiment_id=experiment_id,
    )


async def roles_on(
    client: UserGroupsClient, settings: Settings, user: str, target: str | None
) -> tuple[frozenset[Role], RoleTable]:
    """The roles `user` holds on `target` (directly or through a user group, by that target's
    table: `role_table`), and the table, for the refusal's words. `target` None: the global roles."""
    table = role_table(settings, target)
    groups = await groups_of(client, user, table.rbac.group_ids())
    return roles_of(user, groups, table.rbac), table
