"""The stand-in's web page over HTTP: what it serves, and its command box and buttons reaching the bot.

The same page in a real browser is tests/component/slack/test_standin_page_browser.py.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from flagbot_lab.standin import Standin
from tests.support.standin_fixtures import BoltBot

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


async def _post(standin: Standin, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(standin.base_url + path, data=form) as answer:
        return answer.status, await answer.json()


async def _get(standin: Standin, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(standin.base_url + path) as answer:
        return answer.status, answer.content_type, (await answer.read()).decode(errors="replace")


async def test_page_shows_threads_blocks_and_buttons(standin: Standin) -> None:
    root = standin.workspace.post(OPS, text="card", blocks=CARD)
    standin.workspace.post(OPS, text="step 1 ok", thread_ts=root.ts)
    status, content_type, html = await _get(standin, f"/?channel={OPS}&thread={root.ts}")
    assert status == 200 and content_type == "text/html"
    assert "# flagbot-ops" in html and "step 1 ok" in html and "1 reply" in html
    assert "try #7 &lt;regressed&gt;" in html  # block text rendered, escaped
    assert f'data-channel="{OPS}" data-ts="{root.ts}"' in html and 'data-action="flagbot_revert"' in html
    assert "<link" not in html and "<script src" not in html and 'src="http' not in html  # works offline


async def test_unknown_channels_and_users_are_named(standin: Standin) -> None:
    assert (await _get(standin, "/?channel=C0NOPE"))[::2] == (404, "no channel 'C0NOPE' in the stand-in")
    assert (await _get(standin, "/page/view?user=U0NOPE"))[::2] == (404, "no user 'U0NOPE' in the stand-in")


async def test_the_view_changes_only_when_the_workspace_does(standin: Standin) -> None:
    status, _, body = await _get(standin, f"/page/view?channel={OPS}&user=U0OPER")
    first = json.loads(body)
    assert status == 200 and first["thread"] is None and "No messages yet" in first["channel"]
    assert (await _get(standin, f"/page/view?channel={OPS}&user=U0OPER&have={first['etag']}"))[0] == 204
    standin.workspace.ephemeral(OPS, "U0OPER", text="only for bob")
    status, _, body = await _get(standin, f"/page/view?channel={OPS}&user=U0OPER&have={first['etag']}")
    assert status == 200 and "only for bob" in json.loads(body)["channel"]
    assert (await _get(standin, f"/page/view?channel={OPS}&user=U0VIEW&have={first['etag']}"))[0] == 204


async def test_the_command_box_sends_as_slack_would(standin: Standin, bolt_bot: BoltBot) -> None:
    form = {"channel": OPS, "user": "U0OPER", "text": "/flagbot status"}
    status, answer = await _post(standin, "/page/send", form)
    assert (status, answer["kind"], answer["status"]) == (200, "slash", 200)
    assert (await bolt_bot.wait("command"))[0]["text"] == "status"
    root = standin.workspace.post(OPS, text="investigating")
    status, answer = await _post(standin, "/page/send", {**form, "thread_ts": root.ts})
    assert (status, answer) == (400, {"error": "/flagbot is not supported in threads. Sorry!"})
    status, answer = await _post(standin, "/page/send", {**form, "text": "/deploy now"})
    assert status == 400 and answer["error"].startswith("/deploy is not a valid command")
    status, answer = await _post(
        standin, "/page/send", {**form, "text": "@flagbot log", "thread_ts": root.ts}
    )
    assert status == 200 and answer["kind"] == "mention"
    event = (await bolt_bot.wait("mention"))[0]["event"]
    assert event["text"] == "<@U0FLAGBOT> log" and event["thread_ts"] == root.ts
    status, answer = await _post(standin, "/page/send", {**form, "text": "a <b> & c", "thread_ts": root.ts})
    assert (status, answer) == (200, {"kind": "message"})
    assert standin.thread(OPS, root.ts)[-1].text.endswith("a &lt;b&gt; &amp; c")
    assert len(bolt_bot.seen["command"]) == 1  # the refused ones never reached the bot


async def test_page_sends_clicks(standin: Standin, bolt_bot: BoltBot) -> None:
    root = standin.workspace.post(OPS, text="card", blocks=CARD)
    click = {"channel": OPS, "user": "U0OPER", "ts": root.ts, "action_id": "flagbot_revert"}
    status, answer = await _post(standin, "/page/click", click)
    assert status == 200 and answer["status"] == 200
    assert (await bolt_bot.wait("action"))[0]["actions"][0]["action_id"] == "flagbot_revert"
    status, answer = await _post(standin, "/page/click", {**click, "action_id": "flagbot_nothing"})
    assert status == 400 and "flagbot_nothing" in answer["error"]


async def test_uploaded_files_are_served_for_the_page(standin: Standin, client: AsyncWebClient) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
    answer = await client.files_upload_v2(channel=OPS, content=png, filename="chart.png", title="Bench")
    stored = standin.files()[0]
    assert answer["file"]["id"] == stored.id
    status, content_type, _ = await _get(standin, stored.url_private.removeprefix(standin.base_url))
    assert (status, content_type) == (200, "image/png")
    status, _, html = await _get(standin, f"/?channel={OPS}")
    assert f'src="/files-pri/T0STANDIN-{stored.id}/chart.png"' in html and "Bench" in html
    assert (await _get(standin, "/files-pri/T0STANDIN-F0NOPE/x.png"))[0] == 404
