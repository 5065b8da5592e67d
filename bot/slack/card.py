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

from bot.app.run_headline import RunHeadline, duration_text
from bot.slack.render_tables import (
    MAX_BUTTON_TEXT,
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
ACTIONS = ("revert", "keep", "rerun", "isolate", "force", "cancel", "approve", "deny", "test_hypothesis")
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
    "force": ("Restart anyway (force=yes)", None),
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
    "force": (
        "Restart anyway?",
        "Experiment #{id} was predicted to fail its expectation. Run the same try with force=yes (a restart)?",
        "Restart anyway",
    ),
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
    headline: RunHeadline | None = None
    """The finished run's one line (`bot.app.run_headline`); the card opens with it."""
    step_seconds: dict[int, float] = field(default_factory=dict)
    """How long each finished step took, by its index (the reporter times them)."""
    restart_eta: str | None = None
    """The restart's ETA from this target's last starts, shown beside a restart step until it ends."""


STEP_WORDS = {
    "heal": "settle what an earlier run left",
    "preflight": "preflight checks",
    "open_hypothesis": "record the hypothesis",
    "snapshot_before": "read the running start",
    "measure before": "benchmark before the change",
    "measure after": "benchmark after the change",
    "measure": "benchmark",
    "apply": "apply the change and restart every rank",
    "await_start": "wait for the new start",
    "compare": "compare before and after",
    "propose": "rank the suspects",
    "decide": "keep or revert",
    "close_hypothesis": "close the hypothesis",
    "learn": "record what was learned",
    "learn_isolate": "record what was learned",
    "schedule_checks": "schedule the follow-up checks",
    "restore": "put the flags from before back",
    "observe_now": "read the running server",
    "check_expectations": "check the expectations",
    "plan_revert": "plan the revert",
    "plan_restart": "plan the restart",
    "restart": "restart every rank",
    "verify_back": "check it is back to the baseline",
    "pin": "pin the baseline",
    "isolate": "isolate the culprit (one restart per probe)",
}
"""Each step in words (a playbook's own step that is not listed shows its name)."""
RESTART_STEPS = frozenset({"apply", "await_start", "restart", "isolate", "restore"})
"""Steps whose time is mostly a server start: they show the restart's ETA until they end."""


def step_words(name: str) -> str:
    """A step's name in words: `await_start` reads `wait for the new start`; a step flagbot has
    no words for (a user's own action) keeps the name its playbook gave it."""
    flat = " ".join(name.split())
    return STEP_WORDS.get(flat, flat)


def _who(actor: str) -> str:
    actor = actor.strip()
    if _MENTION.match(actor):
        return actor
    if _USER_ID.match(actor):
        return f"<@{actor}>"
    return clip_escaped(actor, 200) or "someone"


def requester(card: CardState) -> str | None:
    """The mention of whoever asked (`<@U…>`), or None when the card names no Slack user."""
    shown = _who(card.actor)
    return shown if _MENTION.match(shown) else None


def _command(command: str) -> str:
    flat = " ".join(command.split())
    if "`" in flat:
        return code_block([clip_escaped(fence_safe(flat), 1000)])
    return f"`{clip_escaped(flat, 1000)}`"


def _step_line(card: CardState, index: int, name: str, status: str) -> str:
    line = f"{STEP_EMOJI.get(status, '•')} {index + 1}. {clip_escaped(step_words(name), 120)}"
    if status not in STEP_EMOJI:
        line += f" ({clip_escaped(status, 40)})"
    seconds = card.step_seconds.get(index)
    if seconds is not None:
        line += f" · {duration_text(seconds)}"
    elif card.restart_eta and status in ("pending", "running") and " ".join(name.split()) in RESTART_STEPS:
        line += f" · _{clip_escaped(card.restart_eta, 200)}_"
    return line


def _steps(card: CardState) -> str:
    lines = [_step_line(card, index, name, status) for index, (name, status) in enumerate(card.steps)]
    text = "\n".join(["*Steps*", *lines])
    if len(text) > MAX_SECTION:
        hidden = len(lines) - 2 * STEP_LINES_KEPT
        lines = [*lines[:STEP_LINES_KEPT], f"⋮ {hidden} more steps", *lines[-STEP_LINES_KEPT:]]
        text = "\n".join(["*Steps*", *lines])
    return text


def _running_line(card: CardState) -> str:
    where = f"{clip_escaped(card.playbook, 80)} on {clip_escaped(card.target, 80)}"
    current = [(i, name) for i, (name, status) in enumerate(card.steps) if status == "running"]
    if not current:
        return f"{STATUS_EMOJI.get(card.status, 'ℹ️')} {where}: {clip_escaped(card.status, 60)}"
    index, name = current[-1]
    return (
        f"{STATUS_EMOJI['running']} {where}: step {index + 1} of {len(card.steps)}, "
        f"{clip_escaped(step_words(name), 120)}"
    )


def first_line(card: CardState) -> str:
    """The line the card opens with, stating the outcome once: for a finished run what changed,
    the verdict, the number that decided it and what flagbot did; before, where the run is."""
    if card.status in ("pending", "running"):
        return _running_line(card)
    emoji = verdict_emoji(card.verdict) if card.verdict else STATUS_EMOJI.get(card.status, "ℹ️")
    if card.headline is not None and card.status in FINISHED:
        head = card.headline
        line = f"{emoji} `{clip_escaped(fence_safe(head.change), 300)}` → *{clip_escaped(head.outcome, 60)}*"
        if head.decided_by:
            line += f": {clip_escaped(fence_safe(head.decided_by), 600)}"
        return line + (f"; {clip_escaped(head.done, 200)}" if head.done else "")
    word = (card.verdict or card.status).replace("-", " ")
    line = f"{emoji} {clip_escaped(card.playbook, 80)} on {clip_escaped(card.target, 80)} → *{clip_escaped(word, 60)}*"
    if card.verdict and card.status != "succeeded":
        line += f" (run {clip_escaped(card.status, 40)})"
    if card.summary:
        line += f": {clip_escaped(' '.join(card.summary.split()), MAX_SECTION - 400)}"
    return line


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
    """The card's fallback text: playbook, target and how the run ended (what programs reading
    the channel match on), then the first line as plain text."""
    number = f" #{card.experiment_id}" if card.experiment_id else ""
    if card.headline is not None and card.status in FINISHED:
        return summary(
            f"flagbot {card.playbook}{number} on {card.target}: {card.status} - {card.headline.text()}"
        )
    text = f"flagbot {card.playbook}{number} on {card.target}: {card.verdict or card.status}"
    if card.summary:
        text += f" - {card.summary}"
    return summary(text)


def status_card(card: CardState) -> tuple[list[BlockDict], str]:
    """The thread root's blocks and fallback text, with fresh block ids every render: the one
    line first, then the command, who asked and the run's number, the steps, the buttons."""
    number = f" · #{card.experiment_id}" if card.experiment_id else ""
    blocks: list[BlockDict] = [
        section(first_line(card)),
        section(_command(card.command)),
        context(
            f"{clip_escaped(card.playbook, 80)} on {clip_escaped(card.target, 80)}{number} · asked by {_who(card.actor)}"
        ),
    ]
    if card.steps:
        blocks.append(section(_steps(card)))
    buttons = _buttons(card)
    if buttons is not None:
        blocks.append(buttons)
    for index, block in enumerate(blocks):
        block.setdefault("block_id", fresh_id(f"card{index}"))
    return blocks, card_text(card)
