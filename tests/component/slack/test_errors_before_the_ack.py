"""Nasty texts through the real slack-bolt path (issue 17 item 9): each is acknowledged in time
with its own specific refusal, in HTTP mode (signed requests) and in Socket Mode (a JSON
envelope, which can carry what a form cannot: a lone surrogate). Before, `since=99999999999d`
and a lone surrogate in a grep pattern raised after parsing and Slack got no ack at all.

The target listens nowhere and nothing here may reach it: each text is refused before the ack.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.store import AsyncStore, Store
from bot.store.records import audit_events
from tests.support.slack_bot import RunningBot, running_bot

pytestmark = pytest.mark.asyncio
CHANNEL = "C0FLAGBOT"
NASTY = [
    ("grep x since=99999999999d", "since='99999999999d': at most 366d"),
    ("log since=9999999999999999999999d", "at most 366d"),
    ("bench wait=99999999999d", "at most 1d"),
    ("log limit=99999999999", "expected a positive whole number"),
    ("hypothesis show 99999999999", "an id is at most 2147483647"),
    ("digest week=9999-W52", "a year from 2000 to 2100"),
    ('grep "a\u2028b"', "a line separator (U+2028)"),
    ('hypothesis add "fusion\u0085costs KV"', "a next-line character (U+0085)"),
    ('try add --served-model-name "q\u2029ExecStartPre=/bin/sh"', "a paragraph separator (U+2029)"),
    ('try env set NCCL_DEBUG="INFO\vx"', "a vertical tab"),
    ('grep "a\fb"', "a form feed"),
    ('grep "unterminated', "a quote is not closed"),
    ("status --target nope", "unknown target 'nope'"),
    ("grep x scope=since", "scope=since needs since=DURATION"),
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
    )
    return path


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        yield store
    finally:
        await store.aclose()


async def _refused_in_the_ack(bot: RunningBot, text: str, says: str) -> None:
    answer = await bot.standin.slash(text, user="U0ADMIN", channel=CHANNEL)
    assert answer.status == 200, (text, answer.status, answer.body)
    body = answer.json()
    assert body["response_type"] == "ephemeral", (text, body)
    assert body["text"].startswith("error: ") and says in body["text"], (text, body["text"])
    assert "something went wrong" not in body["text"]


async def test_nasty_texts_are_refused_in_the_ack_over_http(config: Path, store: AsyncStore) -> None:
    async with running_bot(load_settings(config, required=True), store) as bot:
        for text, says in NASTY:
            await _refused_in_the_ack(bot, text, says)
        await bot.services.drain()
        posted = [m for m in bot.standin.messages(CHANNEL) if m.user != "U0ADMIN"]
        assert posted == [], [m.text for m in posted]  # nothing ran after the ack
    events = await store.run(audit_events, store.store, "lab")
    assert not [e for e in events if e.action.startswith("slack:") and e.detail.get("decision") == "allowed"]


async def test_a_lone_surrogate_is_refused_in_the_ack_in_socket_mode(config: Path, store: AsyncStore) -> None:
    async with running_bot(load_settings(config, required=True), store, socket_mode=True) as bot:
        await _refused_in_the_ack(bot, "grep \ud800oops", "a lone surrogate (U+D800)")
        await _refused_in_the_ack(bot, "hypothesis add \udcff", "a lone surrogate (U+DCFF)")
        await _refused_in_the_ack(bot, "grep x since=99999999999d", "at most 366d")


async def test_a_lone_surrogate_in_a_mention_gets_a_specific_ephemeral(
    config: Path, store: AsyncStore
) -> None:
    async with running_bot(load_settings(config, required=True), store) as bot:
        root = bot.standin.workspace.post(CHANNEL, user="U0OPER", text="investigating")
        answer = await bot.standin.mention("grep \ud800", user="U0OPER", channel=CHANNEL, thread_ts=root.ts)
        assert answer.status == 200
        shown = await bot.standin.wait_for(lambda: bot.standin.ephemerals("U0OPER"))
        assert "a lone surrogate (U+D800)" in shown[-1].text, shown[-1].text
