"""What a user typed, from what Slack delivers.

Slack escapes `&`, `<` and `>` in the text of messages and slash commands (`&amp;`, `&lt;`,
`&gt;`): `/flagbot verify max_running_requests>=48` arrives as `max_running_requests&gt;=48`.
Read as is, every expectation would be refused. The three entities are turned back before the
grammar reads the words; `&amp;` last, so a typed `&lt;` stays `&lt;`. The other way is
`bot.slack.render_tables.escape` (what the renderer and the stand-in use).
"""

from __future__ import annotations

__all__ = ["typed_text"]


def typed_text(delivered: str) -> str:
    """The text as the user typed it."""
    return delivered.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
