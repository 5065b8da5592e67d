"""Socket Mode against the stand-in: the protocol itself (with a bare websocket client), then
flagbot's app over the real slack-bolt / slack_sdk Socket Mode client, then `flagbot serve`.

No host is needed: the target points at a closed port and only commands that answer from the
grammar, RBAC and the store are sent.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import load_settings
from bot.store import AsyncStore, Store
from bot.store.records import audit_events
from bot.target.readiness import Backoff
from flagbot_lab.standin import BOT_USER_ID, Standin
from flagbot_lab.standin.socket_mode import Envelope
from tests.support.slack_bot import APP_TOKEN, TOKEN, RunningBot, running_bot

CHANNEL = "C0FLAGBOT"
CONFIG = """default_target = "lab"
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[database]
sqlite_path = "{db}"
[slack.rbac]
operators = ["U0OPER"]
viewers = ["*"]
"""


# ---- the protocol, with a bare websocket client


@pytest.fixture
async def socket_standin() -> AsyncIterator[Standin]:
    standin = Standin("unused", bot_token=TOKEN, app_token=APP_TOKEN, socket_mode=True)
    await standin.start()
    try:
        yield standin
    finally:
        await standin.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def connect(standin: Standin, http: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
    """A bare Socket Mode connection, past its hello."""
    opened = await AsyncWebClient(base_url=standin.api_url).apps_connections_open(app_token=APP_TOKEN)
    ws = await http.ws_connect(opened["url"])
    hello = await ws.receive_json(timeout=5)
    assert hello["type"] == "hello" and hello["connection_info"]["app_id"]
    return ws


async def ask(standin: Standin, ws: aiohttp.ClientWebSocketResponse) -> tuple[Any, dict[str, Any]]:
    """`/flagbot help` typed by U0OPER: the task waiting for its ack, and the envelope `ws` got."""
    asked = asyncio.create_task(standin.slash("help", user="U0OPER", channel=CHANNEL))
    return asked, await ws.receive_json(timeout=5)


async def test_the_app_token_opens_a_url_whose_ticket_works_once(
    socket_standin: Standin, http: aiohttp.ClientSession
) -> None:
    api = AsyncWebClient(base_url=socket_standin.api_url)
    for token, error in ((TOKEN, "not_allowed_token_type"), ("xapp-wrong", "invalid_auth")):
        with pytest.raises(SlackApiError) as refused:
            await api.apps_connections_open(app_token=token)
        assert refused.value.response["error"] == error
    with pytest.raises(SlackApiError, match="not_allowed_token_type"):
        await AsyncWebClient(token=APP_TOKEN, base_url=socket_standin.api_url).chat_postMessage(
            channel=CHANNEL, text="an app-level token cannot post"
        )
    opened = await api.apps_connections_open(app_token=APP_TOKEN)
    url = opened["url"]
    assert url.startswith(socket_standin.base_url.replace("http", "ws", 1) + "/socket-mode?ticket=")
    ws = await http.ws_connect(url)
    assert (await ws.receive_json(timeout=5))["type"] == "hello"
    with pytest.raises(aiohttp.WSServerHandshakeError) as again:
        await http.ws_connect(url)
    assert again.value.status == 401
    await ws.close()
    assert socket_standin.socket.connections_opened == 1


async def test_each_kind_of_envelope_is_acked_and_a_command_answer_is_shown(
    socket_standin: Standin, http: aiohttp.ClientSession
) -> None:
    ws = await connect(socket_standin, http)
    asked, envelope = await ask(socket_standin, ws)
    assert envelope["type"] == "slash_commands" and envelope["accepts_response_payload"] is True
    assert envelope["payload"]["command"] == "/flagbot" and envelope["payload"]["text"] == "help"
    assert envelope["payload"]["response_url"].startswith(socket_standin.base_url)
    assert "retry_attempt" not in envelope
    await ws.send_json({"envelope_id": envelope["envelope_id"], "payload": {"text": "usage: ..."}})
    answer = await asyncio.wait_for(asked, 5)
    assert answer.status == 200 and answer.json() == {"text": "usage: ..."}
    assert [e.text for e in socket_standin.ephemerals("U0OPER")] == ["usage: ..."]
    assert [r.via for r in socket_standin.responses()] == ["ack"]

    mentioned = asyncio.create_task(socket_standin.mention("status", user="U0OPER", channel=CHANNEL))
    event = await ws.receive_json(timeout=5)
    assert event["type"] == "events_api" and event["accepts_response_payload"] is False
    assert (event["retry_attempt"], event["retry_reason"]) == (0, "")
    assert event["payload"]["event"]["type"] == "app_mention"
    await ws.send_json({"envelope_id": event["envelope_id"]})
    assert (await asyncio.wait_for(mentioned, 5)).body == ""

    button = {"type": "button", "action_id": "flagbot_keep", "text": {"type": "plain_text", "text": "Keep"}}
    card = socket_standin.workspace.post(
        CHANNEL, text="card", blocks=[{"type": "actions", "block_id": "b", "elements": [button]}]
    )
    clicked = asyncio.create_task(socket_standin.click(CHANNEL, card.ts, "flagbot_keep", user="U0OPER"))
    action = await ws.receive_json(timeout=5)
    assert action["type"] == "interactive" and action["payload"]["type"] == "block_actions"
    await ws.send_json({"envelope_id": action["envelope_id"]})
    await asyncio.wait_for(clicked, 5)
    assert [a.first for a in socket_standin.socket.acks()] == [True, True, True]
    assert all(isinstance(sent, Envelope) for sent in socket_standin.sent())
    await ws.close()


async def test_an_unacked_envelope_is_redelivered_after_the_connection_drops(
    socket_standin: Standin, http: aiohttp.ClientSession
) -> None:
    first = await connect(socket_standin, http)
    asked, sent = await ask(socket_standin, first)
    assert socket_standin.socket.drop() == 1
    closing = await first.receive(timeout=5)
    assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR)
    assert not asked.done() and [e.envelope_id for e in socket_standin.socket.unacked()] == [
        sent["envelope_id"]
    ]

    second = await connect(socket_standin, http)
    again = await second.receive_json(timeout=5)
    assert again["envelope_id"] == sent["envelope_id"] and again["payload"] == sent["payload"]
    assert again["retry_attempt"] == 1 and again["retry_reason"]
    await second.send_json({"envelope_id": again["envelope_id"]})
    answer = await asyncio.wait_for(asked, 5)
    assert answer.status == 200 and answer.body == ""
    attempts = socket_standin.socket.envelopes(sent["envelope_id"])
    assert [e.retry_attempt for e in attempts] == [0, 1]
    assert [a.connection for a in socket_standin.socket.acks()] == [2]
    await second.close()


async def next_envelope(
    sockets: dict[int, aiohttp.ClientWebSocketResponse],
) -> tuple[int, dict[str, Any]]:
    """(the connection's number, the envelope) for the first of `sockets` that gets one."""
    reads = {asyncio.create_task(ws.receive_json()): number for number, ws in sockets.items()}
    done, pending = await asyncio.wait(reads, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    assert len(done) == 1, f"{len(done)} connections got the envelope"
    (task,) = done
    return reads[task], task.result()


async def test_envelopes_are_spread_over_every_live_connection_each_sent_once(
    socket_standin: Standin, http: aiohttp.ClientSession
) -> None:
    """Two replicas hold a connection each: Slack sends each envelope to one of them, in turn."""
    sockets = {1: await connect(socket_standin, http), 2: await connect(socket_standin, http)}
    assert socket_standin.socket.live_connections == 2
    got: list[int] = []
    for _ in range(4):
        asked = asyncio.create_task(socket_standin.slash("help", user="U0OPER", channel=CHANNEL))
        number, envelope = await next_envelope(sockets)
        await sockets[number].send_json({"envelope_id": envelope["envelope_id"]})
        assert (await asyncio.wait_for(asked, 5)).status == 200
        assert socket_standin.socket.sent_on(envelope["envelope_id"]) == [number]
        got.append(number)
    assert got == [2, 1, 2, 1]  # the newest first, then each in turn
    assert len(socket_standin.socket.envelopes()) == 4 and not socket_standin.socket.unacked()
    assert [a.connection for a in socket_standin.socket.acks()] == got
    for ws in sockets.values():
        await ws.close()


async def test_disconnect_asks_the_app_to_reconnect_and_nothing_more_goes_there(
    socket_standin: Standin, http: aiohttp.ClientSession
) -> None:
    first = await connect(socket_standin, http)
    assert await socket_standin.socket.disconnect() == 1
    told = await first.receive_json(timeout=5)
    assert told["type"] == "disconnect" and told["reason"] == "refresh_requested"
    assert not socket_standin.socket.connected
    asked = asyncio.create_task(socket_standin.slash("help", user="U0OPER", channel=CHANNEL))
    second = await connect(socket_standin, http)  # what arrives here was never sent on the first
    envelope = await second.receive_json(timeout=5)
    assert envelope["type"] == "slash_commands" and "retry_attempt" not in envelope
    await second.send_json({"envelope_id": envelope["envelope_id"]})
    assert (await asyncio.wait_for(asked, 5)).status == 200
    await first.close()
    await second.close()


async def test_signing_options_are_refused_in_socket_mode(socket_standin: Standin) -> None:
    with pytest.raises(ValueError, match="not signed"):
        await socket_standin.slash("help", user="U0OPER", channel=CHANNEL, signing="wrong")
    assert socket_standin.sent() == []


# ---- flagbot's app over the real Socket Mode client


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(db=tmp_path / "flagbot.db"))
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(load_settings(config, required=True), store, socket_mode=True) as running:
            yield running
    finally:
        await store.aclose()


def posted(bot: RunningBot, needle: str, thread_ts: str | None = None) -> list[Any]:
    return [m for m in bot.standin.messages(CHANNEL, thread_ts) if needle in str(m.blocks) + m.text]


async def test_help_is_answered_over_socket_mode(bot: RunningBot) -> None:
    answer = await bot.standin.slash("help try", user="U0VIEW", channel=CHANNEL)
    assert answer.status == 200
    assert isinstance(answer.request, Envelope) and bot.standin.bot_url is None  # no HTTP path at all
    assert await bot.standin.wait_for(lambda: posted(bot, "try CHANGE"))
    [ack] = bot.standin.socket.acks(answer.request.envelope_id)
    assert ack.first and ack.elapsed_s == answer.elapsed_s


async def test_a_usage_error_is_answered_ephemerally_in_the_ack(bot: RunningBot) -> None:
    answer = await bot.standin.slash("try max_running_requests>>48", user="U0OPER", channel=CHANNEL)
    body = answer.json()
    assert body["response_type"] == "ephemeral" and "example:" in body["text"]
    [shown] = bot.standin.ephemerals("U0OPER")
    assert shown.text == body["text"] and not bot.standin.messages(CHANNEL)


async def test_a_mention_in_a_thread_is_answered_there(bot: RunningBot) -> None:
    root = bot.standin.workspace.post(CHANNEL, user="U0OPER", text="investigating")
    answer = await bot.standin.mention("help try", user="U0OPER", channel=CHANNEL, thread_ts=root.ts)
    assert answer.status == 200 and isinstance(answer.request, Envelope)
    replies = await bot.standin.wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL, root.ts) if m.user == BOT_USER_ID]
    )
    assert all(m.thread_ts == root.ts for m in replies) and "try CHANGE" in str(replies[0].blocks)
    assert [m.ts for m in bot.standin.messages(CHANNEL)] == [root.ts]  # nothing beside the root


