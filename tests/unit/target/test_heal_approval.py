"""`heal` restarts a diverged target: on one whose policy has `require_approval` only for a run
whose restart was approved; otherwise it refuses, naming the rule, before any node is touched."""

from __future__ import annotations

import pytest

from bot.config.schema import TargetPolicy
from bot.target.heal import HealApprovalError, heal_if_diverged
from bot.target.restart import RestartError
from bot.target.session import TargetSession
from tests.unit.target.conftest import FakeTarget

PRODUCTION = TargetPolicy(require_approval=True)


def production_session(fake_target: FakeTarget) -> TargetSession:
    target = fake_target.target.model_copy(update={"policy": PRODUCTION})
    return TargetSession.build(
        "prod", target, audit=lambda node, text: fake_target.audit.append((node, text))
    )


async def test_an_unapproved_heal_of_a_production_target_is_refused_and_touches_no_node(
    fake_target: FakeTarget,
) -> None:
    ts = production_session(fake_target)
    await ts.ledger.mark_diverged([ts.nodes[1].name], "a node missed the last restart")
    with pytest.raises(HealApprovalError) as refused:
        await heal_if_diverged(ts, restart_approved=False)
    message = str(refused.value)
    assert "prod's policy has require_approval" in message and "`reconcile target=prod`" in message
    assert "a node missed the last restart" in message
    assert fake_target.received == []  # not one command sent to any node
    assert await ts.ledger.divergence() is not None


async def test_an_approved_heal_of_a_production_target_reconciles(fake_target: FakeTarget) -> None:
    ts = production_session(fake_target)
    await ts.ledger.mark_diverged([ts.nodes[1].name], "a node missed the last restart")
    fake_target.nodes[1].hang.add("stop")  # the reconcile is attempted: its stop hangs and fails
    try:
        with pytest.raises(RestartError):
            await heal_if_diverged(ts, restart_approved=True)
    finally:
        await ts.close()
    assert any("stop" in text for text in fake_target.received)


async def test_a_target_without_require_approval_heals_without_an_approval(fake_target: FakeTarget) -> None:
    ts = fake_target.session()
    try:
        assert await heal_if_diverged(ts, restart_approved=False) is None  # not diverged: nothing
        await ts.ledger.mark_diverged([ts.nodes[1].name], "lost")
        fake_target.nodes[1].hang.add("stop")
        with pytest.raises(RestartError):
            await heal_if_diverged(ts, restart_approved=False)
    finally:
        await ts.close()
    assert any("stop" in text for text in fake_target.received)
