"""The stand-in page's drawing of Slack messages: mrkdwn, Block Kit blocks, threads and ephemerals."""

from __future__ import annotations

import json
from html import unescape

from bot.slack.render import CardState, status_card
from flagbot_lab.standin.page import classify
from flagbot_lab.standin.page_blocks import block_html, blocks_html
from flagbot_lab.standin.page_mrkdwn import Names, mrkdwn_html
from flagbot_lab.standin.page_view import View, channel_html, thread_html
from flagbot_lab.standin.workspace import Workspace

NAMES = Names(users={"U0OPER": "bob"}, channels={"C0FLAGBOT": "flagbot-ops"}, groups={"S0OPS": "ops"})
OPS = "C0FLAGBOT"


def test_mrkdwn_formats_like_slack() -> None:
    html = mrkdwn_html("*Status:* _ok_ ~old~ `max_running_requests` :warning:", NAMES)
    assert html == "<b>Status:</b> <i>ok</i> <s>old</s> <code>max_running_requests</code> ⚠️"


def test_snake_case_and_arithmetic_are_not_formatting() -> None:
    assert mrkdwn_html("max_running_requests 2*3*4", NAMES) == "max_running_requests 2*3*4"


def test_code_blocks_keep_their_columns_and_read_entities_back() -> None:
    html = mrkdwn_html("*Table*\n```\nmetric  before\n&gt;&gt; a &amp;&lt;b\n```\nafter", NAMES)
    assert html == '<b>Table</b><pre class="code">metric  before\n&gt;&gt; a &amp;&lt;b</pre>after'
    assert "<b>" not in mrkdwn_html("```*not bold*```", NAMES)


def test_mentions_channels_groups_and_links() -> None:
    html = mrkdwn_html(
        "<@U0OPER> in <#C0FLAGBOT> for <!subteam^S0OPS> see <https://x.example/a?b=1&amp;c|docs>", NAMES
    )
    assert '<span class="mention">@bob</span>' in html
    assert '<span class="mention">#flagbot-ops</span>' in html and '<span class="mention">@ops</span>' in html
    assert 'href="https://x.example/a?b=1&amp;c"' in html and ">docs</a>" in html


def test_text_cannot_inject_markup() -> None:
    html = mrkdwn_html('&lt;script&gt;alert(1)&lt;/script&gt; <javascript:alert(1)|click> "quoted"', NAMES)
    assert "<script" not in html and "&lt;script&gt;" in html and "&quot;quoted&quot;" in html
    assert "<a " not in html and "click" in html  # a javascript: link is shown as its label only


def test_a_section_with_fields_and_a_button_accessory() -> None:
    block = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": "*card*"},
        "fields": [{"type": "mrkdwn", "text": "a"}, {"type": "plain_text", "text": "<b>"}],
        "accessory": {
            "type": "button",
            "action_id": "flagbot_keep",
            "text": {"type": "plain_text", "text": "Keep"},
        },
    }
    html = block_html(block, NAMES)
    assert "<b>card</b>" in html and '<div class="bk-fields">' in html and "&lt;b&gt;" in html
    assert '<button class="bk-btn" data-action="flagbot_keep">Keep</button>' in html


def test_the_status_card_draws_its_line_context_and_styled_buttons_with_confirms() -> None:
    card = CardState(
        7, "try", "lab", "U0OPER", "/flagbot try --x", [("apply", "ok")], "succeeded", "regressed"
    )
    card.next_actions, card.primary_action = ("revert", "keep", "rerun", "isolate"), "revert"
    blocks, _ = status_card(card)
    html = blocks_html(blocks, NAMES)
    assert '<div class="mrkdwn">🔻 try on lab → <b>regressed</b></div>' in html  # the one line, first
    assert 'try on lab · #7 · asked by <span class="mention">@bob</span>' in html
    assert '<button class="bk-btn" data-action="flagbot_keep">Keep</button>' in html
    assert 'class="bk-btn primary" data-action="flagbot_revert"' in html
    confirm = html.split('data-action="flagbot_revert" data-confirm="', 1)[1].split('"', 1)[0]
    assert json.loads(unescape(confirm))["title"] == "Revert?"
    assert "disabled" not in html
    assert blocks_html(blocks, NAMES, clickable=False).count("disabled") == 4