async def test_a_click_is_delivered_and_acted_on_once(bot: RunningBot) -> None:
    from bot.slack.render import action_value
    from bot.store.experiments import get_experiment
    from tests.support.pending_decision import pending_try

    store = bot.services.store
    row = await store.run(
        get_experiment, store.store, await pending_try(store, "lab")
    )  # a decision pending: Keep answers it
    assert row is not None
    button = {"type": "button", "action_id": "flagbot_keep", "text": {"type": "plain_text", "text": "Keep"}}
    value = action_value(row.id or 0, "keep", "n9keep")
    blocks = [{"type": "actions", "block_id": "b1", "elements": [{**button, "value": value}]}]
    card = bot.standin.workspace.post(CHANNEL, text="a finished card", blocks=blocks)
    first, second = await asyncio.gather(
        bot.standin.click(CHANNEL, card.ts, "flagbot_keep", user="U0OPER"),
        bot.standin.click(CHANNEL, card.ts, "flagbot_keep", user="U0OPER"),
    )
    assert (first.status, second.status) == (200, 200)
    await bot.standin.wait_for(lambda: posted(bot, "clicked", card.ts))
    assert await kept(bot) == [row.id]  # the listener records Keep after its ack: polled
    assert len(posted(bot, "clicked", card.ts)) == 1


