"""A small web page on the stand-in (`GET /`): channels, threads, a command box, working buttons.

`make demo` has no Slack workspace to look at, so this page is where a person watches the bot
work: a channel with its threads as Slack draws them (`page_view`, `page_blocks`), the current
user's ephemeral messages, files and charts. The command box sends what is typed the way Slack
would: `/flagbot …` as a signed slash command (refused inside a thread, as Slack refuses it),
`@flagbot …` as an `app_mention` (in the open thread when typed there), anything else as a
plain message. A button click goes through `Standin.click`, a signed `block_actions`. The page
polls `/page/view` with a short backoff, so it follows the bot without a reload. No external
assets: the CSS and script are package data inlined into the page, so it works offline.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from html import escape
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from flagbot_lab.standin.model import BOT_USER_ID, Channel, StoredFile
from flagbot_lab.standin.outbound import Response, SlashInThreadError
from flagbot_lab.standin.page_view import View, channel_html, thread_html
from flagbot_lab.standin.workspace import SlackError

if TYPE_CHECKING:
    from flagbot_lab.standin.server import Standin

COMMANDS = ("/flagbot",)
"""The slash commands the stand-in's workspace has installed (flagbot's)."""
MENTION = re.compile(rf"^\s*(?:@flagbot\b|<@{BOT_USER_ID}(?:\|[^>]*)?>)[:,]?\s*", re.IGNORECASE)
SLASH = re.compile(r"^(/\S+)\s*(.*)$", re.DOTALL)
EMPTY_MENTION = "say what flagbot should do: @flagbot COMMAND (e.g. @flagbot help)"


@cache
def _asset(name: str) -> str:
    return files("flagbot_lab.standin").joinpath("static", name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Typed:
    """What a line typed in the command box is: a slash command, a mention of flagbot, a message."""

    kind: str
    """"slash", "mention" or "message"."""
    text: str
    """The command's text (after `/flagbot` or `@flagbot`), or the message as typed."""
    command: str = ""


def classify(text: str) -> Typed:
    """Read a typed line as Slack's composer does (only a leading `/` makes a slash command)."""
    slash = SLASH.match(text.strip())
    if slash:
        return Typed("slash", slash.group(2).strip(), slash.group(1))
    mention = MENTION.match(text)
    if mention:
        return Typed("mention", text[mention.end() :].strip())
    return Typed("message", text.strip())


def _slack_escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _view(standin: Standin, query: Any) -> View:
    """The view a request asks for (channel by id or name, the user, the open thread), checked."""
    ws = standin.workspace
    channel = query.get("channel") or next(iter(ws.channels))
    try:
        found: Channel = ws.channel(channel)
    except SlackError:
        raise web.HTTPNotFound(text=f"no channel {channel!r} in the stand-in") from None
    user = query.get("user") or next(u.id for u in ws.users.values() if not u.is_bot)
    if user not in ws.users:
        raise web.HTTPNotFound(text=f"no user {user!r} in the stand-in")
    return View(found.id, user, query.get("thread") or None)


def _shown(standin: Standin, view: View) -> tuple[str, str | None, str]:
    """The channel's and the thread's HTML, and a tag that changes whenever either does."""
    channel = channel_html(standin.workspace, view)
    thread = thread_html(standin.workspace, view)
    etag = hashlib.sha1(f"{channel}\0{thread}".encode(), usedforsecurity=False).hexdigest()
    return channel, thread, etag


def _pane(view: View, *, thread: str | None, channel_name: str) -> str:
    """The thread pane (when a thread is open) with its own command box."""
    if thread is None:
        return ""
    close = escape(view.url(thread=None))
    return f"""<section class="pane thread-pane"><header>Thread <span class="sub">#{escape(channel_name)}</span>
<a class="close" href="{close}" title="close the thread">×</a></header>
<div class="log" id="thread-log">{thread}</div>
<form class="composer" data-thread="{escape(view.thread or "")}"><input name="text" autocomplete="off"
 placeholder="Reply… (@flagbot verify)"><button>Send</button></form><div class="notice"></div></section>"""


def render_page(standin: Standin, view: View) -> str:
    """The whole page for one view: sidebar, channel, and the open thread."""
    ws = standin.workspace
    channel_log, thread_log, etag = _shown(standin, view)
    chan = ws.channels[view.channel]
    nav = "".join(
        f'<a class="chan{" on" if c.id == view.channel else ""}" '
        f'href="{escape(View(c.id, view.user).url())}">{"🔒" if c.is_private else "#"} {escape(c.name)}</a>'
        for c in ws.channels.values()
    )
    users = "".join(
        f'<option value="{escape(u.id)}"{" selected" if u.id == view.user else ""}>'
        f"{escape(u.real_name)} ({escape(u.id)})</option>"
        for u in ws.users.values()
        if not u.is_bot
    )
    data = (
        f'data-channel="{escape(view.channel)}" data-user="{escape(view.user)}" '
        f'data-thread="{escape(view.thread or "")}" data-etag="{etag}"'
    )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>#{escape(chan.name)} · flagbot stand-in</title><style>{_asset("page.css")}</style></head>
