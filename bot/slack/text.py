"""What a user typed, from what Slack delivers.

Slack escapes `&`, `<` and `>` in the text of messages and slash commands (`&amp;`, `&lt;`,
`&gt;`): `/flagbot verify max_running_requests>=48` arrives as `max_running_requests&gt;=48`.
Read as is, every expectation would be refused. The three entities are turned back before the
grammar reads the words; `&amp;` last, so a typed `&lt;` stays `&lt;`.
"""

from __future__ import annotations

__all__ = ["slack_escape", "typed_text"]


def typed_text(delivered: str) -> str:
    """The text as the user typed it."""
    return delivered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def slack_escape(typed: str) -> str:
    """What Slack makes of typed text (the stand-in uses it to deliver as Slack does)."""
    return typed.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