async def kept(bot: RunningBot, timeout: float = 5.0) -> list[int]:
    """The experiments a Keep was recorded for, once there is one (or the timeout passed)."""
    backoff, deadline = Backoff(), asyncio.get_running_loop().time() + timeout
    while True:
        events = await bot.services.store.run(audit_events, bot.services.store.store, "lab")
        found = [e.detail["experiment_id"] for e in events if e.action == "keep"]
        if found or asyncio.get_running_loop().time() > deadline:
            return found
        await backoff.sleep()


async def test_a_command_unacked_when_the_connection_drops_is_answered_once(bot: RunningBot) -> None:
    bot.standin.socket.drop_after_send()  # the bot gets it, its ack cannot arrive
    answer = await bot.standin.slash("help try", user="U0VIEW", channel=CHANNEL)
    assert answer.status == 200
    assert isinstance(answer.request, Envelope)
    attempts = bot.standin.socket.envelopes(answer.request.envelope_id)
    assert [e.retry_attempt for e in attempts] == [0, 1]
    assert bot.standin.socket.connections_opened >= 2
    await bot.standin.wait_for(lambda: posted(bot, "try CHANGE"))
    await bot.services.drain()
    assert len(posted(bot, "try CHANGE")) == 1


async def test_a_usage_error_survives_a_drop_with_its_answer_shown_once(bot: RunningBot) -> None:
    bot.standin.socket.drop_after_send()
    answer = await bot.standin.slash("try max_running_requests>>48", user="U0OPER", channel=CHANNEL)
    assert "example:" in answer.json()["text"]  # the redelivery's ack carries the first answer
    assert isinstance(answer.request, Envelope)
    assert len(bot.standin.socket.envelopes(answer.request.envelope_id)) == 2
    assert len(bot.standin.ephemerals("U0OPER")) == 1


