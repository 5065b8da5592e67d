"""The engine's Reporter for Slack: one investigation thread per run.

The thread's root is a status card, edited in place (`chat.update`) as the playbook's steps
run; evidence arrives as replies (tables, journal excerpts with their command, long excerpts as
files, charts as images); the verdict is also broadcast to the channel, and the card gets the
buttons for what comes next. Every message carries the experiment's id in its metadata, so a
click or a mention in the thread finds its experiment without parsing text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import ClientError
from slack_sdk.errors import SlackClientError

from bot.app.decisions import next_actions_of
from bot.digest.threads import record_thread
from bot.loop.report import RunOutcome, RunStart
from bot.slack.render import CardState, messages, render_block, status_card
from bot.slack.services import error_id as new_error_id
from bot.target.evidence import Evidence, TextBlock, VerdictBlock

T = TypeVar("T")
log = logging.getLogger(__name__)


def metadata(experiment_id: int | None, hypothesis_id: int | None = None) -> dict[str, Any]:
    """Slack message metadata naming the run (read back by button and mention handlers)."""
    return {
        "event_type": "flagbot_experiment",
        "event_payload": {"experiment_id": experiment_id or 0, "hypothesis_id": hypothesis_id or 0},
    }


@dataclass
class SlackThreadReporter:
    """Posts one run into `channel`'s thread rooted at `card_ts` (the status card)."""

    client: Any
    """An `AsyncWebClient` (or anything with the same coroutine methods)."""
    channel: str
    card_ts: str
    card: CardState
    thread_ts: str | None = None
    """The investigation thread (default: the card itself is the thread's root)."""
    hypothesis_id: int | None = None
    posted: list[str] = field(default_factory=list)
    """ts of every reply posted, in order (tests and the demo read the thread back by them)."""
    store: Any = None
    """An `AsyncStore`: when set, where the run is discussed is recorded at its start
    (`bot.digest.threads`; the weekly digest links each experiment to its thread)."""

    failed: int = 0
    """Slack calls that failed for good (after slack_sdk's retries of 429s), all logged under
    `error_id`: one id per thread, which the thread is given at the end (`finished`)."""
    error_id: str | None = None

    async def _slack(self, what: str, call: Awaitable[T]) -> T | None:
        """A Slack call that must not stop the run: the thread is a view, the store holds the run."""
        try:
            return await call
        except (SlackClientError, ClientError, TimeoutError) as exc:
            self.failed += 1
            self.error_id = self.error_id or new_error_id()
            log.error(
                "flagbot error %s: %s of experiment #%s failed: %s",
                self.error_id,
                what,
                self.card.experiment_id,
                exc,
            )
            return None

    async def _update_card(self) -> None:
        blocks, text = status_card(self.card)
        call = self.client.chat_update(
            channel=self.channel,
            ts=self.card_ts,
            blocks=blocks,
            text=text,
            metadata=metadata(self.card.experiment_id, self.hypothesis_id),
        )
        await self._slack("updating the card", call)

    @property
    def thread(self) -> str:
        return self.thread_ts or self.card_ts

    async def refresh(self) -> None:
        """Re-render the card (after a change made outside the engine, e.g. a refused lease)."""
        await self._update_card()

    async def refuse(self, reason: str) -> None:
        """The run did not start (the target's lease is held, ...): the card says why."""
        self.card.status = "refused"
        self.card.summary = reason
        await self._update_card()

    async def conclude(self, status: str, summary: str | None, verdict: str | None = None) -> None:
        """The end of a command that is no playbook (rollback, reconcile, bench)."""
        self.card.status, self.card.summary, self.card.verdict = status, summary, verdict
        await self._update_card()

    async def note(self, text: str) -> None:
        """A plain sentence in the thread (what reconcile settled, who clicked what)."""
        await self.evidence(TextBlock(text), self.card.experiment_id or 0)

    async def _reply(self, blocks: list[dict[str, Any]], text: str, *, broadcast: bool = False) -> None:
        for part, part_text in messages(blocks, text):
            call = self.client.chat_postMessage(
                channel=self.channel,
                thread_ts=self.thread,
                blocks=part,
                text=part_text,
                reply_broadcast=broadcast,
                metadata=metadata(self.card.experiment_id, self.hypothesis_id),
            )
            answer = await self._slack("posting in the thread", call)
            if answer is not None:
                self.posted.append(str(answer["ts"]))

    async def started(self, info: RunStart) -> None:
        self.card.experiment_id = info.experiment_id
        self.card.status = "running"
        await self._update_card()
        await self._record_thread(info)

    async def _record_thread(self, info: RunStart) -> None:
        """The thread's channel, ts and permalink, stored with the experiment; a failure here is
        logged and never stops the run."""
        if self.store is None:
            return

        try:
            found = await self.client.chat_getPermalink(channel=self.channel, message_ts=self.thread)
            link = found.get("permalink")
            await self.store.run(
                record_thread,
                self.store.store,
                experiment_id=info.experiment_id,
                target=info.target,
                channel=self.channel,
                thread_ts=self.thread,
                permalink=link if isinstance(link, str) else None,
            )
        except Exception:
            log.warning("could not record the thread of experiment #%s", info.experiment_id, exc_info=True)

    async def _choose_buttons(self, experiment_id: int | None) -> None:
        """The finished card's buttons, as the application layer decides them for the stored
        experiment (none without a store, or when it cannot be read: a card without buttons is
        better than one whose buttons mislead)."""
        if self.store is None:
            return
        try:
            chosen = await next_actions_of(self.store, experiment_id)
        except Exception:
            log.warning("could not choose the buttons of experiment #%s", experiment_id, exc_info=True)
            return
        self.card.next_actions, self.card.primary_action = chosen.actions, chosen.primary

    async def step(self, experiment_id: int, index: int, name: str, status: str, detail: str) -> None:
        while len(self.card.steps) <= index:
            self.card.steps.append((name, "pending"))
        self.card.steps[index] = (name, status)
        await self._update_card()

    async def evidence(self, block: Evidence, experiment_id: int) -> None:
        rendered = render_block(block)
        if rendered.blocks:
            await self._reply(rendered.blocks, rendered.text, broadcast=isinstance(block, VerdictBlock))
        for upload in rendered.files:
            answer = await self.client.files_upload_v2(
                channel=self.channel,
                thread_ts=self.thread,
                content=upload.content,
                filename=upload.filename,
                title=upload.title,
                initial_comment=upload.initial_comment,
            )
            self.posted.append(str(answer.get("file", {}).get("id", "")))
        for image in rendered.images:
            answer = await self.client.files_upload_v2(
                channel=self.channel,
                thread_ts=self.thread,
                file=str(image),
                filename=image.name,
                title=getattr(block, "title", image.name),
            )
            self.posted.append(str(answer.get("file", {}).get("id", "")))

    async def finished(self, outcome: RunOutcome) -> None:
        await self._choose_buttons(outcome.experiment_id)
        await self.conclude(outcome.status, outcome.summary, outcome.verdict)
        if self.failed:  # said once, after the run: what the thread misses, and where it is
            await self.note(
                f"experiment #{outcome.experiment_id} ended {outcome.status}"
                + (f": {outcome.summary}" if outcome.summary else "")
                + f". Slack refused {self.failed} update(s) of this thread (error id {self.error_id}); "
                "`/flagbot log` has the whole run."
            )
