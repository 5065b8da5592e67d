"""RBAC in Slack: every registered command against every role, admin-only cases, approvals, groups."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.commands.grammar import Invocation, parse_command
from bot.commands.registry import COMMANDS
from bot.config.schema import TargetPolicy
from bot.config.slack_settings import SlackRBAC
from bot.slack.rbac import (
    GroupCache,
    Role,
    UserGroupsClient,
    command_label,
    decide,
    groups_of,
    may_approve,
    roles_of,
)

ME = "U123"
OTHER = "U999"
PLAIN = TargetPolicy()
PRODUCTION = TargetPolicy(require_approval=True)
CONFIRMED = TargetPolicy(confirm_restart=True)
ADMIN_ONLY = {("baseline", "pin"), ("baseline", "set"), ("checks", "delete"), ("unfreeze", None)}

VIEWER: frozenset[Role] = frozenset({"viewer"})
OPERATOR: frozenset[Role] = frozenset({"operator", "viewer"})
APPROVER: frozenset[Role] = frozenset({"approver"})
ADMIN: frozenset[Role] = frozenset({"admin", "approver", "operator", "viewer"})
NOBODY: frozenset[Role] = frozenset()


def every_invocation() -> list[Invocation]:
    """Each command, and each of its subcommands, of the registry."""
    found: list[Invocation] = []
    for spec in COMMANDS:
        found.append(Invocation(spec))
        found.extend(Invocation(spec, sub=sub.name) for sub in spec.subs)
    return found


INVOCATIONS = every_invocation()
READ_ONLY = [inv for inv in INVOCATIONS if inv.tier == "read-only"]
MUTATING = [inv for inv in INVOCATIONS if inv.tier == "mutating"]
OPERATOR_MUTATING = [inv for inv in MUTATING if (inv.name, inv.sub) not in ADMIN_ONLY]
ADMIN_MUTATING = [inv for inv in MUTATING if (inv.name, inv.sub) in ADMIN_ONLY]


def test_the_registry_has_both_tiers_and_the_admin_only_subcommands() -> None:
    assert {"status", "help", "log", "baseline show", "checks list"} <= {command_label(i) for i in READ_ONLY}
    assert {"try", "bench", "cancel", "checks pause", "baseline pin"} <= {command_label(i) for i in MUTATING}
    assert {command_label(i) for i in ADMIN_MUTATING} == {
        "baseline pin",
        "baseline set",
        "checks delete",
        "unfreeze",
    }


@pytest.mark.parametrize("invocation", READ_ONLY, ids=command_label)
@pytest.mark.parametrize("roles", [VIEWER, OPERATOR, ADMIN], ids=["viewer", "operator", "admin"])
def test_read_only_commands_are_open_to_viewers(invocation: Invocation, roles: frozenset[Role]) -> None:
    for policy in (None, PLAIN, PRODUCTION, CONFIRMED):
        decision = decide(invocation, roles, actor=ME, target_policy=policy)
        assert decision.allowed, decision.reason
        assert decision.needs == "none"
        assert decision.role == "viewer"


@pytest.mark.parametrize("invocation", READ_ONLY, ids=command_label)
def test_read_only_commands_are_refused_without_any_role(invocation: Invocation) -> None:
    decision = decide(invocation, NOBODY, actor=ME, target_policy=PLAIN)
    assert not decision.allowed
    assert decision.reason == (
        f"`{command_label(invocation)}` is read-only: it needs the viewer role; you (U123) have no role. "
        "Ask an admin to add you to slack.rbac.viewers"
    )


@pytest.mark.parametrize("invocation", OPERATOR_MUTATING, ids=command_label)
def test_every_mutating_command_is_refused_for_a_viewer_with_the_reason(invocation: Invocation) -> None:
    decision = decide(invocation, VIEWER, actor=ME, target_policy=PLAIN)
    assert not decision.allowed
    assert decision.needs == "none"
    assert decision.reason == (
        f"`{command_label(invocation)}` changes the target: it needs the operator role; you (U123) have "
        "viewer. Ask an admin to add you to slack.rbac.operators"
    )


@pytest.mark.parametrize("invocation", OPERATOR_MUTATING, ids=command_label)
def test_every_mutating_command_is_allowed_for_operators_and_admins(invocation: Invocation) -> None:
    for roles, role in ((OPERATOR, "operator"), (ADMIN, "operator")):
        decision = decide(invocation, roles, actor=ME, target_policy=PLAIN)
        assert decision.allowed, decision.reason
        assert (decision.needs, decision.role) == ("none", role)


@pytest.mark.parametrize("invocation", MUTATING, ids=command_label)
def test_an_approver_alone_runs_nothing_mutating(invocation: Invocation) -> None:
    decision = decide(invocation, APPROVER, actor=ME, target_policy=PLAIN)
    assert not decision.allowed
    assert "you (U123) have approver." in decision.reason


@pytest.mark.parametrize("invocation", ADMIN_MUTATING, ids=command_label)
def test_admin_only_subcommands(invocation: Invocation) -> None:
    for roles, have in ((VIEWER, "viewer"), (OPERATOR, "viewer, operator")):
        refused = decide(invocation, roles, actor=ME, target_policy=PLAIN)
        assert not refused.allowed
        assert f"it needs the admin role; you (U123) have {have}." in refused.reason
        assert refused.reason.endswith("Ask an admin to add you to slack.rbac.admins")
    assert decide(invocation, ADMIN, actor=ME, target_policy=PLAIN).allowed


def test_admin_only_reasons_say_what_the_command_does() -> None:
    pin = decide(parse_command("baseline pin"), OPERATOR, actor=ME, target_policy=PLAIN)
    assert pin.reason.startswith("`baseline pin` replaces the target's baseline: it needs the admin role")
    delete = decide(parse_command("checks delete 4"), OPERATOR, actor=ME, target_policy=PLAIN)
    assert delete.reason.startswith("`checks delete` deletes a scheduled check")
    lift = decide(parse_command("unfreeze"), OPERATOR, actor=ME, target_policy=PLAIN)
    assert lift.reason.startswith(
        "`unfreeze` lifts a change freeze someone declared: it needs the admin role"
    )
    assert decide(parse_command('freeze reason="launch"'), OPERATOR, actor=ME, target_policy=PLAIN).allowed
    shown = decide(parse_command("baseline"), VIEWER, actor=ME, target_policy=PLAIN)
    assert shown.allowed and command_label(parse_command("baseline")) == "baseline show"


def test_cancel_own_run_is_an_operators_but_someone_elses_an_admins() -> None:
    cancel = parse_command("cancel")
    assert decide(cancel, OPERATOR, actor=ME, target_policy=PLAIN, run_owner=ME).allowed
    assert decide(cancel, OPERATOR, actor=ME, target_policy=PLAIN, run_owner=None).allowed
    others = decide(cancel, OPERATOR, actor=ME, target_policy=PLAIN, run_owner=OTHER)
    assert not others.allowed
    assert others.reason.startswith("`cancel` stops a run U999 started: it needs the admin role")
    assert decide(cancel, ADMIN, actor=ME, target_policy=PLAIN, run_owner=OTHER).allowed
    # stopping a run never waits for a second person, even on production
    assert decide(cancel, OPERATOR, actor=ME, target_policy=PRODUCTION, run_owner=ME).needs == "none"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("try add --enable-fused-moe-sum-all-reduce keep=always", "with keep=always on a production target"),
        ("run baseline force=yes", "with force= on a production target"),
        ("run apply force=true", "with force= on a production target"),
    ],
)
def test_force_and_keep_always_on_production_need_an_admin(text: str, why: str) -> None:
    invocation = parse_command(text)
    refused = decide(invocation, OPERATOR, actor=ME, target_policy=PRODUCTION)
    assert not refused.allowed
    assert refused.reason.startswith(f"`{invocation.name}` {why}")
    assert "needs the admin role" in refused.reason
    admin = decide(invocation, ADMIN, actor=ME, target_policy=PRODUCTION)
    assert admin.allowed and admin.role == "admin"
    assert admin.needs == "approval"  # admins restart production with four eyes too
    elsewhere = decide(invocation, OPERATOR, actor=ME, target_policy=PLAIN)
    assert elsewhere.allowed and elsewhere.role == "operator"


def test_force_no_and_keep_never_stay_with_operators() -> None:
    for text in ("run baseline force=no", "try add --enable-fused-moe-sum-all-reduce keep=never"):
        assert decide(parse_command(text), OPERATOR, actor=ME, target_policy=PRODUCTION).allowed


@pytest.mark.parametrize("name", ["try", "revert", "isolate", "run", "rollback", "reconcile"])
def test_restarts_of_production_need_an_approval_and_of_confirm_targets_a_click(name: str) -> None:
    invocation = Invocation(next(spec for spec in COMMANDS if spec.name == name))
    production = decide(invocation, OPERATOR, actor=ME, target_policy=PRODUCTION)
    assert production.allowed and production.needs == "approval"
    assert production.reason == (
        f"`{name}` restarts a production target: someone with the approver role other than you (U123) "
        "must approve it within 1h."
    )
    confirm = decide(invocation, OPERATOR, actor=ME, target_policy=CONFIRMED)
    assert confirm.allowed and confirm.needs == "confirmation"
    both = TargetPolicy(require_approval=True, confirm_restart=True, approval_expiry=timedelta(minutes=15))
    stricter = decide(invocation, OPERATOR, actor=ME, target_policy=both)
    assert stricter.needs == "approval" and "within 15m" in stricter.reason
    assert decide(invocation, OPERATOR, actor=ME, target_policy=PLAIN).needs == "none"
    refused = decide(invocation, VIEWER, actor=ME, target_policy=PRODUCTION)
    assert not refused.allowed and refused.needs == "none"


def test_commands_that_do_not_restart_need_no_approval() -> None:
    for text in ("bench", "verify max_running_requests>=48", "checks run 4", "baseline pin"):
        decision = decide(parse_command(text), ADMIN, actor=ME, target_policy=PRODUCTION)
        assert decision.allowed and decision.needs == "none", text
    dry = parse_command("try add --enable-fused-moe-sum-all-reduce dry-run=yes")
    assert decide(dry, OPERATOR, actor=ME, target_policy=CONFIRMED).needs == "none"  # no restart


def test_a_dry_run_on_production_needs_an_approval_it_runs_sglangs_code_there() -> None:
    dry = parse_command("try add --enable-fused-moe-sum-all-reduce dry-run=yes")
    decision = decide(dry, OPERATOR, actor=ME, target_policy=PRODUCTION)
    assert decision.allowed and decision.needs == "approval"
    assert "runs SGLang's argument code on node 0 of a production target" in decision.reason
    assert decide(dry, OPERATOR, actor=ME, target_policy=PLAIN).needs == "none"


# --- approvals --------------------------------------------------------------------------------


def test_the_requester_can_never_approve_their_own_request() -> None:
    for roles in (APPROVER, ADMIN, OPERATOR):
        decision = may_approve(ME, roles, ME)
        assert not decision.allowed
        assert decision.reason == (
            "you (U123) requested this restart: someone else with the approver role must approve it."
        )


def test_approvers_and_admins_approve_others_requests() -> None:
    approver = may_approve(OTHER, APPROVER, ME)
    assert approver.allowed and approver.role == "approver"
    assert approver.reason == "U999 approved the restart U123 requested."
    assert may_approve(OTHER, frozenset({"admin"}), ME).role == "admin"


@pytest.mark.parametrize(("roles", "have"), [(OPERATOR, "viewer, operator"), (NOBODY, "no role")])
def test_others_cannot_approve(roles: frozenset[Role], have: str) -> None:
    decision = may_approve(OTHER, roles, ME)
    assert not decision.allowed
    assert decision.reason == (
        f"approving a production restart needs the approver role; you (U999) have {have}. "
        "Ask an admin to add you to slack.rbac.approvers"
    )


def test_an_expired_request_cannot_be_approved() -> None:
    requested = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)
    expires = requested + PRODUCTION.approval_expiry
    assert may_approve(OTHER, APPROVER, ME, expires_at=expires, now=expires - timedelta(seconds=1)).allowed
    late = may_approve(OTHER, APPROVER, ME, expires_at=expires, now=expires)
    assert not late.allowed
    assert (
        late.reason
        == "this approval request expired at 2026-11-29 23:00 UTC; U123 has to run the command again."
    )


# --- roles ------------------------------------------------------------------------------------


def test_roles_by_user_id_with_implications() -> None:
    rbac = SlackRBAC(admins=["UADMIN1"], operators=["UOPS1"], approvers=["UAPP1"], viewers=["UVIEW1"])
    assert roles_of("UADMIN1", [], rbac) == ADMIN
    assert roles_of("UOPS1", [], rbac) == OPERATOR
    assert roles_of("UAPP1", [], rbac) == APPROVER
    assert roles_of("UVIEW1", [], rbac) == VIEWER
    assert roles_of("USTRANGER", [], rbac) == NOBODY


def test_star_means_everyone_and_the_default_lets_everyone_view() -> None:
    assert roles_of("UANYONE", [], SlackRBAC()) == VIEWER
    assert roles_of("UANYONE", [], SlackRBAC(operators=["*"])) == OPERATOR
    assert roles_of("UANYONE", [], SlackRBAC(viewers=[])) == NOBODY


def test_roles_by_user_group() -> None:
    rbac = SlackRBAC(operators=["S0OPS"], approvers=["S0SRE"], viewers=[])
    assert roles_of("U1", ["S0OPS"], rbac) == OPERATOR
    assert roles_of("U1", ["S0OPS", "S0SRE"], rbac) == OPERATOR | APPROVER
    assert roles_of("U1", ["S0OTHER"], rbac) == NOBODY


def test_a_display_name_never_matches() -> None:
    rbac = SlackRBAC(admins=["U012ABCDEF"])
    assert roles_of("alice", ["alice"], rbac) == VIEWER  # "*" viewers only


# --- user groups ------------------------------------------------------------------------------


class FakeClient:
    """`usergroups.users.list` with fixed members; counts calls per group."""

    def __init__(self, members: dict[str, list[str]], *, delay: float = 0.0) -> None:
        self.members = members
        self.delay = delay
        self.calls: list[str] = []

    async def usergroups_users_list(self, *, usergroup: str) -> Any:
        self.calls.append(usergroup)
        if self.delay:
            await asyncio.sleep(self.delay)
        if usergroup not in self.members:
            raise RuntimeError("no_such_subteam")
        return {"ok": True, "users": list(self.members[usergroup])}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_groups_are_asked_once_and_cached_for_five_minutes() -> None:
    client = FakeClient({"S0OPS": ["U1", "U2"], "S0SRE": ["U2"]})
    clock = Clock()
    cache = GroupCache(clock=clock)
    configured = ["S0OPS", "S0SRE", "*", "U7"]
    assert await groups_of(client, "U1", configured, cache=cache) == {"S0OPS"}
    assert await groups_of(client, "U2", configured, cache=cache) == {"S0OPS", "S0SRE"}
    assert await groups_of(client, "U3", configured, cache=cache) == set()
    assert sorted(client.calls) == ["S0OPS", "S0SRE"]  # user ids and "*" are never asked about
    clock.now += 299
    client.members["S0SRE"].append("U3")
    assert await groups_of(client, "U3", configured, cache=cache) == set()
    assert len(client.calls) == 2
    clock.now += 2
    assert await groups_of(client, "U3", configured, cache=cache) == {"S0SRE"}
    assert sorted(client.calls) == ["S0OPS", "S0OPS", "S0SRE", "S0SRE"]


async def test_concurrent_lookups_share_one_call() -> None:
    client = FakeClient({"S0OPS": ["U1"]}, delay=0.01)
    cache = GroupCache(clock=Clock())
    results = await asyncio.gather(*(groups_of(client, "U1", ["S0OPS"], cache=cache) for _ in range(5)))
    assert results == [{"S0OPS"}] * 5
    assert client.calls == ["S0OPS"]


async def test_a_failed_lookup_fails_closed_and_is_asked_again(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient({"S0OPS": ["U1"]})
    cache = GroupCache(clock=Clock())
    assert await groups_of(client, "U1", ["S0OPS", "S0GONE"], cache=cache) == {"S0OPS"}
    assert "S0GONE" in caplog.text and "no_such_subteam" in caplog.text
    client.members["S0GONE"] = ["U1"]
    assert await groups_of(client, "U1", ["S0OPS", "S0GONE"], cache=cache) == {"S0OPS", "S0GONE"}
    assert client.calls.count("S0GONE") == 2 and client.calls.count("S0OPS") == 1


def test_the_slack_sdk_client_fits_the_protocol() -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    client: UserGroupsClient = AsyncWebClient(token="xoxb-test")  # checked by mypy
    assert callable(client.usergroups_users_list)
