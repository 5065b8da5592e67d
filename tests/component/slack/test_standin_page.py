"""The stand-in's web page: what it shows, and its command box and buttons reaching the bot."""

from __future__ import annotations

from typing import Any

import aiohttp

from bot.slack.standin import Standin
from tests.component.slack.conftest import BoltBot

OPS = "C0FLAGBOT"
CARD: list[dict[str, Any]] = [
    {"type": "header", "text": {"type": "plain_text", "text": "try #7 <regressed>"}},
    {
        "type": "actions",
        "block_id": "verdict",
        "elements": [
            {
                "type": "button",
                "action_id": "flagbot_revert",
                "text": {"type": "plain_text", "text": "Revert"},
                "value": "v",
            }
        ],
    },
]


async def test_page_shows_threads_blocks_and_buttons(standin: Standin) -> None:
    root = standin.workspace.post(OPS, text="card", blocks=CARD)
    standin.workspace.post(OPS, text="step 1 ok", thread_ts=root.ts)
    async with (
        aiohttp.ClientSession() as session,
        session.get(standin.base_url + f"/?channel={OPS}") as answer,
    ):
        html = await answer.text()
    assert answer.status == 200 and answer.content_type == "text/html"
    assert "#flagbot-ops" in html and "step 1 ok" in html
    assert "try #7 &lt;regressed&gt;" in html  # block text rendered, escaped
    assert "click('C0FLAGBOT','1764450000.000100','flagbot_revert')" in html
    assert "src=" not in html and 'href="http' not in html  # no external assets


async def test_page_sends_commands_and_clicks(standin: Standin, bolt_bot: BoltBot) -> None:
    root = standin.workspace.post(OPS, text="card", blocks=CARD)
    async with aiohttp.ClientSession() as session:
        form = {"channel": OPS, "user": "U0OPER", "text": "status"}
        async with session.post(standin.base_url + "/page/slash", data=form) as answer:
            assert (await answer.json())["status"] == 200
        click = {"channel": OPS, "user": "U0OPER", "ts": root.ts, "action_id": "flagbot_revert"}
        async with session.post(standin.base_url + "/page/click", data=click) as answer:
            assert (await answer.json())["status"] == 200
        click["action_id"] = "flagbot_nothing"
        async with session.post(standin.base_url + "/page/click", data=click) as answer:
            assert answer.status == 400 and "flagbot_nothing" in (await answer.json())["error"]
    await bolt_bot.wait("command")
    await bolt_bot.wait("action")