def test_images_dividers_rich_text_and_unknown_blocks() -> None:
    blocks = [
        {
            "type": "image",
            "image_url": "/files-pri/T-F1/c.png",
            "alt_text": "chart",
            "title": {"type": "plain_text", "text": "Bench"},
        },
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "image", "image_url": "/i.png", "alt_text": "i"}]},
        {
            "type": "rich_text",
            "elements": [
                {
                    "type": "rich_text_section",
                    "elements": [{"type": "text", "text": "hi", "style": {"bold": True}}],
                },
                {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "a  b"}]},
            ],
        },
        {"type": "input", "label": {"type": "plain_text", "text": "x"}},
    ]
    html = blocks_html(blocks, NAMES)
    assert 'src="/files-pri/T-F1/c.png" alt="chart"' in html and "Bench" in html
    assert '<hr class="bk-divider">' in html and 'class="ctx-img"' in html
    assert "<b>hi</b>" in html and '<pre class="code">a  b</pre>' in html
    assert "[input block]" in html


def _thread(ws: Workspace) -> tuple[str, str]:
    root = ws.post(
        OPS, text="card v1", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "v1"}}]
    )
    ws.update(
        OPS,
        root.ts,
        text="card v2",
        blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "v2"}}],
        metadata=None,
    )
    ws.post(OPS, text="evidence", thread_ts=root.ts)
    verdict = ws.post(OPS, text="*REGRESSED*", thread_ts=root.ts, reply_broadcast=True)
    ws.ephemeral(OPS, "U0VIEW", text="you need the operator role", thread_ts=root.ts)
    ws.ephemeral(OPS, "U0VIEW", text="usage: try CHANGE")
    return root.ts, verdict.ts


def test_the_channel_shows_the_latest_card_its_replies_the_broadcast_and_my_ephemerals() -> None:
    ws = Workspace()
    root, _ = _thread(ws)
    html = channel_html(ws, View(OPS, "U0VIEW"))
    assert "v2" in html and "v1" not in html and "(edited)" in html
    assert "2 replies" in html and f"thread={root}" in html
    assert "replied to a thread" in html and "<b>REGRESSED</b>" in html and "evidence" not in html
    assert "usage: try CHANGE" in html and "Only visible to you" in html
    assert "operator role" not in html  # that one is in the thread
    assert "Only visible to you" not in channel_html(ws, View(OPS, "U0OPER"))


def test_the_thread_shows_root_replies_and_my_ephemerals_in_it() -> None:
    ws = Workspace()
    root, _ = _thread(ws)
    html = thread_html(ws, View(OPS, "U0VIEW", root)) or ""
    assert html.index("v2") < html.index("evidence") < html.index("REGRESSED") < html.index("operator role")
    assert "Also sent to the channel" in html and "2 replies" in html and "usage: try" not in html
    assert "operator role" not in (thread_html(ws, View(OPS, "U0OPER", root)) or "")
    assert thread_html(ws, View(OPS, "U0VIEW")) is None
    assert "No thread 1.2" in (thread_html(ws, View(OPS, "U0VIEW", "1.2")) or "")


def test_what_the_command_box_makes_of_a_line() -> None:
    assert classify("/flagbot status target=lab") == classify("  /flagbot   status target=lab")
    typed = classify("/flagbot status target=lab")
    assert (typed.kind, typed.command, typed.text) == ("slash", "/flagbot", "status target=lab")
    assert (classify("/flagbot").kind, classify("/flagbot").text) == ("slash", "")
    assert (classify("@flagbot verify x>=1").kind, classify("@flagbot verify x>=1").text) == (
        "mention",
        "verify x>=1",
    )
    assert classify("<@U0FLAGBOT> help").text == "help"
    assert classify("@flagbotty hi").kind == "message" and classify("hello @flagbot").kind == "message"
