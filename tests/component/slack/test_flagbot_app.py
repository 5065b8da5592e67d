"""flagbot's Slack app (HTTP mode, real Bolt, signed requests) against the stand-in, no host needed.

The target points at a closed port: these commands must answer from the grammar, RBAC and the
store alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.store import AsyncStore, Store
from bot.store.hypotheses import list_hypotheses
from bot.store.records import audit_events
from flagbot_lab.standin import Message
from tests.support.slack_bot import RunningBot, running_bot

pytestmark = pytest.mark.asyncio
CHANNEL = "C0FLAGBOT"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
    )
    settings = load_settings(config, required=True)
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(settings, store) as running:
            yield running
    finally:
        await store.aclose()


async def test_a_usage_error_is_answered_ephemerally_with_an_example(bot: RunningBot) -> None:
    answer = await bot.standin.slash("try max_running_requests>>48", user="U0OPER", channel=CHANNEL)
    assert answer.status == 200
    body = answer.json()
    assert body["response_type"] == "ephemeral" and "example:" in body["text"]


async def test_help_is_posted_in_the_channel(bot: RunningBot) -> None:
    answer = await bot.standin.slash("help try", user="U0VIEW", channel=CHANNEL)
    assert answer.status == 200
    posted = await bot.standin.wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL) if "try CHANGE" in str(m.blocks)]
    )
    assert posted


async def test_a_viewer_may_not_try_and_the_refusal_is_audited(bot: RunningBot) -> None:
    answer = await bot.standin.slash("try add --enable-metrics", user="U0VIEW", channel=CHANNEL)
    body = answer.json()
    assert body["response_type"] == "ephemeral" and "operator" in body["text"], body
    await bot.services.drain()  # the audit is written after the ack
    events = await bot.services.store.run(audit_events, bot.services.store.store, "lab")
    refused = [e for e in events if e.action == "slack:try" and e.actor == "slack:U0VIEW"]
    assert refused and refused[0].detail["allowed"] is False
    assert not bot.standin.messages(CHANNEL)  # nothing was started


async def test_a_hypothesis_is_recorded_from_slack_by_an_operator_not_a_viewer(bot: RunningBot) -> None:
    text = 'hypothesis add "fused MoE sum costs KV memory" max_running_requests>=48'
    refused = await bot.standin.slash(text, user="U0VIEW", channel=CHANNEL)
    assert refused.json()["response_type"] == "ephemeral"
    assert "`hypothesis add` changes the target: it needs the operator role" in refused.json()["text"]
    assert await bot.services.store.run(list_hypotheses, bot.services.store.store, "lab") == []
    answer = await bot.standin.slash(text, user="U0OPER", channel=CHANNEL)
    assert answer.status == 200
    await bot.standin.wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL) if "recorded" in str(m.blocks)]
    )
    rows = await bot.services.store.run(list_hypotheses, bot.services.store.store, "lab")
    assert [row.statement for row in rows] == ["fused MoE sum costs KV memory"]


async def test_bad_and_stale_signatures_are_rejected(bot: RunningBot) -> None:
    for signing in ("wrong", "stale"):
        answer = await bot.standin.slash("help", user="U0OPER", channel=CHANNEL, signing=signing)  # type: ignore[arg-type]
        assert answer.status == 401, (signing, answer.body)


async def test_a_mention_in_a_thread_answers_there_once(bot: RunningBot) -> None:
    root = bot.standin.workspace.post(CHANNEL, user="U0OPER", text="investigating")
    answer = await bot.standin.mention("log", user="U0OPER", channel=CHANNEL, thread_ts=root.ts)
    assert answer.status == 200

    def bot_replies() -> list[Message]:
        return [m for m in bot.standin.thread(CHANNEL, root.ts) if m.user != "U0OPER" and m.ts != root.ts]

    await bot.standin.wait_for(bot_replies)
    await bot.services.drain()  # every reply of the first delivery posted, not only the first one
    replies = bot_replies()
    assert replies and all(m.thread_ts == root.ts for m in replies)
    again = await bot.standin.redeliver()
    assert again.status == 200
    await bot.services.drain()
    assert len(bot_replies()) == len(replies)


async def test_twenty_commands_at_once_are_all_acknowledged(bot: RunningBot) -> None:
    answers = await asyncio.gather(
        *(bot.standin.slash("help", user="U0VIEW", channel=CHANNEL) for _ in range(20))
    )
    assert [a.status for a in answers] == [200] * 20  # how soon under load: bench/ack_latency.py


async def test_a_broken_button_gets_a_specific_ephemeral_error(bot: RunningBot) -> None:
    button = {
        "type": "button",
        "action_id": "flagbot_revert",
        "text": {"type": "plain_text", "text": "Revert"},
    }
    blocks = [{"type": "actions", "block_id": "b1", "elements": [{**button, "value": "not json"}]}]
    message = bot.standin.workspace.post(CHANNEL, text="an old card", blocks=blocks)
    answer = await bot.standin.click(CHANNEL, message.ts, "flagbot_revert", user="U0OPER")
    assert answer.status == 200
    shown = await bot.standin.wait_for(lambda: bot.standin.ephemerals("U0OPER"))
    assert "JSON" in shown[-1].text or "json" in shown[-1].text, shown[-1].text


async def test_keep_is_recorded_once_even_after_a_restart(bot: RunningBot) -> None:
    from bot.slack.render import action_value
    from bot.store.experiments import get_experiment
    from tests.support.pending_decision import pending_try

    store = bot.services.store
    row = await store.run(
        get_experiment, store.store, await pending_try(store, "lab")
    )  # a decision pending: Keep answers it
    assert row is not None
    button = {"type": "button", "action_id": "flagbot_keep", "text": {"type": "plain_text", "text": "Keep"}}
    value = action_value(row.id or 0, "keep", "n7keep")
    blocks = [{"type": "actions", "block_id": "b1", "elements": [{**button, "value": value}]}]
    message = bot.standin.workspace.post(CHANNEL, text="a finished card", blocks=blocks)
    await bot.standin.click(CHANNEL, message.ts, "flagbot_keep", user="U0OPER")
    await bot.standin.wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL, message.ts) if "clicked" in m.text]
    )
    await bot.services.drain()
    bot.services.seen.clear()  # what a restarted bot remembers in memory: nothing
    await bot.standin.click(CHANNEL, message.ts, "flagbot_keep", user="U0OPER")
    await bot.services.drain()
    events = await bot.services.store.run(audit_events, bot.services.store.store, "lab")
    assert [e.detail["experiment_id"] for e in events if e.action == "keep"] == [row.id]
    clicked = [m for m in bot.standin.messages(CHANNEL, message.ts) if "clicked" in m.text]
    assert len(clicked) == 1
