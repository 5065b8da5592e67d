"""The status card (a run's thread root) and its buttons.

Why a card edited in place rather than a message per step: a channel should show one line of
progress per investigation, and the thread below it holds the evidence. The card is rendered
from a `CardState` the reporter keeps, with fresh block ids every time, because `chat.update`
with a block id Slack already holds for another block is refused. Button values carry the
experiment id, the action and a nonce, so a click needs nothing from the message text.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from bot.slack.render_tables import (
    MAX_BUTTON_TEXT,
    MAX_HEADER,
    MAX_SECTION,
    BlockDict,
    clip_escaped,
    code_block,
    context,
    fence_safe,
    plain,
    section,
    summary,
)

MAX_ACTION_VALUE = 2000
"""Characters of a button's value."""
ACTIONS = ("revert", "keep", "rerun", "isolate", "cancel", "approve", "deny", "test_hypothesis")
"""What a button asks for; its action id is `flagbot_<action>`."""
ITEM_ACTIONS = frozenset({"test_hypothesis"})
"""Actions whose button names one item of the experiment (the rank of a proposed hypothesis)."""
ACTION_IDS = {action: f"flagbot_{action}" for action in ACTIONS}
_NONCE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_MENTION = re.compile(r"^<[@!#][A-Z0-9]+(\|[^<>]*)?>$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")

STEP_EMOJI = {
    "pending": "⏳",
    "running": "🔄",
    "ok": "✅",
    "failed": "❌",
    "skipped": "⏭",
    "stopped": "⏹",
}
STATUS_EMOJI = {
    "pending": "⏳",
    "running": "🔄",
    "succeeded": "✅",
    "failed": "❌",
    "cancelled": "⏹",
    "rolled-back": "↩️",
    "interrupted": "⚠️",
    "awaiting-approval": "✋",
    "refused": "🚫",
}
VERDICT_EMOJI = {
    "improved": "✅",
    "regressed": "🔻",
    "no-effect": "➖",
    "failed-to-start": "💥",
    "pass": "✅",
    "fail": "❌",
    "found": "🔎",
    "inconclusive": "❔",
    "not-measured": "❔",
    "not-reproduced": "❔",
}
FINISHED = frozenset({"succeeded", "failed", "cancelled", "rolled-back", "interrupted"})
"""Statuses after which the card offers what comes next (`CardState.next_actions`)."""
STEP_LINES_KEPT = 8
"""Steps shown at each end of a run too long for one section (the middle is elided)."""


def verdict_emoji(verdict: str) -> str:
    """The emoji that leads a verdict (ℹ️ for a verdict word flagbot has no colour for)."""
    return VERDICT_EMOJI.get(verdict, "ℹ️")


@dataclass(frozen=True)
class ActionValue:
    """A button's value read back: which experiment, what to do, the click's idempotency key."""

    experiment_id: int
    action: str
    nonce: str
    item: int | None = None
    """Which item of the experiment (the rank of a proposed hypothesis); None for whole-run buttons."""


def _positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"action value: {name} must be a positive integer, not {value!r}")
    return value


def _check(experiment_id: object, action: object, nonce: object, item: object = None) -> ActionValue:
    number = _positive("experiment_id", experiment_id)
    if action not in ACTIONS:
        raise ValueError(f"action value: unknown action {action!r} (known: {', '.join(ACTIONS)})")
    if not isinstance(nonce, str) or not _NONCE.match(nonce):
        raise ValueError(f"action value: nonce must be 1-128 of [A-Za-z0-9_.:-], not {nonce!r}")
    if (item is None) == (action in ITEM_ACTIONS):
        raise ValueError(f"action value: {action} {'needs' if item is None else 'takes no'} item")
    return ActionValue(number, str(action), nonce, None if item is None else _positive("item", item))


def action_value(experiment_id: int, action: str, nonce: str, *, item: int | None = None) -> str:
    """A button's value: compact JSON that `parse_action_value` reads back (ValueError if invalid)."""
    checked = _check(experiment_id, action, nonce, item)
    data: dict[str, Any] = {"experiment_id": checked.experiment_id, "action": checked.action}
    data["nonce"] = checked.nonce
    if checked.item is not None:
        data["item"] = checked.item
    value = json.dumps(data, separators=(",", ":"))
    assert len(value) <= MAX_ACTION_VALUE
    return value


