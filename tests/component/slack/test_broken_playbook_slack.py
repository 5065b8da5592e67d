"""A broken custom playbook breaks only itself, in Slack (real Bolt on the stand-in): the
built-in `try` is still accepted and starts, `playbooks` lists the broken file with its error, and
`run NAME` of the broken one answers with its load error before the ack (issue 22 item 4)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flagbot_lab.standin.model import Channel, Message
from tests.support.slack_bot import RunningBot, configured_bot, lab_config

OPERATOR = "U0OPER"
CHANNEL = "C0BOOKS"
CONFIG = lab_config(
    """operators = ["U0OPER"]
viewers = ["*"]
""",
    before='playbook_dirs = ["{books}"]\n',
)
GOOD = "name: greet\ndescription: a good custom playbook\nmutating: true\nsteps: [{action: heal}]\n"
BROKEN = "name: tpyo\ndescription: a typo in a step\nsteps:\n  - action: snapshott\n"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    books = tmp_path / "books"
    books.mkdir()
    (books / "greet.yaml").write_text(GOOD)
    (books / "tpyo.yaml").write_text(BROKEN)
    config = CONFIG.replace("{books}", str(books))
    async with configured_bot(tmp_path, config, Channel(CHANNEL, "books"), known_flags=False) as running:
        yield running


def bot_posts(bot: RunningBot) -> list[Message]:
    return [m for m in bot.standin.workspace.all_messages(CHANNEL) if m.user != OPERATOR]


async def test_try_is_still_accepted_beside_a_broken_playbook(bot: RunningBot) -> None:
    body = (
        await bot.standin.slash("try dry-run=yes env set NCCL_DEBUG=INFO", user=OPERATOR, channel=CHANNEL)
    ).json()
    assert body["text"] == "starting `try`: follow it in the thread", body
    card = await bot.standin.wait_for(lambda: [m for m in bot_posts(bot) if m.text.startswith("flagbot try")])
    assert card  # the run started: its status card is the thread's root


async def test_playbooks_lists_the_broken_one_with_its_error(bot: RunningBot) -> None:
    answer = await bot.standin.slash("playbooks", user=OPERATOR, channel=CHANNEL)
    assert answer.status == 200
    await bot.services.drain()
    shown = "\n".join(str(m.blocks) + m.text for m in bot_posts(bot))
    assert "greet" in shown and "try" in shown and "revert" in shown
    assert "tpyo" in shown and "BROKEN, not loaded" in shown and "unknown action" in shown


async def test_running_the_broken_playbook_answers_with_its_load_error(bot: RunningBot) -> None:
    body = (await bot.standin.slash("run tpyo", user=OPERATOR, channel=CHANNEL)).json()
    assert body["response_type"] == "ephemeral"
    assert "playbook 'tpyo' did not load" in body["text"] and "unknown action" in body["text"], body
    await bot.services.drain()
    assert not bot_posts(bot)
