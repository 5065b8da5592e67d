"""Block Kit blocks as HTML, for the stand-in's page: what a person in Slack would see.

Sections (with fields and accessories), headers, context lines, dividers, images, rich text
and buttons are drawn the way Slack draws them; a block or element the page does not know is
shown as a labelled placeholder rather than dropped, so a renderer bug is visible. Buttons
carry their action id and confirm dialog as data attributes; the page's script sends the
click through the stand-in, which signs a `block_actions` request to the bot.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from flagbot_lab.standin.page_mrkdwn import Names, mrkdwn_html, plain_html

BlockDict = dict[str, Any]
NOT_CLICKABLE = "the stand-in cannot click a button of an ephemeral message"


def text_html(obj: Any, names: Names) -> str:
    """A text object (mrkdwn or plain_text) as HTML; anything else as an empty string."""
    if not isinstance(obj, dict):
        return ""
    text = str(obj.get("text", ""))
    if obj.get("type") == "plain_text":
        return plain_html(text, with_emoji=bool(obj.get("emoji", True)))
    return mrkdwn_html(text, names)


def _image_url(obj: BlockDict) -> str:
    url = obj.get("image_url") or (obj.get("slack_file") or {}).get("url") or ""
    return str(url)


def _image(obj: BlockDict, css: str) -> str:
    alt = escape(str(obj.get("alt_text", "")))
    return f'<img class="{css}" src="{escape(_image_url(obj))}" alt="{alt}" title="{alt}">'


def button_html(element: BlockDict, *, clickable: bool) -> str:
    """A button with its label, style, action id and (when it has one) its confirm dialog."""
    label = plain_html(str((element.get("text") or {}).get("text", element.get("action_id", ""))))
    style = element.get("style")
    css = "bk-btn" + (f" {style}" if style in ("primary", "danger") else "")
    attrs = [f'class="{css}"', f'data-action="{escape(str(element.get("action_id", "")))}"']
    confirm = element.get("confirm")
    if isinstance(confirm, dict):
        shown = {
            key: str((confirm.get(key) or {}).get("text", "")) for key in ("title", "text", "confirm", "deny")
        }
        attrs.append(f'data-confirm="{escape(json.dumps(shown))}"')
    if not clickable:
        attrs.append(f'disabled title="{NOT_CLICKABLE}"')
    return f"<button {' '.join(attrs)}>{label}</button>"


def element_html(element: Any, names: Names, *, clickable: bool) -> str:
    """An interactive or context element; an unknown one as a labelled placeholder."""
    if not isinstance(element, dict):
        return ""
    kind = element.get("type")
    if kind == "button":
        return button_html(element, clickable=clickable)
    if kind == "image":
        return _image(element, "ctx-img")
    if kind in ("mrkdwn", "plain_text"):
        return f"<span>{text_html(element, names)}</span>"
    return f'<span class="bk-unknown">[{escape(str(kind))}]</span>'


def _section(block: BlockDict, names: Names, clickable: bool) -> str:
    parts = []
    if block.get("text"):
        parts.append(f'<div class="mrkdwn">{text_html(block["text"], names)}</div>')
    fields = block.get("fields") or []
    if fields:
        cells = "".join(f'<div class="mrkdwn">{text_html(f, names)}</div>' for f in fields)
        parts.append(f'<div class="bk-fields">{cells}</div>')
    accessory = block.get("accessory")
    side = ""
    if isinstance(accessory, dict):
        side = f'<div class="bk-accessory">{element_html(accessory, names, clickable=clickable)}</div>'
    return f'<div class="bk-section"><div class="bk-main">{"".join(parts)}</div>{side}</div>'


def _rich_text(block: BlockDict, names: Names) -> str:
    out = []
    for part in block.get("elements") or []:
        inner = "".join(_rich_element(e, names) for e in part.get("elements") or [])
        kind = part.get("type")
        if kind == "rich_text_preformatted":
            out.append(f'<pre class="code">{inner}</pre>')
        elif kind == "rich_text_quote":
            out.append(f'<div class="quote">{inner}</div>')
        elif kind == "rich_text_list":
            items = "".join(
                "<li>" + "".join(_rich_element(e, names) for e in item.get("elements") or []) + "</li>"
                for item in part.get("elements") or []
            )
            out.append(f"<ul>{items}</ul>")
        else:
            out.append(f'<div class="mrkdwn">{inner}</div>')
    return "".join(out)


def _rich_element(element: BlockDict, names: Names) -> str:
    kind = element.get("type")
    if kind == "user":
        return f'<span class="mention">@{escape(names.users.get(str(element.get("user_id")), "?"))}</span>'
    if kind == "link":
        url = str(element.get("url", ""))
        return mrkdwn_html(f"<{url}|{element.get('text') or url}>", names)
    if kind == "emoji":
        return _emoji(element)
    html = escape(str(element.get("text", "")))
    style = element.get("style") or {}
    for key, tag in (("code", "code"), ("bold", "b"), ("italic", "i"), ("strike", "s")):
        if style.get(key):
            html = f"<{tag}>{html}</{tag}>"
    return html


def _emoji(element: BlockDict) -> str:
    try:
        return "".join(chr(int(code, 16)) for code in str(element.get("unicode", "")).split("-"))
    except ValueError:
        return escape(f":{element.get('name', '')}:")


def block_html(block: Any, names: Names, *, clickable: bool = True) -> str:
    """One block as HTML (an unknown block type as a labelled placeholder)."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "section":
        return _section(block, names, clickable)
    if kind == "header":
        return f'<div class="bk-header">{text_html(block.get("text"), names)}</div>'
    if kind == "divider":
        return '<hr class="bk-divider">'
    if kind == "context":
        items = "".join(element_html(e, names, clickable=False) for e in block.get("elements") or [])
        return f'<div class="bk-context">{items}</div>'
    if kind == "actions":
        items = "".join(element_html(e, names, clickable=clickable) for e in block.get("elements") or [])
        return f'<div class="bk-actions">{items}</div>'
    if kind == "image":
        title = text_html(block.get("title"), names)
        caption = f'<div class="bk-image-title">{title}</div>' if title else ""
        return f'<figure class="bk-image">{caption}{_image(block, "bk-img")}</figure>'
    if kind == "rich_text":
        return f'<div class="bk-rich">{_rich_text(block, names)}</div>'
    return f'<div class="bk-unknown">[{escape(str(kind))} block]</div>'


def blocks_html(blocks: list[BlockDict], names: Names, *, clickable: bool = True) -> str:
    """A message's blocks, in order."""
    return "".join(block_html(b, names, clickable=clickable) for b in blocks)
