"""A small web page on the stand-in (`GET /`): channels, threads, a command box, buttons.

`make demo` has no Slack workspace to look at, so this page is where a person watches the
bot work: it shows each channel's threads with their blocks read as text, sends a slash
command or a mention as a chosen user, and clicks the bot's buttons. Plain HTML and a few
lines of JavaScript, no external assets, so it works offline.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from bot.slack.standin.blocks import buttons, plain_text
from bot.slack.standin.model import Message
from bot.slack.standin.outbound import Response, SlashInThreadError

if TYPE_CHECKING:
    from bot.slack.standin.server import Standin

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; display: flex; min-height: 100vh; }
nav { background: #3f0e40; color: #fff; padding: 1em; min-width: 12em; }
nav a { color: #fff; display: block; text-decoration: none; padding: .2em 0; }
nav a.on { font-weight: bold; }
main { padding: 1em 2em; flex: 1; }
.msg { border-left: 3px solid #ddd; margin: .6em 0; padding: .2em .8em; }
.reply { margin-left: 2.5em; border-color: #1264a3; }
.who { font-weight: bold; } .ts { color: #888; font-size: 85%; }
.text { white-space: pre-wrap; }
.edited { color: #888; font-size: 85%; }
.eph { background: #f4f4f4; border-color: #e8912d; }
form { margin: .5em 0; } input[type=text] { width: 30em; }
#out { color: #555; white-space: pre-wrap; }
"""

SCRIPT = """
async function send(form) {
  const answer = await fetch(form.action, {method: 'POST', body: new FormData(form)});
  document.getElementById('out').textContent = await answer.text();
  refresh();
  return false;
}
async function click(channel, ts, actionId) {
  const body = new FormData();
  body.set('channel', channel); body.set('ts', ts); body.set('action_id', actionId);
  body.set('user', document.getElementById('user').value);
  const answer = await fetch('/page/click', {method: 'POST', body: body});
  document.getElementById('out').textContent = await answer.text();
  refresh();
}
async function refresh() {
  const url = new URL(location.href); url.searchParams.set('fragment', '1');
  url.searchParams.set('user', document.getElementById('user').value);
  document.getElementById('log').innerHTML = await (await fetch(url)).text();
}
setInterval(refresh, 1500);
"""


def _message_html(standin: Standin, m: Message, *, reply: bool) -> str:
    who = standin.workspace.users.get(m.user)
    lines = [m.text] if m.text else []
    lines += plain_text(m.blocks)
    lines += [f"[file: {f.title or f.name}] {f.permalink}" for f in m.files]
    clicks = "".join(
        f"<button onclick=\"click('{escape(m.channel)}','{escape(m.ts)}','{escape(str(b.get('action_id')))}')\">"
        f"{escape(str((b.get('text') or {}).get('text', b.get('action_id'))))}</button> "
        for _, b in buttons(m.blocks)
    )
    edited = f'<span class="edited">(edited {len(m.edits)}x)</span>' if m.edits else ""
    return (
        f'<div class="msg{" reply" if reply else ""}"><span class="who">{escape(who.name if who else m.user)}</span> '
        f'<span class="ts">{escape(m.ts)}</span> {edited}'
        f'<div class="text">{escape(chr(10).join(lines))}</div>{clicks}</div>'
    )


def _log_html(standin: Standin, channel: str, user: str) -> str:
    parts: list[str] = []
    for root in standin.messages(channel):
        if root.is_reply:
            continue
        parts.append(_message_html(standin, root, reply=False))
        parts += [_message_html(standin, r, reply=True) for r in standin.messages(channel, thread_ts=root.ts)]
    for note in standin.ephemerals(user):
        if note.channel == channel:
            text = "\n".join([note.text, *plain_text(note.blocks)])
            parts.append(
                f'<div class="msg eph"><span class="who">only you</span> <span class="ts">{escape(note.ts)}</span>'
                f'<div class="text">{escape(text)}</div></div>'
            )
    return "".join(parts) or "<p>No messages yet.</p>"


def render_page(standin: Standin, channel: str, user: str) -> str:
    """The whole page for one channel, as seen by `user` (whose ephemeral messages show)."""
    ws = standin.workspace
    nav = "".join(
        f'<a class="{"on" if c.id == channel else ""}" href="/?channel={escape(c.id)}">#{escape(c.name)}</a>'
        for c in ws.channels.values()
    )
    users = "".join(
        f'<option value="{escape(u.id)}"{" selected" if u.id == user else ""}>{escape(u.name)}</option>'
        for u in ws.users.values()
        if not u.is_bot
    )
    hidden = f'<input type="hidden" name="channel" value="{escape(channel)}">'
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>flagbot stand-in</title>
<style>{STYLE}</style></head><body><nav><b>flagbot stand-in</b><br><br>{nav}</nav><main>
<p>As <select id="user" name="user" onchange="refresh()">{users}</select></p>
<form action="/page/slash" onsubmit="return send(this)">{hidden}
/flagbot <input type="text" name="text" placeholder="status">
<button>Send</button></form>
<form action="/page/mention" onsubmit="return send(this)">{hidden}
@flagbot <input type="text" name="text" placeholder="why 26?">
in thread <input type="text" name="thread_ts" style="width:11em" placeholder="(none)"> <button>Send</button></form>
<div id="out"></div><div id="log">{_log_html(standin, channel, user)}</div></main>
<script>
document.querySelectorAll('form').forEach(f => f.addEventListener('formdata',
  e => e.formData.set('user', document.getElementById('user').value)));
{SCRIPT}</script></body></html>"""


def _answer(response: Response) -> web.Response:
    return web.json_response({"status": response.status, "body": response.body})


def page_routes(app: web.Application, standin: Standin) -> None:
    """Add `GET /` and the page's POST endpoints to the stand-in's application."""

    async def index(request: web.Request) -> web.Response:
        channel = request.query.get("channel") or next(iter(standin.workspace.channels))
        user = request.query.get("user") or next(
            u.id for u in standin.workspace.users.values() if not u.is_bot
        )
        if request.query.get("fragment"):
            return web.Response(text=_log_html(standin, channel, user), content_type="text/html")
        return web.Response(text=render_page(standin, channel, user), content_type="text/html")

    async def act(request: web.Request) -> web.Response:
        form: dict[str, Any] = dict(await request.post())
        kind = request.match_info["kind"]
        try:
            if kind == "slash":
                return _answer(await standin.slash(form["text"], user=form["user"], channel=form["channel"]))
            if kind == "mention":
                thread_ts = form.get("thread_ts") or None
                answer = await standin.mention(
                    form["text"], user=form["user"], channel=form["channel"], thread_ts=thread_ts
                )
                return _answer(answer)
            if kind == "click":
                answer = await standin.click(
                    form["channel"], form["ts"], form["action_id"], user=form["user"]
                )
                return _answer(answer)
        except (SlashInThreadError, KeyError, RuntimeError, OSError, aiohttp.ClientError) as err:
            return web.json_response({"error": str(err)}, status=400)
        raise web.HTTPNotFound()

    app.router.add_get("/", index)
    app.router.add_post("/page/{kind}", act)
