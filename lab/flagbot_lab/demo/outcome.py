"""Has a story step reached its expected outcome? Decided from what the stand-in recorded.

The demo never asks the bot how a run went: it reads what the bot posted, as a person in the
channel would (the status card's final status and verdict, the evidence in the thread). That
keeps the demo honest (a run that finished but posted nothing useful fails the story) and lets
one pure function, `judge`, be unit-tested on a hand-made recorded thread.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from flagbot_lab.demo.story import Show, Step
from flagbot_lab.demo.thread import is_card, message_text, note_text, ts_key
from flagbot_lab.standin.state import StandinState

State = Literal["waiting", "reached", "failed", "pending"]
FINAL = frozenset({"succeeded", "failed", "cancelled", "rolled-back", "interrupted", "refused"})
"""Card statuses after which a run posts nothing more on its card."""
ACK_PREFIX = ("starting `", "checking `")
"""How the bot acknowledges a run to the one who typed it (not a refusal): it starts, or its flags
wait for the host's own flag list (the answer follows)."""
_RUNNING = re.compile(r"^🔄 \d+\. (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class CardView:
    """A run's status card as read from the channel, with its thread as text."""

    ts: str
    status: str | None
    verdict: str | None
    text: str
    """The card, then every reply of its thread."""
    running: str | None = None
    """The step the card shows as running, if any."""


@dataclass(frozen=True)
class Observed:
    """What the bot posted after one command: plain data, so `judge` is a pure function."""

    cards: tuple[CardView, ...] = ()
    answers: tuple[str, ...] = ()
    """Texts of the bot's channel messages that belong to no run."""
    notes: tuple[str, ...] = ()
    """Ephemeral messages to the user who typed the command."""


@dataclass(frozen=True)
class Outcome:
    state: State
    detail: str
    found: tuple[str, ...] = ()
    """Labels of the story's `Show`s the thread shows."""
    missing: tuple[str, ...] = ()
    card_ts: str | None = None

    @property
    def done(self) -> bool:
        return self.state != "waiting"


def card_view(text: str, ts: str, metadata: Mapping[str, Any] | None) -> CardView:
    """Status and verdict read from the card's metadata (its text states the outcome once, in
    words: `bot.slack.reporter.card_metadata`), the running step from its text."""
    payload = (metadata or {}).get("event_payload") or {}
    status, verdict = payload.get("status"), payload.get("verdict")
    running = _RUNNING.search(text)
    return CardView(
        ts=ts,
        status=str(status) if status else None,
        verdict=str(verdict) if verdict else None,
        text=text,
        running=running.group(1) if running else None,
    )


def observe(state: StandinState, channel: str, after_ts: str, user: str) -> Observed:
    """Everything the bot posted in `channel` after `after_ts` (cards with their threads,
    plain answers), and what only `user` was shown."""
    names = {u.id: u.name for u in state.workspace.users.values()}
    after = ts_key(after_ts)
    cards: list[CardView] = []
    answers: list[str] = []
    for root in state.messages(channel):
        if root.is_reply or ts_key(root.ts) <= after or root.bot_id is None:
            continue
        if is_card(root):
            thread = [message_text(m, names) for m in state.thread(channel, root.ts)]
            cards.append(card_view("\n".join(thread), root.ts, root.metadata))
        else:
            answers.append(message_text(root, names))
    notes = tuple(
        note_text(n, names)
        for n in state.ephemerals(user)
        if n.channel == state.workspace.channel(channel).id and ts_key(n.ts) > after
    )
    return Observed(tuple(cards), tuple(answers), notes)


def _shows(shows: tuple[Show, ...], text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    found = tuple(s.label for s in shows if re.search(s.pattern, text))
    return found, tuple(s.label for s in shows if s.label not in found)


def _refusals(observed: Observed) -> list[str]:
    return [n for n in observed.notes if not n.startswith(ACK_PREFIX)]


def judge(step: Step, observed: Observed) -> Outcome:
    """Where the step stands: still waiting, reached, failed (with what differs), or pending."""
    expect = step.expect
    everything = "\n".join([*(c.text for c in observed.cards), *observed.answers, *observed.notes])
    if expect.pending_if and expect.pending_if in everything:
        return Outcome("pending", f"not available yet: {expect.pending_if}")
    if expect.kind == "answer":
        return _judge_answer(step, observed)
    if not observed.cards:
        refused = _refusals(observed)
        if refused:
            return Outcome("failed", f"the bot refused it: {refused[0]}")
        return Outcome("waiting", "waiting for the status card")
    card = observed.cards[0]
    if card.status not in FINAL:
        doing = f"running: {card.running}" if card.running else f"card {card.status or 'posted'}"
        return Outcome("waiting", doing, card_ts=card.ts)
    found, missing = _shows(expect.shows, card.text)
    problems = []
    if card.status not in expect.statuses:
        problems.append(f"status {card.status} (expected {' or '.join(expect.statuses)})")
    if expect.verdicts and card.verdict not in expect.verdicts:
        problems.append(f"verdict {card.verdict or 'none'} (expected {' or '.join(expect.verdicts)})")
    if missing:
        problems.append("the thread does not show: " + "; ".join(missing))
    verdict = f", {card.verdict}" if card.verdict else ""
    if problems:
        return Outcome("failed", f"{card.status}{verdict}: " + "; ".join(problems), found, missing, card.ts)
    return Outcome("reached", f"{card.status}{verdict}", found, missing, card.ts)


def _judge_answer(step: Step, observed: Observed) -> Outcome:
    refused = _refusals(observed)
    if refused and not observed.answers:
        return Outcome("failed", f"the bot answered only: {refused[0]}")
    if not observed.answers:
        return Outcome("waiting", "waiting for the answer")
    found, missing = _shows(step.expect.shows, "\n".join(observed.answers))
    if missing:  # more messages of the answer may still come; the runner's deadline decides
        return Outcome("waiting", "the answer does not show: " + "; ".join(missing), found, missing)
    return Outcome("reached", "answered", found, missing)


@dataclass
class Progress:
    """One line per step for the console, and the record the headless summary is made from."""

    step: Step
    outcome: Outcome
    seconds: float

    def line(self, index: int, total: int) -> str:
        mark = {"reached": "ok", "pending": "PENDING", "failed": "FAILED", "waiting": "TIMED OUT"}
        shown = "; ".join(self.outcome.found)
        tail = f" - {shown}" if shown and self.outcome.state == "reached" else ""
        return (
            f"[{index}/{total}] {self.step.title:<22} {mark[self.outcome.state]:<9} "
            f"{self.seconds:6.1f} s  {self.outcome.detail}{tail}"
        )
