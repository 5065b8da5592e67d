"""The "Run when free" button under a refusal for a busy target: one click re-sends the same
words with `wait=RUN_WHEN_FREE_WAIT`, so the requester need not retype the command.

Why the words ride in the button's value: a refused command wrote nothing (no experiment whose
id a button could name). The value is read back as hostile input all the same: the words are
parsed and authorised again for whoever clicks (`bot.slack.buttons`), only the requester may
click it, and its nonce is taken once, like every other button's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

__all__ = [
    "RUN_WHEN_FREE_ACTION",
    "RUN_WHEN_FREE_WAIT",
    "RunWhenFree",
    "parse_run_when_free",
    "run_when_free_blocks",
]

RUN_WHEN_FREE_ACTION = "flagbot_run_when_free"
RUN_WHEN_FREE_WAIT = "30m"
"""The wait the button adds (docs/slack.md); within `wait=`'s 4h maximum."""
_VALUE_MAX = 2000  # Slack's limit on a button's value
_NONCE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_USER = re.compile(r"^[A-Z0-9]{1,32}$")


@dataclass(frozen=True)
class RunWhenFree:
    """A "Run when free" button's value read back: the words to send, who asked, the click's key."""

    words: str
    requester: str
    nonce: str


def run_when_free_blocks(words: str, requester: str, reason: str) -> list[dict[str, Any]] | None:
    """The refusal's reply with the button, or None when the words with `wait=` do not fit in a
    button's value (the refusal then only says to add `wait=`)."""
    value = json.dumps(
        {"words": f"{words} wait={RUN_WHEN_FREE_WAIT}", "requester": requester, "nonce": uuid4().hex},
        separators=(",", ":"),
    )
    if len(value) > _VALUE_MAX:
        return None
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": reason}},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": RUN_WHEN_FREE_ACTION,
                    "text": {"type": "plain_text", "text": "Run when free"},
                    "value": value,
                }
            ],
        },
    ]


def parse_run_when_free(value: str) -> RunWhenFree:
    """The button's value, checked (ValueError naming what is wrong)."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError:
        raise ValueError("run-when-free value: not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("run-when-free value: not an object")
    words, requester, nonce = data.get("words"), data.get("requester"), data.get("nonce")
    if not isinstance(words, str) or not words.strip() or len(words) > _VALUE_MAX:
        raise ValueError("run-when-free value: words must be a non-empty string")
    if not isinstance(requester, str) or not _USER.match(requester):
        raise ValueError("run-when-free value: requester must be a Slack user id")
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise ValueError("run-when-free value: nonce must be 1-128 of [A-Za-z0-9_.:-]")
    return RunWhenFree(words, requester, nonce)