<body {data}><nav class="side"><div class="ws">flagbot stand-in</div>
<label class="as">You are<select id="user">{users}</select></label>
<div class="sect">Channels</div>{nav}<div class="foot">A local Slack: nothing leaves this machine.</div></nav>
<main class="pane chan-pane"><header>#{escape(chan.name)} <span class="sub">{escape(chan.topic)}</span></header>
<div class="log" id="channel-log">{channel_log}</div>
<form class="composer" data-thread=""><input name="text" autocomplete="off"
 placeholder="Message #{escape(chan.name)} (/flagbot status, /flagbot help)"><button>Send</button></form>
<div class="notice"></div></main>{_pane(view, thread=thread_log, channel_name=chan.name)}
<dialog id="confirm"><h4></h4><p></p><div class="row"><button class="bk-btn deny"></button>
<button class="bk-btn primary ok"></button></div></dialog>
<script>{_asset("page.js")}</script></body></html>"""


def _answer(response: Response, kind: str) -> web.Response:
    return web.json_response({"kind": kind, "status": response.status, "body": response.body})


async def send_typed(standin: Standin, form: dict[str, Any]) -> web.Response:
    """Send a line typed in the command box as Slack would (see `classify`)."""
    typed = classify(str(form.get("text", "")))
    channel, user = str(form["channel"]), str(form["user"])
    thread_ts = str(form.get("thread_ts") or "") or None
    if not typed.text and typed.kind != "slash":
        return web.json_response({"error": EMPTY_MENTION}, status=400)
    if typed.kind == "slash":
        if typed.command not in COMMANDS:
            error = f"{typed.command} is not a valid command. This workspace has: {', '.join(COMMANDS)}"
            return web.json_response({"error": error}, status=400)
        answer = await standin.slash(
            typed.text, user=user, channel=channel, thread_ts=thread_ts, command=typed.command
        )
        return _answer(answer, "slash")
    if typed.kind == "mention":
        answer = await standin.mention(typed.text, user=user, channel=channel, thread_ts=thread_ts)
        return _answer(answer, "mention")
    standin.workspace.post(channel, user=user, text=_slack_escaped(typed.text), thread_ts=thread_ts)
    await standin._notify()  # the stand-in's own waiters (tests) see the message too
    return web.json_response({"kind": "message"})


def _file_response(stored: StoredFile | None) -> web.Response:
    if stored is None or stored.content is None:
        raise web.HTTPNotFound(text="no such file (or its bytes were never uploaded)")
    mimetype = stored.to_api()["mimetype"]
    content_type = mimetype if mimetype.startswith("image/") else "text/plain"
    return web.Response(body=stored.content, content_type=content_type, charset=None)


def page_routes(app: web.Application, standin: Standin) -> None:
    """Add `GET /`, the page's endpoints and the files' URLs to the stand-in's application."""

    async def index(request: web.Request) -> web.Response:
        view = _view(standin, request.query)
        return web.Response(text=render_page(standin, view), content_type="text/html")

    async def shown(request: web.Request) -> web.Response:
        channel, thread, etag = _shown(standin, _view(standin, request.query))
        if request.query.get("have") == etag:
            return web.Response(status=204)
        return web.json_response({"etag": etag, "channel": channel, "thread": thread})

    async def act(request: web.Request) -> web.Response:
        form: dict[str, Any] = dict(await request.post())
        kind = request.match_info["kind"]
        try:
            if kind == "send":
                return await send_typed(standin, form)
            if kind == "slash":
                return _answer(
                    await standin.slash(form["text"], user=form["user"], channel=form["channel"]), kind
                )
            if kind == "mention":
                thread_ts = form.get("thread_ts") or None
                answer = await standin.mention(
                    form["text"], user=form["user"], channel=form["channel"], thread_ts=thread_ts
                )
                return _answer(answer, kind)
            if kind == "click":
                answer = await standin.click(
                    form["channel"], form["ts"], form["action_id"], user=form["user"]
                )
                return _answer(answer, kind)
        except KeyError as err:
            return web.json_response({"error": str(err.args[0]) if err.args else str(err)}, status=400)
        except (SlashInThreadError, SlackError, RuntimeError, OSError, aiohttp.ClientError) as err:
            return web.json_response({"error": str(err)}, status=400)
        raise web.HTTPNotFound()

    async def stored_file(request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"].rsplit("-", 1)[-1]
        return _file_response(standin.workspace.files.get(file_id))

    app.router.add_get("/", index)
    app.router.add_get("/page/view", shown)
    app.router.add_post("/page/{kind}", act)
    app.router.add_get("/files/{user}/{file_id}/{name}", stored_file)
    app.router.add_get("/files-pri/{file_id}/{name}", stored_file)


__all__ = ["Typed", "classify", "page_routes", "render_page", "send_typed"]
