"""The real slack_sdk AsyncWebClient against the stand-in's Web API, method by method."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from flagbot_lab.standin import BOT_USER_ID, Standin

OPS = "C0FLAGBOT"
META = {"event_type": "flagbot_experiment", "event_payload": {"experiment_id": 7, "hypothesis_id": 3}}


def section(text: str, block_id: str | None = None) -> dict[str, object]:
    block: dict[str, object] = {"type": "section", "text": {"type": "mrkdwn", "text": text}}
    if block_id:
        block["block_id"] = block_id
    return block


async def test_auth_test_names_the_bot(client: AsyncWebClient) -> None:
    answer = await client.auth_test()
    assert answer["user_id"] == BOT_USER_ID
    assert answer["bot_id"] and answer["team_id"]


async def test_a_wrong_token_is_refused(standin: Standin) -> None:
    intruder = AsyncWebClient(token="xoxb-wrong", base_url=standin.api_url)
    with pytest.raises(SlackApiError) as refused:
        await intruder.chat_postMessage(channel=OPS, text="hi")
    assert refused.value.response["error"] == "invalid_auth"
    nobody = AsyncWebClient(base_url=standin.api_url)
    with pytest.raises(SlackApiError) as missing:
        await nobody.auth_test()
    assert missing.value.response["error"] == "not_authed"
    assert standin.messages(OPS) == []
    assert [c.ok for c in standin.calls()] == [False, False]


async def test_unknown_method(client: AsyncWebClient) -> None:
    with pytest.raises(SlackApiError) as refused:
        await client.api_call("chat.sendTelegram", json={"channel": OPS})
    assert refused.value.response["error"] == "unknown_method"


async def test_post_message_thread_and_broadcast(client: AsyncWebClient, standin: Standin) -> None:
    root = await client.chat_postMessage(
        channel=OPS, text="try started", blocks=[section("*try*", "card")], metadata=META, unfurl_links=False
    )
    assert root["channel"] == OPS and root["message"]["text"] == "try started"
    reply = await client.chat_postMessage(channel=OPS, text="step 1 ok", thread_ts=root["ts"])
    broadcast = await client.chat_postMessage(
        channel="#flagbot-ops", text="regressed", thread_ts=reply["ts"], reply_broadcast=True
    )
    assert float(root["ts"]) < float(reply["ts"]) < float(broadcast["ts"])
    assert root["ts"] == "1764450000.000100"

    thread = standin.thread(OPS, root["ts"])
    assert [m.text for m in thread] == ["try started", "step 1 ok", "regressed"]
    assert all(m.thread_ts == root["ts"] for m in thread)  # a reply's ts resolves to the root
    assert thread[0].metadata == META and thread[0].blocks[0]["block_id"] == "card"
    assert [m.text for m in standin.messages(OPS, thread_ts=root["ts"])] == ["step 1 ok", "regressed"]
    assert standin.calls("chat.postMessage")[0].params["unfurl_links"] is False

    history = await client.conversations_history(channel=OPS)
    assert [m["text"] for m in history["messages"]] == ["regressed", "try started"]  # newest first
    assert "metadata" not in history["messages"][1]
    assert history["messages"][1]["reply_count"] == 2
    with_meta = await client.conversations_history(channel=OPS, include_all_metadata=True)
    assert with_meta["messages"][1]["metadata"] == META


@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing")
async def test_post_message_errors(client: AsyncWebClient) -> None:
    cases = [
        ({"channel": "C0NOPE", "text": "x"}, "channel_not_found"),
        ({"channel": OPS}, "no_text"),
        ({"channel": OPS, "text": "x", "thread_ts": "1.000001"}, "thread_not_found"),
        ({"channel": OPS, "text": "x", "blocks": [section("x")] * 51}, "invalid_blocks"),
        ({"channel": OPS, "text": "x", "blocks": [section("x" * 3001)]}, "invalid_blocks"),
        ({"channel": OPS, "text": "x", "metadata": {"event_type": "x"}}, "invalid_metadata_format"),
    ]
    for kwargs, error in cases:
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(**kwargs)  # type: ignore[arg-type]
        assert refused.value.response["error"] == error, kwargs
    with pytest.raises(SlackApiError) as too_long:
        await client.chat_postMessage(channel=OPS, text="x", blocks=[section("x" * 3001)])
    assert "json-pointer:/blocks/0/text" in too_long.value.response["errors"][0]


async def test_update_keeps_history(client: AsyncWebClient, standin: Standin) -> None:
    root = await client.chat_postMessage(channel=OPS, text="running", blocks=[section("running", "a")])
    updated = await client.chat_update(channel=OPS, ts=root["ts"], text="done", blocks=[section("done", "b")])
    assert updated["ts"] == root["ts"] and updated["message"]["edited"]
    await client.chat_update(channel=OPS, ts=root["ts"], text="done, kept", metadata=META)
    message = standin.message(OPS, root["ts"])
    assert [r.text for r in message.history] == ["running", "done", "done, kept"]
    assert message.blocks[0]["block_id"] == "b" and message.metadata == META
    with pytest.raises(SlackApiError) as missing:
        await client.chat_update(channel=OPS, ts="1764450099.000100", text="x")
    assert missing.value.response["error"] == "message_not_found"


async def test_ephemeral_and_permalink(client: AsyncWebClient, standin: Standin) -> None:
    root = await client.chat_postMessage(channel=OPS, text="card")
    note = await client.chat_postEphemeral(
        channel=OPS, user="U0VIEW", text="you may not", thread_ts=root["ts"]
    )
    assert note["message_ts"]
    [seen] = standin.ephemerals("U0VIEW")
    assert seen.text == "you may not" and seen.thread_ts == root["ts"]
    assert [m.text for m in standin.messages(OPS)] == ["card"]  # not in the channel's history
    link = await client.chat_getPermalink(channel=OPS, message_ts=root["ts"])
    assert link["permalink"] == f"{standin.base_url}/archives/{OPS}/p{root['ts'].replace('.', '')}"
    with pytest.raises(SlackApiError):
        await client.chat_postEphemeral(channel=OPS, user="U0NOBODY", text="x")


async def test_files_upload_v2_three_steps_into_a_thread(client: AsyncWebClient, standin: Standin) -> None:
    root = await client.chat_postMessage(channel=OPS, text="card")
    excerpt = "\n".join(f"line {i}" for i in range(40))
    answer = await client.files_upload_v2(
        channel=OPS,
        thread_ts=root["ts"],
        content=excerpt,
        filename="journal.txt",
        title="journal excerpt",
        initial_comment="the full excerpt",
    )
    file = answer["file"]
    assert file["permalink"].startswith(standin.base_url) and file["title"] == "journal excerpt"
    assert [c.method for c in standin.calls()][-2:] == [
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]
    [stored] = standin.files()
    assert stored.text == excerpt and stored.length == len(excerpt.encode())
    [reply] = standin.messages(OPS, thread_ts=root["ts"])
    assert reply.text == "the full excerpt" and reply.files == [stored]

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    two = await client.files_upload_v2(
        channel=OPS,
        thread_ts=root["ts"],
        file_uploads=[
            {"file": png, "filename": "bench.png", "title": "bench"},
            {"content": "a", "filename": "a.txt"},
        ],
    )
    assert [f["name"] for f in two["files"]] == ["bench.png", "a.txt"]
    assert standin.files()[1].content == png
    assert len(standin.messages(OPS, thread_ts=root["ts"])[-1].files) == 2


async def test_users_conversations_usergroups(client: AsyncWebClient) -> None:
    admin = await client.users_info(user="U0ADMIN")
    assert admin["user"]["is_admin"] is True
    viewer = await client.users_info(user="U0VIEW")
    assert viewer["user"]["is_admin"] is False
    with pytest.raises(SlackApiError) as missing:
        await client.users_info(user="U0NOBODY")
    assert missing.value.response["error"] == "user_not_found"
    info = await client.conversations_info(channel=OPS)
    assert info["channel"]["name"] == "flagbot-ops"
    group = await client.usergroups_users_list(usergroup="S0OPERATORS")
    assert "U0OPER" in group["users"]
    with pytest.raises(SlackApiError) as no_group:
        await client.usergroups_users_list(usergroup="S0NOPE")
    assert no_group.value.response["error"] == "no_such_subteam"


async def test_replies_paginate(client: AsyncWebClient) -> None:
    root = await client.chat_postMessage(channel=OPS, text="root", metadata=META)
    for i in range(4):
        await client.chat_postMessage(channel=OPS, text=f"r{i}", thread_ts=root["ts"])
    texts: list[str] = []
    cursor = None
    while True:
        page = await client.conversations_replies(channel=OPS, ts=root["ts"], limit=2, cursor=cursor)
        texts += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"]
        if not cursor:
            break
    assert texts == ["root", "r0", "r1", "r2", "r3"]
    with pytest.raises(SlackApiError) as missing:
        await client.conversations_replies(channel=OPS, ts="1.000002")
    assert missing.value.response["error"] == "thread_not_found"


async def test_rate_limit_is_retried_by_the_sdk_handler(standin: Standin) -> None:
    standin.rate_limit("chat.postMessage", times=1)
    plain = AsyncWebClient(token=standin.bot_token, base_url=standin.api_url)
    with pytest.raises(SlackApiError) as limited:
        await plain.chat_postMessage(channel=OPS, text="x")
    assert limited.value.response.status_code == 429
    assert limited.value.response.headers["Retry-After"] == "1"

    standin.rate_limit("chat.postMessage", times=1)
    patient = AsyncWebClient(
        token=standin.bot_token,
        base_url=standin.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    answer = await patient.chat_postMessage(channel=OPS, text="after the 429")
    assert answer["ok"]
    assert [c.status for c in standin.calls("chat.postMessage")] == [429, 429, 200]
    assert [m.text for m in standin.messages(OPS)] == ["after the 429"]


async def test_form_encoded_bodies_are_read_like_json(standin: Standin) -> None:
    async with aiohttp.ClientSession() as session:
        form = {
            "channel": OPS,
            "text": "form",
            "blocks": json.dumps([section("from a form")]),
            "token": standin.bot_token,
        }
        async with session.post(standin.api_url + "chat.postMessage", data=form) as answer:
            body = await answer.json()
    assert body["ok"] and standin.messages(OPS)[0].blocks[0]["text"]["text"] == "from a form"


async def test_wait_for_sees_a_later_call(client: AsyncWebClient, standin: Standin) -> None:
    later = asyncio.create_task(client.chat_postMessage(channel=OPS, text="later"))
    [call] = await standin.wait_for_calls("chat.postMessage")
    await later
    assert call.params["text"] == "later"
    with pytest.raises(TimeoutError):
        await standin.wait_for(lambda: standin.calls("chat.update"), timeout=0.05)