async def test_the_bot_follows_a_refresh_requested_disconnect(bot: RunningBot) -> None:
    await bot.standin.socket.disconnect("refresh_requested")
    await bot.standin.socket.wait_connected(opened=2)
    answer = await bot.standin.slash("help try", user="U0VIEW", channel=CHANNEL)
    assert answer.status == 200
    assert await bot.standin.wait_for(lambda: posted(bot, "try CHANGE"))
    assert bot.standin.socket.acks(answer.request.envelope_id)[0].connection == 2  # type: ignore[union-attr]


# ---- `flagbot serve` itself, Socket Mode being its default


async def test_flagbot_serve_answers_over_socket_mode_and_stops_on_sigterm(
    socket_standin: Standin, tmp_path: Path
) -> None:
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(db=tmp_path / "flagbot.db"))
    Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}").upgrade()
    flagbot = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"
    env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    env.pop("SLACK_SIGNING_SECRET", None)
    serve = await asyncio.create_subprocess_exec(
        flagbot,
        "--config",
        str(config),
        "serve",
        "--slack-api",
        socket_standin.api_url,
        env=env,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await socket_standin.socket.wait_connected(timeout=60)
        answer = await socket_standin.slash("help try", user="U0VIEW", channel=CHANNEL)
        assert answer.status == 200
        assert await socket_standin.wait_for(
            lambda: [m for m in socket_standin.messages(CHANNEL) if "try CHANGE" in str(m.blocks)], timeout=15
        )
        assert [c.method for c in socket_standin.calls("apps.connections.open")] == ["apps.connections.open"]
    finally:
        if serve.returncode is None:
            serve.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(serve.communicate(), 30)
    assert serve.returncode == 0, err.decode()
    assert "Socket Mode connected" in err.decode()
