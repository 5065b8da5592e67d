"""Team A operates its own target only: through the real slack-bolt app on the stand-in, an
operator of target `lab` (its `[targets.lab.rbac]`) is refused a command, a button and an
approval on target `teamb`, ephemerally, audited, naming the target and the list; nothing runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.slack.card import ACTION_IDS, action_value
from bot.store.approvals import create_request, get_request
from bot.store.experiments import create_experiment
from bot.store.records import audit_events
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config, unreachable_target

TEAM_A, TEAM_B = "U0OPER", "U0APPR"  # the stand-in's seeded people: team A, team B
CHANNEL = "C0FLEET"
CONFIG = lab_config(
    """admins = ["U0ADMIN"]
operators = []
approvers = ["U0ADMIN"]
""",
    after="""[targets.lab.rbac]
operators = ["U0OPER"]
approvers = ["U0OPER"]
"""
    + unreachable_target("teamb")
    + """[targets.teamb.rbac]
operators = ["U0APPR"]
[targets.teamb.policy]
require_approval = true
""",
)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "fleet")) as running:
        yield running


async def _decisions(bot: RunningBot, target: str, action: str) -> list[dict[str, object]]:
    await bot.services.drain()  # audits are written after the ack
    events = await bot.services.store.run(audit_events, bot.services.store.store, target)
    return [e.detail for e in events if e.action == f"slack:{action}" and e.actor == f"slack:{TEAM_A}"]


async def _click(bot: RunningBot, row_id: int, action: str) -> None:
    """Team A presses `action` on a card (of experiment or approval request `row_id`) flagbot posted."""
    button = {
        "type": "button",
        "action_id": ACTION_IDS[action],
        "text": {"type": "plain_text", "text": action},
        "value": action_value(row_id, action, f"n{action}"),
    }
    card = bot.standin.workspace.post(
        CHANNEL, text="a card", blocks=[{"type": "actions", "block_id": "b1", "elements": [button]}]
    )
    await bot.standin.click(CHANNEL, card.ts, ACTION_IDS[action], user=TEAM_A)
    await bot.services.drain()


def _bot_posts(bot: RunningBot) -> int:
    return sum(1 for m in bot.standin.workspace.all_messages(CHANNEL) if m.user not in (TEAM_A, TEAM_B))


async def test_an_operator_of_target_a_is_refused_a_command_on_target_b(bot: RunningBot) -> None:
    answer = await bot.standin.slash("rollback target=teamb", user=TEAM_A, channel=CHANNEL)
    body = answer.json()
    assert body["response_type"] == "ephemeral", body
    assert "needs the operator role on target teamb" in body["text"], body
    assert "targets.teamb.rbac.operators" in body["text"], body
    [refused] = await _decisions(bot, "teamb", "rollback")
    assert refused["allowed"] is False and refused["role"] == "operator"
    assert _bot_posts(bot) == 0  # no thread, no run

    own = await bot.standin.slash("rollback target=lab", user=TEAM_A, channel=CHANNEL)
    assert "role" not in own.json().get("text", ""), own.body
    [allowed] = await _decisions(bot, "lab", "rollback")
    assert allowed["allowed"] is True  # the same user on their own target


async def test_an_operator_of_target_a_may_not_press_a_button_of_target_b(bot: RunningBot) -> None:
    store = bot.services.store
    row = await store.run(
        create_experiment, store.store, target="teamb", playbook="try", params={}, actor="slack:U0APPR"
    )
    assert row.id is not None
    await _click(bot, row.id, "revert")

    [shown] = bot.standin.ephemerals(TEAM_A)
    assert "operator role on target teamb" in shown.text and "targets.teamb.rbac.operators" in shown.text
    [refused] = await _decisions(bot, "teamb", "revert")
    assert refused["allowed"] is False
    assert _bot_posts(bot) == 1  # the card itself only
    assert not bot.standin.calls("chat.update")


async def test_an_approver_of_target_a_may_not_approve_a_restart_of_target_b(bot: RunningBot) -> None:
    store = bot.services.store
    request = await store.run(
        create_request,
        store.store,
        target="teamb",
        command="try add --enable-metrics target=teamb",
        requester=TEAM_B,
        channel=CHANNEL,
        needs="approval",
        expires_in=timedelta(hours=1),
    )
    assert request.id is not None
    await _click(bot, request.id, "approve")

    [shown] = bot.standin.ephemerals(TEAM_A)
    assert "approver role on target teamb" in shown.text, shown.text
    assert [d["allowed"] for d in await _decisions(bot, "teamb", "approve")] == [False]
    after = await store.run(get_request, store.store, request.id)
    assert after is not None and after.status == "pending"
