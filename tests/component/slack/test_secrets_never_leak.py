"""Tokens and secrets never appear in logs, Slack messages or the store (issue 10 item 6).

The real app runs against the stand-in with its target unreachable, so commands take their
error paths too (SSH refused, usage errors, an unknown command, a forged click). Then
everything flagbot produced is scanned for the bot token, the app token and the signing
secret: every log record at DEBUG (slack_bolt's and slack_sdk's included), every Web API call's
arguments and every answer shown in Slack, and every row of every table in the store.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from bot.store import Store
from tests.support.sample_thread import bot_without_hosts
from tests.support.slack_bot import APP_TOKEN, SIGNING_SECRET, TOKEN

SECRETS = {"bot token": TOKEN, "app token": APP_TOKEN, "signing secret": SIGNING_SECRET}
CHANNEL = "C0FLAGBOT"


def _leaks(where: str, text: str) -> list[str]:
    return [f"{name} in {where}" for name, secret in SECRETS.items() if secret in text]


async def test_no_secret_in_logs_messages_or_the_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with bot_without_hosts(tmp_path) as running:
        standin = running.standin
        for text in (
            "help",
            "status",
            "try add --enable-metrics",
            "try add --no-such-flag",
            "frobnicate",
        ):
            await standin.slash(text, user="U0OPER", channel=CHANNEL)
        await standin.slash("status", user="U0OPER", channel=CHANNEL, signing="wrong")
        await running.services.drain()
        calls = [
            json.dumps(call.params, default=str) + json.dumps(call.response, default=str)
            for call in standin.calls()
        ]
        answers = [json.dumps(post.body, default=str) for post in standin.responses()]
    assert standin.calls("chat.postMessage"), "the commands were answered in Slack"
    leaks: list[str] = []
    for record in caplog.records:
        text = record.getMessage() + (caplog.handler.format(record) if record.exc_info else "")
        leaks += _leaks(f"log {record.name}", text)
    for text in calls:
        leaks += _leaks("a Web API call", text)
    for text in answers:
        leaks += _leaks("an answer", text)
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    try:
        meta = MetaData()
        meta.reflect(store.engine)
        with store.engine.connect() as connection:
            for table in meta.sorted_tables:
                for row in connection.execute(select(table)):
                    leaks += _leaks(f"table {table.name}", json.dumps(dict(row._mapping), default=str))
    finally:
        store.close()
    assert leaks == []
    assert len(caplog.records) > 20, "the scan saw the bot's logging"
