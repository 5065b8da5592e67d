"""A local Slack stand-in: the Web API, file uploads, response_urls, and signed requests to the bot.

Shipped with flagbot (not a test helper) because `make demo` runs the bot against it; the
tests use it in place of slack.com. Contract: docs/slack.md, "Stand-in contract".
"""

from flagbot_lab.standin.model import (
    APP_ID,
    BOT_ID,
    BOT_USER_ID,
    TEAM_ID,
    Channel,
    Ephemeral,
    Message,
    Revision,
    StoredFile,
    User,
    Usergroup,
)
from flagbot_lab.standin.outbound import BotRequest, Response, Signing, SlashInThreadError, signature
from flagbot_lab.standin.recording import Call, ResponsePost, ResponseTarget
from flagbot_lab.standin.server import Standin
from flagbot_lab.standin.workspace import SlackError, Workspace

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "TEAM_ID",
    "BotRequest",
    "Call",
    "Channel",
    "Ephemeral",
    "Message",
    "Response",
    "ResponsePost",
    "ResponseTarget",
    "Revision",
    "Signing",
    "SlackError",
    "SlashInThreadError",
    "Standin",
    "StoredFile",
    "User",
    "Usergroup",
    "Workspace",
    "signature",
]
