"""Slack's Web API failing under a run (issue 10 item 4): retried or reported, never lost silently.

The stand-in answers chosen calls with HTTP 429 (`rate_limit`, Retry-After 1 s) or with a
Slack error (`fail`); the run is a real `try` through the app, on a target that listens
nowhere, so it ends (failed at its preflight) within a second. The store is the truth: whatever
Slack does, the run is recorded to its end, and what the thread misses is logged with an error
id that the thread (or the user) is given.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.experiments import get_experiment
from tests.support.sample_thread import bot_without_hosts
from tests.support.slack_bot import RunningBot

CHANNEL = "C0FLAGBOT"
OPERATOR = "U0OPER"
TRY = "try add --enable-metrics"
ERROR_ID = re.compile(r"error id ([0-9a-f]{10})")
LOGGED_ID = re.compile(r"flagbot error ([0-9a-f]{10})")


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with bot_without_hosts(tmp_path) as running:
        yield running


async def _try(bot: RunningBot, failing: str | None = None, error: str = "", times: int = 0) -> None:
    """An operator's `try`, with `failing` (a Web API method) answering `error` `times` times."""
    if failing is not None:
        bot.standin.fail(failing, error, times)
    answer = await bot.standin.slash(TRY, user=OPERATOR, channel=CHANNEL)
    assert answer.status == 200 and "starting `try`" in answer.body, answer.body
    await bot.services.drain()


async def _finished_run(bot: RunningBot) -> tuple[str, str | None]:
    row = await bot.services.store.run(get_experiment, bot.services.store.store, 1)
    assert row is not None, "the run is not in the store"
    assert row.finished_at is not None, f"the run was left {row.status}"
    return row.status, row.summary


def _unexpected(bot: RunningBot) -> list[str]:
    return [e.text for e in bot.standin.ephemerals(OPERATOR) if "something went wrong" in e.text]


def _card(bot: RunningBot) -> str:
    [card] = [m for m in bot.standin.messages(CHANNEL) if m.text.startswith("flagbot try")]
    return card.text


async def test_a_rate_limited_card_update_is_retried(bot: RunningBot) -> None:
    bot.standin.rate_limit("chat.update", 1)
    await _try(bot)
    statuses = [call.status for call in bot.standin.calls("chat.update")]
    assert statuses[0] == 429 and all(status == 200 for status in statuses[1:]) and len(statuses) > 2
    status, _ = await _finished_run(bot)
    assert status == "failed" and "failed" in _card(bot)  # the card reached the run's end
    assert not _unexpected(bot)


async def test_a_rate_limited_card_post_and_ephemeral_are_retried(bot: RunningBot) -> None:
    bot.standin.rate_limit("chat.postMessage", 1)
    await _try(bot)
    posts = bot.standin.calls("chat.postMessage")
    assert posts[0].status == 429 and posts[1].ok
    assert (await _finished_run(bot))[0] == "failed" and "failed" in _card(bot)

    bot.standin.rate_limit("chat.postEphemeral", 1)
    await bot.standin.mention("try max_running_requests>>48", user=OPERATOR, channel=CHANNEL)
    await bot.services.drain()
    shown = [e.text for e in bot.standin.ephemerals(OPERATOR) if e.text.startswith("error:")]
    assert shown, "the usage error was lost to the 429"
    assert [c.status for c in bot.standin.calls("chat.postEphemeral")][:2] == [429, 200]


async def test_a_card_that_cannot_be_updated_does_not_stop_the_run(
    bot: RunningBot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="bot.slack")
    await _try(bot, "chat.update", "internal_error", 1000)
    status, summary = await _finished_run(bot)
    assert status == "failed" and summary and "127.0.0.1:9" in summary  # ran to its end
    logged = {m.group(1) for r in caplog.records if (m := LOGGED_ID.search(r.getMessage()))}
    assert len(logged) == 1, [r.getMessage() for r in caplog.records]  # one id for the thread
    told = [
        f"{m.text} {m.blocks}"
        for m in bot.standin.workspace.all_messages(CHANNEL)
        if "Slack refused" in str(m.blocks)
    ]
    assert len(told) == 1 and set(ERROR_ID.findall(told[0])) == logged, (told, logged)
    assert "ended failed" in told[0]
    assert not _unexpected(bot)


async def test_a_card_that_cannot_be_posted_is_reported_and_nothing_starts(
    bot: RunningBot, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="bot.slack")
    await _try(bot, "chat.postMessage", "fatal_error", 1)
    [shown] = _unexpected(bot)
    [ident] = ERROR_ID.findall(shown)
    assert [m.group(1) for r in caplog.records if (m := LOGGED_ID.search(r.getMessage()))] == [ident]
    assert await bot.services.store.run(get_experiment, bot.services.store.store, 1) is None
    assert not bot.standin.messages(CHANNEL)