def parse_action_value(value: str) -> ActionValue:
    """A clicked button's value back; ValueError saying what is wrong with anything else."""
    if not isinstance(value, str):
        raise ValueError(f"action value must be a string, not {type(value).__name__}")
    if len(value) > MAX_ACTION_VALUE:
        raise ValueError(f"action value is {len(value)} characters, more than Slack's {MAX_ACTION_VALUE}")
    try:
        data: Any = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"action value is not JSON ({exc.msg}): {value[:80]!r}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"action value must be a JSON object, not {type(data).__name__}")
    keys = {"experiment_id", "action", "nonce"}
    if set(data) not in (keys, keys | {"item"}):
        raise ValueError(
            f"action value must have exactly the keys {sorted(keys)} (and `item`), not {sorted(data)}"
        )
    return _check(data["experiment_id"], data["action"], data["nonce"], data.get("item"))


def nonce_for(experiment_id: int, action: str, item: int | None = None) -> str:
    """The idempotency key of one button: the same in every render of the card, so a double
    click, a redelivered event or a click on an older copy of the card acts once."""
    key = f"flagbot:{experiment_id}:{action}" + ("" if item is None else f":{item}")
    return hashlib.blake2s(key.encode(), digest_size=8).hexdigest()


def fresh_id(part: str) -> str:
    """A block id never used before (chat.update refuses ids that collide)."""
    return f"flagbot-{part}-{uuid.uuid4().hex}"


_LABELS = {
    "revert": ("Revert", None),
    "keep": ("Keep", None),
    "rerun": ("Re-run benchmark", None),
    "isolate": ("Isolate", None),
    "cancel": ("Cancel", "danger"),
    "approve": ("Approve", "primary"),
    "deny": ("Deny", "danger"),
    "test_hypothesis": ("Run this experiment", "primary"),
}
_CONFIRM = {
    "revert": ("Revert?", "Revert the change of experiment #{id} on every node (a restart)?", "Revert"),
    "cancel": (
        "Cancel the run?",
        "Stop experiment #{id} at its next step (its on-cancel steps run)?",
        "Stop it",
    ),
    "approve": ("Approve?", "Approve experiment #{id}? It restarts the servers.", "Approve"),
}


def _button(experiment_id: int, action: str, item: int | None = None, *, primary: bool = False) -> BlockDict:
    label, style = _LABELS[action]
    style = "primary" if primary else style
    button: BlockDict = {
        "type": "button",
        "action_id": ACTION_IDS[action],
        "text": plain(label, MAX_BUTTON_TEXT),
        "value": action_value(experiment_id, action, nonce_for(experiment_id, action, item), item=item),
    }
    if style:
        button["style"] = style
    if action in _CONFIRM:
        title, text, confirm = _CONFIRM[action]
        button["confirm"] = {
            "title": plain(title, 100),
            "text": plain(text.format(id=experiment_id), 300),
            "confirm": plain(confirm, 30),
            "deny": plain("Not now", 30),
        }
    return button


def _actions(experiment_id: int, actions: tuple[str, ...], primary: str | None = None) -> BlockDict:
    return {
        "type": "actions",
        "block_id": fresh_id("actions"),
        "elements": [_button(experiment_id, action, primary=action == primary) for action in actions],
    }


def verdict_buttons(
    experiment_id: int, *, running: bool, after: tuple[str, ...] = (), primary: str | None = None
) -> BlockDict | None:
    """An `actions` block: Cancel while the run goes; after it, the buttons the application layer
    chose for its outcome (`bot.app.decisions.next_actions`), `primary` green; None: no buttons."""
    if running:
        return _actions(experiment_id, ("cancel",))
    return _actions(experiment_id, after, primary) if after else None


def approval_buttons(experiment_id: int) -> BlockDict:
    """An `actions` block for a run waiting for an approver: Approve and Deny."""
    return _actions(experiment_id, ("approve", "deny"))


def hypothesis_button(experiment_id: int, rank: int, command: str) -> BlockDict:
    """An `actions` block with "Run this experiment" for the proposal of rank `rank` of
    `experiment_id`; its confirmation dialog shows the command it runs."""
    button = _button(experiment_id, "test_hypothesis", rank)
    button["confirm"] = {
        "title": plain("Run this experiment?", 100),
        "text": plain(f"/flagbot {' '.join(command.split())}", 300),
        "confirm": plain("Run it", 30),
        "deny": plain("Not now", 30),
    }
    return {"type": "actions", "block_id": fresh_id("hypothesis"), "elements": [button]}


