"""Every RBAC decision, allowed or refused, lands in the audit trail of a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.commands.grammar import parse_command
from bot.config.schema import TargetPolicy
from bot.config.slack_settings import SlackRBAC
from bot.slack.rbac import audit_decision, command_label, decide, may_approve, roles_of
from bot.store import AsyncStore, Store
from bot.store.records import audit_events

RBAC = SlackRBAC(operators=["U0OPS"], approvers=["S0SRE"])


@pytest.fixture
async def astore(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    store = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    store.upgrade()
    opened = AsyncStore(store)
    yield opened
    await opened.aclose()


async def test_refused_and_allowed_decisions_are_audited(astore: AsyncStore) -> None:
    invocation = parse_command("try add --enable-fused-moe-sum-all-reduce")
    viewer = roles_of("U0VIEW", [], RBAC)
    refused = decide(invocation, viewer, actor="U0VIEW", target_policy=TargetPolicy())
    operator = roles_of("U0OPS", [], RBAC)
    allowed = decide(invocation, operator, actor="U0OPS", target_policy=TargetPolicy(require_approval=True))
    for actor, roles, decision in (("U0VIEW", viewer, refused), ("U0OPS", operator, allowed)):
        event = await audit_decision(
            astore,
            decision,
            actor=actor,
            target="sglang-qwen",
            command=command_label(invocation),
            roles=roles,
            channel="C0OPS",
            detail={"text": "try add --enable-fused-moe-sum-all-reduce"},
        )
        assert event.id is not None

    events = await astore.run(audit_events, astore.store, "sglang-qwen")
    by_actor = {event.actor: event for event in events}
    assert set(by_actor) == {"U0VIEW", "U0OPS"}
    assert {event.action for event in events} == {"slack:try"}
    denied = by_actor["U0VIEW"].detail
    assert denied["allowed"] is False
    assert denied["reason"].startswith("`try` changes the target: it needs the operator role")
    assert denied["roles"] == ["viewer"]
    assert denied["channel"] == "C0OPS"
    assert denied["text"] == "try add --enable-fused-moe-sum-all-reduce"
    granted = by_actor["U0OPS"].detail
    assert (granted["allowed"], granted["needs"], granted["role"]) == (True, "approval", "operator")
    assert granted["roles"] == ["viewer", "operator"]


async def test_an_approval_and_a_command_about_no_target_are_audited(astore: AsyncStore) -> None:
    approver_roles = roles_of("U0SRE", ["S0SRE"], RBAC)
    own = may_approve("U0SRE", approver_roles, "U0SRE")
    await audit_decision(
        astore,
        own,
        actor="U0SRE",
        target="sglang-qwen",
        command="approve",
        roles=approver_roles,
        experiment_id=None,
    )
    help_decision = decide(parse_command("help"), frozenset(), actor="U0NOBODY", target_policy=None)
    await audit_decision(
        astore, help_decision, actor="U0NOBODY", target=None, command="help", roles=frozenset()
    )

    [approval] = await astore.run(audit_events, astore.store, "sglang-qwen")
    assert approval.action == "slack:approve"
    assert approval.detail["allowed"] is False
    assert "requested this restart" in approval.detail["reason"]
    assert approval.detail["roles"] == ["viewer", "approver"]
    [untargeted] = await astore.run(audit_events, astore.store, "")
    assert (untargeted.actor, untargeted.action) == ("U0NOBODY", "slack:help")
    assert untargeted.detail["allowed"] is False and untargeted.detail["channel"] is None
