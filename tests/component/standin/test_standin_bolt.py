"""Signed requests from the stand-in verified by a real Bolt app served over HTTP."""

from __future__ import annotations

import json

import pytest

from flagbot_lab.standin import BOT_USER_ID, SlashInThreadError, Standin
from tests.support.standin_fixtures import BoltBot

OPS = "C0FLAGBOT"


def revert_card(experiment_id: int) -> list[dict[str, object]]:
    value = json.dumps({"experiment_id": experiment_id, "action": "revert", "nonce": "n1"})
    return [
        {"type": "section", "block_id": "summary", "text": {"type": "mrkdwn", "text": "*regressed*"}},
        {
            "type": "actions",
            "block_id": "verdict-7",
            "elements": [
                {
                    "type": "button",
                    "action_id": "flagbot_keep",
                    "text": {"type": "plain_text", "text": "Keep"},
                    "value": "k",
                },
                {
                    "type": "button",
                    "action_id": "flagbot_revert",
                    "text": {"type": "plain_text", "text": "Revert"},
                    "value": value,
                    "style": "danger",
                },
            ],
        },
    ]


async def test_slash_command_is_acked_and_responds(standin: Standin, bolt_bot: BoltBot) -> None:
    answer = await standin.slash("status", user="U0OPER", channel=OPS)
    assert answer.status == 200
    assert answer.body == "working on `status`"
    [body] = await bolt_bot.wait("command")
    assert (body["user_id"], body["channel_id"], body["command"]) == ("U0OPER", OPS, "/flagbot")
    assert body["response_url"].startswith(standin.base_url) and body["trigger_id"]
    await standin.wait_for(lambda: len(standin.ephemerals("U0OPER")) == 2)
    notes = standin.ephemerals("U0OPER")
    assert {n.text for n in notes} == {"working on `status`", "done: status"}  # either may land first
    assert {n.channel for n in notes} == {OPS}
    assert {(r.via, r.body["text"]) for r in standin.responses()} == {
        ("ack", "working on `status`"),
        ("response_url", "done: status"),
    }


async def test_slash_command_in_a_thread_is_refused_like_slack(standin: Standin, bolt_bot: BoltBot) -> None:
    with pytest.raises(SlashInThreadError, match="not supported in threads"):
        await standin.slash("status", user="U0OPER", channel=OPS, thread_ts="1764450000.000100")
    assert standin.sent() == []


async def test_mention_reaches_the_bot_which_replies_in_the_thread(
    standin: Standin, bolt_bot: BoltBot
) -> None:
    answer = await standin.mention("why 26?", user="U0VIEW", channel=OPS)
    assert answer.status == 200
    [body] = await bolt_bot.wait("mention")
    event = body["event"]
    assert event["type"] == "app_mention" and event["text"] == f"<@{BOT_USER_ID}> why 26?"
    assert body["event_id"].startswith("Ev")
    [asked] = standin.messages(OPS)
    assert asked.user == "U0VIEW" and asked.ts == event["ts"]
    [reply] = await standin.wait_for(lambda: standin.messages(OPS, thread_ts=asked.ts))
    assert reply.text == "on it" and reply.user == BOT_USER_ID

    again = await standin.mention("and now?", user="U0VIEW", channel=OPS, thread_ts=asked.ts)
    assert again.status == 200
    bodies = await bolt_bot.wait("mention", 2)
    assert bodies[1]["event"]["thread_ts"] == asked.ts
    assert bodies[0]["event_id"] != bodies[1]["event_id"]


async def test_redelivery_sends_the_same_request_marked_as_a_retry(
    standin: Standin, bolt_bot: BoltBot
) -> None:
    first = await standin.mention("status", user="U0VIEW", channel=OPS)
    await bolt_bot.wait("mention")
    second = await standin.redeliver(first.request, retry_num=1)
    assert second.status == 200 and second.request.body == first.request.body
    bodies = await bolt_bot.wait("mention", 2)
    assert bodies[0]["event_id"] == bodies[1]["event_id"]
    assert bolt_bot.retry_nums == [None, "1"]


async def test_click_uses_the_stored_buttons(standin: Standin, bolt_bot: BoltBot) -> None:
    client = bolt_bot.app.client
    root = await client.chat_postMessage(channel=OPS, text="try", blocks=revert_card(7))
    answer = await standin.click(OPS, root["ts"], "flagbot_revert", user="U0OPER")
    assert answer.status == 200
    [body] = await bolt_bot.wait("action")
    [action] = body["actions"]
    assert action["block_id"] == "verdict-7" and json.loads(action["value"])["experiment_id"] == 7
    assert body["container"]["message_ts"] == root["ts"] and body["user"]["id"] == "U0OPER"
    assert body["message"]["blocks"][1]["block_id"] == "verdict-7"
    await standin.wait_for(lambda: any(m.text == "reverting" for m in standin.messages(OPS)))
    with pytest.raises(KeyError, match="flagbot_isolate"):
        await standin.click(OPS, root["ts"], "flagbot_isolate", user="U0OPER")


@pytest.mark.parametrize("signing", ["wrong", "stale", "unsigned"])
async def test_bad_signatures_get_401_from_bolt(standin: Standin, bolt_bot: BoltBot, signing: str) -> None:
    answer = await standin.slash("status", user="U0OPER", channel=OPS, signing=signing)  # type: ignore[arg-type]
    assert answer.status == 401
    mention = await standin.mention("status", user="U0OPER", channel=OPS, signing=signing)  # type: ignore[arg-type]
    assert mention.status == 401
    assert bolt_bot.seen == {"command": [], "mention": [], "action": []}
