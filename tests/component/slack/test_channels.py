"""`[slack] channels` and a target's own `channel`, through the real slack-bolt app on the
stand-in: flagbot answers slash commands and mentions there (by id, or by #name), and elsewhere
only with an ephemeral pointer naming those channels; nothing runs there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.app.channels import allowed_channels
from bot.config import load_settings
from bot.store import AsyncStore, Store
from flagbot_lab.standin.model import Channel
from tests.support.host_flags import seed_flag_lists
from tests.support.slack_bot import RunningBot, running_bot

USER = "U0VIEW"
OPS, LAB, ELSEWHERE = "C0OPS", "C0LABCH", "C0RANDOM"
CONFIG = """default_target = "lab"
[database]
sqlite_path = "{db}"
[slack]
channels = ["{ops}"]
[slack.rbac]
viewers = ["*"]
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
channel = "#lab-tuning"
"""
POINTER = (
    "flagbot answers commands only in <#C0OPS>, #lab-tuning (`[slack] channels` and the targets' own "
    "`channel`): run it there"
)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    db = tmp_path / "flagbot.db"
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(db=db, ops=OPS))
    sync = Store.open(f"sqlite:///{db}")
    sync.upgrade()
    store = AsyncStore(sync)
    settings = load_settings(config, required=True)
    seed_flag_lists(settings)
    try:
        async with running_bot(settings, store) as running:
            for ident, name in ((OPS, "ops"), (LAB, "lab-tuning"), (ELSEWHERE, "random")):
                running.standin.workspace.add_channel(Channel(ident, name))
            yield running
    finally:
        await store.aclose()


async def test_the_allowed_channels_are_the_slack_list_then_each_targets_own(bot: RunningBot) -> None:
    assert allowed_channels(bot.services.settings) == (OPS, "#lab-tuning")


async def test_elsewhere_a_slash_command_and_a_mention_get_only_the_pointer(bot: RunningBot) -> None:
    answer = await bot.standin.slash("help", user=USER, channel=ELSEWHERE)
    body = answer.json()
    assert (answer.status, body["response_type"], body["text"]) == (200, "ephemeral", POINTER)
    await bot.standin.mention("help", user=USER, channel=ELSEWHERE)
    await bot.services.drain()
    assert [e.text for e in bot.standin.ephemerals(USER)] == [POINTER, POINTER]
    assert [m for m in bot.standin.workspace.all_messages(ELSEWHERE) if m.user != USER] == []


@pytest.mark.parametrize("channel", [OPS, LAB], ids=["slack-channels-by-id", "targets-own-by-name"])
async def test_in_an_allowed_channel_flagbot_answers(bot: RunningBot, channel: str) -> None:
    answer = await bot.standin.slash("help", user=USER, channel=channel)
    assert answer.status == 200 and POINTER.encode() not in bytes(answer.body or b"")
    await bot.standin.mention("help", user=USER, channel=channel)
    await bot.services.drain()
    assert POINTER not in [e.text for e in bot.standin.ephemerals(USER)]
    answered = [m for m in bot.standin.workspace.all_messages(channel) if m.user != USER]
    assert answered, "the mention's help was not posted"
