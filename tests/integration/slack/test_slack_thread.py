"""`/flagbot try` through the Slack stand-in on the two-node testbed (issue 7, item 9).

A try opens a thread whose card goes through every step, evidence arrives as replies, the
verdict is broadcast, the card ends with buttons; Revert reverts and verifies (a double click
acts once); `@flagbot verify` in the thread answers in the thread; then `/flagbot status` says how /health was
reached and the latest start's capacity beside the known-good one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bot.store.experiments import list_experiments
from tests.integration.target.support_control import on_baseline  # noqa: F401
from tests.support.slack_bot import RunningBot

pytestmark = pytest.mark.asyncio(loop_scope="session")
CHANNEL = "C0FLAGBOT"
BOTH = "--enable-flashinfer-allreduce-fusion --enable-fused-moe-sum-all-reduce"


def cards(bot: RunningBot, thread_ts: str | None = None) -> list[Any]:
    messages = bot.standin.thread(CHANNEL, thread_ts) if thread_ts else bot.standin.messages(CHANNEL)
    return [
        m for m in messages if m.metadata and m.metadata.get("event_type") == "flagbot_experiment" and m.edits
    ]


def actions(message: Any) -> list[str]:
    return [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


@pytest.mark.usefixtures("on_baseline")
async def test_a_try_in_a_thread_then_revert_by_button_and_verify_by_mention(bot: RunningBot) -> None:
    standin = bot.standin
    pinned = await standin.slash("baseline pin", user="U0ADMIN", channel=CHANNEL)
    assert pinned.status == 200
    await bot.services.drain()

    answer = await standin.slash(f"try {BOTH} keep=always", user="U0OPER", channel=CHANNEL)
    assert (
        answer.status == 200
    )  # acked; how fast is bench/ack_latency.py's figure, not a bound a busy machine can break
    await bot.services.drain()
    tries = [m for m in cards(bot) if "flagbot try" in m.text and m.thread_ts in (None, m.ts)]
    shown = [(m.text[:80], m.thread_ts, bool(m.metadata), len(m.edits)) for m in standin.messages(CHANNEL)]
    assert tries, (shown, standin.ephemerals())
    card = tries[0]
    assert len(card.edits) >= 10  # edited in place as the steps ran
    final = str(card.blocks)
    # kept by keep=always: nothing pending (no Keep); Revert and Isolate (two flags) fit it
    assert "regressed" in final and set(actions(card)) >= {"flagbot_revert", "flagbot_isolate"}
    assert "flagbot_keep" not in actions(card)
    replies = standin.thread(CHANNEL, card.ts)[1:]
    text = str([r.blocks for r in replies])
    assert "max_running_requests" in text and "26" in text and "48" in text
    assert len(replies) <= 6, [r.text for r in replies]  # one reply per part, then the end
    ended = [r for r in replies if r.reply_broadcast]  # the verdict, also in the channel
    assert len(ended) == 1 and ended[0].text.startswith("<@")  # mentioning the requester
    assert any(b.get("type") == "image" for r in replies for b in r.blocks)  # the benchmark chart

    clicked = await standin.click(CHANNEL, card.ts, "flagbot_revert", user="U0OPER")
    again = await standin.click(CHANNEL, card.ts, "flagbot_revert", user="U0OPER")
    assert clicked.status == 200 and again.status == 200
    await bot.services.drain()
    store = bot.services.store
    reverts = [e for e in await store.run(list_experiments, store.store, "twin") if e.playbook == "revert"]
    assert len(reverts) == 1 and reverts[0].verdict == "pass", [(e.status, e.summary) for e in reverts]
    assert any("clicked" in m.text for m in standin.thread(CHANNEL, card.ts))

    mention = await standin.mention(
        "verify max_running_requests>=48", user="U0OPER", channel=CHANNEL, thread_ts=card.ts
    )
    assert mention.status == 200

    def verified() -> list[Any]:  # the listener runs after Bolt's ack: wait for its card to finish
        done = [m for m in cards(bot, card.ts) if "flagbot verify" in m.text and "succeeded" in m.text]
        return done

    verify_cards = await standin.wait_for(verified, timeout=180)
    await bot.services.drain()
    assert all(m.thread_ts == card.ts for m in verify_cards)
    assert "pass" in str(verify_cards[-1].blocks)

    status = await standin.slash("status", user="U0OPER", channel=CHANNEL)
    assert status.status == 200
    answers = await standin.wait_for(
        lambda: [m for m in standin.messages(CHANNEL) if "/health" in str(m.blocks)], timeout=60
    )
    answered = json.dumps([m.blocks for m in answers], default=str)
    assert "/health 200" in answered and "HTTP: direct" in answered, answered[-2000:]
    assert "latest start: snapshot #" in answered and "known-good #" in answered, answered[-2000:]
