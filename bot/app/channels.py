"""Where flagbot answers commands in Slack: `[slack] channels` plus each target's own `channel`.

An entry is a channel id (`C…`/`G…`) or a `#name`. None at all: flagbot answers wherever it is
invited. Otherwise a slash command or a mention elsewhere gets one ephemeral pointer naming the
channels, and nothing runs. A name matches the channel's current name, which a slash command
carries and a mention's channel is asked for (`conversations.info`) only when no id matched.
"""

from __future__ import annotations

import re

from bot.config import Settings

_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")


def allowed_channels(settings: Settings) -> tuple[str, ...]:
    """`[slack] channels`, then every target's own `channel` (in config order, once each)."""
    entries = [*settings.slack.channels, *(t.channel for t in settings.targets.values() if t.channel)]
    return tuple(dict.fromkeys(entries))


def answers_in(settings: Settings, channel_id: str, channel_name: str | None = None) -> bool:
    """Whether flagbot answers commands in this channel (`channel_name`: without '#', if known)."""
    allowed = allowed_channels(settings)
    if not allowed or channel_id in allowed:
        return True
    return channel_name is not None and f"#{channel_name.lstrip('#')}" in allowed


def needs_name(settings: Settings, channel_id: str) -> bool:
    """Whether only the channel's name can decide (`#name` entries, and the id matched none)."""
    allowed = allowed_channels(settings)
    return bool(allowed) and channel_id not in allowed and any(not _ID.match(e) for e in allowed)


def pointer(settings: Settings) -> str:
    """The ephemeral answer elsewhere: the channels where flagbot does answer."""
    names = ", ".join(
        entry if entry.startswith("#") else f"<#{entry}>" for entry in allowed_channels(settings)
    )
    return (
        f"flagbot answers commands only in {names} (`[slack] channels` and the targets' own "
        "`channel`): run it there"
    )