@dataclass
class CardState:
    """What the card shows; the reporter updates it as the run goes."""

    experiment_id: int | None
    playbook: str
    target: str
    actor: str
    """A Slack user id (`U…`), a mention (`<@U…>`) or a name (shown escaped)."""
    command: str
    """The command as typed."""
    steps: list[tuple[str, str]] = field(default_factory=list)
    """(step name, status: pending|running|ok|failed|skipped|stopped)."""
    status: str = "pending"
    """pending|running|succeeded|failed|cancelled|rolled-back|awaiting-approval|refused"""
    verdict: str | None = None
    summary: str | None = None
    next_actions: tuple[str, ...] = ()
    """The buttons of the finished run (`bot.app.decisions.next_actions`; none by default)."""
    primary_action: str | None = None
    """Which of them is the primary (green) button, if any."""


def _who(actor: str) -> str:
    actor = actor.strip()
    if _MENTION.match(actor):
        return actor
    if _USER_ID.match(actor):
        return f"<@{actor}>"
    return clip_escaped(actor, 200) or "someone"


def _command(command: str) -> str:
    flat = " ".join(command.split())
    if "`" in flat:
        return code_block([clip_escaped(fence_safe(flat), 1000)])
    return f"`{clip_escaped(flat, 1000)}`"


def _steps(steps: list[tuple[str, str]]) -> str:
    lines = [
        f"{STEP_EMOJI.get(status, '•')} {index}. {clip_escaped(' '.join(name.split()), 120)}"
        + ("" if status in STEP_EMOJI else f" ({clip_escaped(status, 40)})")
        for index, (name, status) in enumerate(steps, start=1)
    ]
    text = "\n".join(["*Steps*", *lines])
    if len(text) > MAX_SECTION:
        hidden = len(lines) - 2 * STEP_LINES_KEPT
        lines = [*lines[:STEP_LINES_KEPT], f"⋮ {hidden} more steps", *lines[-STEP_LINES_KEPT:]]
        text = "\n".join(["*Steps*", *lines])
    return text


def _outcome(card: CardState) -> str:
    status = card.status
    lines = [f"*Status:* {STATUS_EMOJI.get(status, 'ℹ️')} {clip_escaped(status, 60)}"]
    if card.verdict:
        lines.append(f"*Verdict:* {verdict_emoji(card.verdict)} {clip_escaped(card.verdict, 60)}")
    if card.summary:
        lines.append(clip_escaped(card.summary.strip(), MAX_SECTION - 200))
    return "\n".join(lines)


def _buttons(card: CardState) -> BlockDict | None:
    if card.experiment_id is None or card.experiment_id < 1:
        return None
    if card.status in ("pending", "running"):
        return verdict_buttons(card.experiment_id, running=True)
    if card.status == "awaiting-approval":
        return approval_buttons(card.experiment_id)
    if card.status in FINISHED:
        return verdict_buttons(
            card.experiment_id, running=False, after=card.next_actions, primary=card.primary_action
        )
    return None


def card_text(card: CardState) -> str:
    """The card's fallback text: playbook, target, status and verdict in one line."""
    number = f" #{card.experiment_id}" if card.experiment_id else ""
    text = f"flagbot {card.playbook}{number} on {card.target}: {card.status}"
    if card.verdict:
        text += f", {card.verdict}"
    if card.summary:
        text += f" - {card.summary}"
    return summary(text)


def status_card(card: CardState) -> tuple[list[BlockDict], str]:
    """The thread root's blocks and fallback text, with fresh block ids every render."""
    number = f" · #{card.experiment_id}" if card.experiment_id else ""
    blocks: list[BlockDict] = [
        {"type": "header", "text": plain(f"{card.playbook} on {card.target}{number}", MAX_HEADER)},
        section(_command(card.command)),
        context(f"asked by {_who(card.actor)}"),
    ]
    if card.steps:
        blocks.append(section(_steps(card.steps)))
    blocks.append(section(_outcome(card)))
    buttons = _buttons(card)
    if buttons is not None:
        blocks.append(buttons)
    for index, block in enumerate(blocks):
        block.setdefault("block_id", fresh_id(f"card{index}"))
    return blocks, card_text(card)
