"""Read commands are rate-limited per Slack user, through the real slack-bolt app on the stand-in.

`[slack] read_commands_per_minute = 3`: a viewer's fourth read in a minute is answered in the
ack (slash command) or ephemerally (mention) with when to try again, audited as refused, and
nothing is posted for it; another user still reads; `help` is free. The limiter's clock is the
test's, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.slack.rate_limit import ReadLimiter
from bot.store import AsyncStore, Store
from bot.store.records import audit_events
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, running_bot

VIEWER, OTHER = "U0VIEW", "U0APPR"
CHANNEL = "C0READS"
CONFIG = """default_target = "lab"
[database]
sqlite_path = "{db}"
[slack]
read_commands_per_minute = 3
[slack.rbac]
viewers = ["*"]
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
"""


class Clock:
    now = 500.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    db = tmp_path / "flagbot.db"
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(db=db))
    sync = Store.open(f"sqlite:///{db}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(load_settings(config, required=True), store) as running:
            running.standin.workspace.add_channel(Channel(CHANNEL, "reads"))
            yield running
    finally:
        await store.aclose()


def _posted(bot: RunningBot) -> int:
    return len([m for m in bot.standin.workspace.all_messages(CHANNEL) if m.user not in (VIEWER, OTHER)])


async def test_the_fourth_read_in_a_minute_is_refused_in_the_ack_and_runs_nothing(bot: RunningBot) -> None:
    clock = Clock()
    bot.services.read_limiter = ReadLimiter(clock)
    for _ in range(3):
        answer = await bot.standin.slash("playbooks", user=VIEWER, channel=CHANNEL)
        assert answer.status == 200 and "try again" not in answer.body
        clock.now += 1.0
    await bot.services.drain()
    posted = _posted(bot)
    assert posted >= 3  # each read answered in the channel

    answer = await bot.standin.slash("playbooks", user=VIEWER, channel=CHANNEL)
    body = answer.json()
    assert answer.status == 200 and body["response_type"] == "ephemeral", body
    assert body["text"].startswith("you ran 3 read commands in the last minute; try again in 57s"), body
    await bot.standin.mention("playbooks", user=VIEWER, channel=CHANNEL)
    help_answer = await bot.standin.slash("help", user=VIEWER, channel=CHANNEL)
    assert "try again" not in help_answer.body
    await bot.services.drain()
    shown = [e.text for e in bot.standin.ephemerals(VIEWER) if "try again" in e.text]
    assert len(shown) == 2  # the slash command's ack and the mention's ephemeral answer
    assert all(t.startswith("you ran 3 read commands in the last minute; try again in 57s") for t in shown)
    assert _posted(bot) == posted + 1  # help's answer only: neither refused read ran

    refused = [
        e.detail
        for e in await bot.services.store.run(audit_events, bot.services.store.store, "lab")
        if e.action == "slack:playbooks" and not e.detail["allowed"]
    ]
    assert len(refused) == 2 and all("read_commands_per_minute" in d["reason"] for d in refused)

    other = await bot.standin.slash("playbooks", user=OTHER, channel=CHANNEL)
    assert "try again" not in other.body  # the limit is per user
    clock.now += 60.0
    again = await bot.standin.slash("playbooks", user=VIEWER, channel=CHANNEL)
    assert "try again" not in again.body  # a minute later, reads run again
    await bot.services.drain()
    assert _posted(bot) == posted + 3
