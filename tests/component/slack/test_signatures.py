"""HTTP mode rejects unsigned, wrongly signed, stale and replayed requests, and does nothing for them.

tests/component/slack/test_flagbot_app.py already checks a wrong and a stale signature on a
`help` slash command (401). What is added here: the missing signature, the mention and the
button click paths, that a rejected request leaves no trace (no Slack call, no audit, no run:
an operator's `try` would start one), and replays of a request the bot accepted: with its
timestamp moved (the signature no longer matches), re-signed with a timestamp over 5 minutes
old or ahead, and a stale one marked as Slack's own retry.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from bot.slack.card import action_value
from bot.store.records import audit_events
from flagbot_lab.standin.outbound import STALE_AFTER_S, BotRequest, signature
from tests.support.sample_thread import bot_without_hosts
from tests.support.slack_bot import SIGNING_SECRET, RunningBot

CHANNEL = "C0FLAGBOT"
OPERATOR = "U0OPER"
TRY = "try add --enable-metrics"
SLACK_CALLS = ("chat.postMessage", "chat.postEphemeral", "chat.update")


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with bot_without_hosts(tmp_path) as running:
        yield running


async def _traces(bot: RunningBot) -> tuple[int, int, int]:
    """What an acted-on request leaves: Slack calls by the bot, ephemerals, audit events."""
    await bot.services.drain()
    calls = sum(len(bot.standin.calls(method)) for method in SLACK_CALLS)
    events = await bot.services.store.run(audit_events, bot.services.store.store, "lab")
    return calls, len(bot.standin.ephemerals()), len(events)


def _card(bot: RunningBot) -> str:
    button = {
        "type": "button",
        "action_id": "flagbot_revert",
        "text": {"type": "plain_text", "text": "Revert"},
        "value": action_value(7, "revert", "n7revert"),
    }
    card = bot.standin.workspace.post(
        CHANNEL, text="a finished card", blocks=[{"type": "actions", "block_id": "b7", "elements": [button]}]
    )
    return card.ts


@pytest.mark.parametrize("signing", ["unsigned", "wrong", "stale"])
@pytest.mark.parametrize("kind", ["slash", "mention", "click"])
async def test_a_badly_signed_request_is_rejected_and_does_nothing(
    bot: RunningBot, kind: str, signing: str
) -> None:
    card_ts = _card(bot)
    before = await _traces(bot)
    if kind == "slash":
        answer = await bot.standin.slash(TRY, user=OPERATOR, channel=CHANNEL, signing=signing)  # type: ignore[arg-type]
    elif kind == "mention":
        answer = await bot.standin.mention(TRY, user=OPERATOR, channel=CHANNEL, signing=signing)  # type: ignore[arg-type]
    else:
        answer = await bot.standin.click(CHANNEL, card_ts, "flagbot_revert", user=OPERATOR, signing=signing)  # type: ignore[arg-type]
    assert answer.status == 401, (kind, signing, answer.body)
    assert await _traces(bot) == before


async def test_a_replayed_request_with_a_stale_or_moved_timestamp_is_rejected(bot: RunningBot) -> None:
    accepted = await bot.standin.slash(TRY, user=OPERATOR, channel=CHANNEL)
    assert accepted.status == 200 and "starting `try`" in accepted.body
    captured = accepted.request
    assert isinstance(captured, BotRequest)
    after_first = await _traces(bot)
    assert after_first[2] >= 1  # the decision (and the run's own events), audited

    old = str(int(time.time()) - STALE_AFTER_S - 60)
    ahead = str(int(time.time()) + STALE_AFTER_S + 60)
    replays = {
        "timestamp moved, signature kept": replace(captured, timestamp=old),
        "re-signed 6 minutes ago": replace(
            captured, timestamp=old, signature=signature(SIGNING_SECRET, old, captured.body)
        ),
        "re-signed 6 minutes ahead": replace(
            captured, timestamp=ahead, signature=signature(SIGNING_SECRET, ahead, captured.body)
        ),
    }
    replays["stale, as Slack's retry"] = replays["re-signed 6 minutes ago"].retried(1, "http_timeout")
    for what, request in replays.items():
        answer = await bot.standin.send(request)
        assert answer.status == 401, (what, answer.body)
    assert await _traces(bot) == after_first, "a rejected replay did something"
    cards = [m for m in bot.standin.messages(CHANNEL) if "try" in m.text]
    assert len(cards) == 1, [m.text for m in cards]
