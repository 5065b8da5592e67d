"""A change freeze in Slack, through the real slack-bolt app on the stand-in: an operator freezes
the target, `try` and `restart` are then refused ephemerally before the ack with the freeze's
reason, who set it and until when (nothing posted, nothing run), `status`-free reads go on, an
operator may not `unfreeze` (an admin may), and both are audit rows. The target listens nowhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.experiments import list_experiments
from bot.store.records import FREEZE_ACTION, UNFREEZE_ACTION, audit_events, latest_freeze_event
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config

OPERATOR = "U0OPER"
ADMIN = "U0ADMIN"
CHANNEL = "C0FREEZE"
CONFIG = lab_config("""admins = ["U0ADMIN"]
operators = ["U0OPER"]
viewers = ["*"]
""")


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "freeze")) as running:
        yield running


def posted(bot: RunningBot, needle: str) -> list[str]:
    return [
        f"{m.text} {m.blocks}"
        for m in bot.standin.workspace.all_messages(CHANNEL)
        if m.user != OPERATOR and m.user != ADMIN and needle in f"{m.text} {m.blocks}"
    ]


async def test_a_frozen_target_refuses_changes_in_slack_and_only_an_admin_unfreezes(bot: RunningBot) -> None:
    store = bot.services.store
    standin = bot.standin
    await standin.slash('freeze reason="launch day" until=2h', user=OPERATOR, channel=CHANNEL)
    await bot.services.drain()
    [said] = posted(bot, "lab is frozen")
    assert "lab is frozen: 'launch day' (set by slack:U0OPER, until " in said
    event = await store.run(latest_freeze_event, store.store, "lab")
    assert event is not None and (event.action, event.actor) == (FREEZE_ACTION, "slack:U0OPER")

    for words, label in (("try env set NCCL_DEBUG=INFO", "try"), ("restart", "restart")):
        answer = await standin.slash(words, user=OPERATOR, channel=CHANNEL)
        body = answer.json()
        assert (answer.status, body["response_type"]) == (200, "ephemeral")
        assert body["text"].startswith(
            f"error: `{label}` (it restarts lab) refused: lab is frozen: 'launch day' (set by slack:U0OPER, until "
        ), body["text"]
    await standin.mention("rollback", user=OPERATOR, channel=CHANNEL)
    await bot.services.drain()
    assert any(
        "`rollback` (it restarts lab) refused: lab is frozen" in e.text for e in standin.ephemerals(OPERATOR)
    )
    assert await store.run(list_experiments, store.store, "lab") == []
    assert posted(bot, "Status:") == []  # no status card: nothing started

    answer = await standin.slash("unfreeze", user=OPERATOR, channel=CHANNEL)
    assert "it needs the admin role" in answer.body
    still = await store.run(latest_freeze_event, store.store, "lab")
    assert still is not None and still.action == FREEZE_ACTION

    await standin.slash("unfreeze", user=ADMIN, channel=CHANNEL)
    await bot.services.drain()
    assert posted(bot, "lab is no longer frozen by slack:U0OPER ('launch day')")
    rows = await store.run(audit_events, store.store, "lab")
    actions = [(row.action, row.actor) for row in rows if row.action in (FREEZE_ACTION, UNFREEZE_ACTION)]
    assert actions == [(UNFREEZE_ACTION, "slack:U0ADMIN"), (FREEZE_ACTION, "slack:U0OPER")]


async def test_freeze_without_a_reason_is_refused_before_the_ack(bot: RunningBot) -> None:
    answer = await bot.standin.slash("freeze until=2h", user=OPERATOR, channel=CHANNEL)
    body = answer.json()
    assert body["response_type"] == "ephemeral"
    assert body["text"].startswith("error: freeze needs reason=TEXT"), body["text"]
    store = bot.services.store
    assert await store.run(latest_freeze_event, store.store, "lab") is None
