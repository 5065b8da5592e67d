"""The engine's Reporter for Slack: one investigation thread per run.

The thread's root is a status card, edited in place (`chat.update`) as the playbook's steps
run. Why sections and not a reply per block: a try made 21 replies, and an on-call engineer
reads a thread in ten seconds. Its evidence goes into at most five replies, one per part of
the story (preflight; the change; start and capacity; benchmark and chart; verdict and
hypotheses), each posted with its first block and edited as the part grows; long tables and
excerpts are uploaded as files and linked, charts shown as images of uploaded files, so no
upload adds a reply. When the run ends one more reply mentions the requester and is broadcast
to the channel: the outcome line and at most three cells that decided it. Every message
carries the experiment's id in its metadata, so a click or a mention in the thread finds its
experiment without parsing text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import ClientError
from slack_sdk.errors import SlackClientError

from bot.app.decisions import next_actions_of
from bot.app.run_headline import decisive_cells, headline_of, restart_eta_of
from bot.digest.threads import record_thread
from bot.loop.report import RunOutcome, RunStart
from bot.slack.card import first_line, requester
from bot.slack.render import CardState, FileUpload, messages, render_block, status_card
from bot.slack.render_tables import (
    MAX_BLOCKS,
    MAX_SECTION,
    BlockDict,
    clip_escaped,
    context,
    section,
    summary,
)
from bot.slack.services import error_id as new_error_id
from bot.slack.thread_sections import SECTION_TITLES, long_table_file, section_of
from bot.target.evidence import ChartBlock, Evidence, TextBlock, VerdictBlock

T = TypeVar("T")
log = logging.getLogger(__name__)


def metadata(experiment_id: int | None, hypothesis_id: int | None = None) -> dict[str, Any]:
    """Slack message metadata naming the run (read back by button and mention handlers)."""
    return {
        "event_type": "flagbot_experiment",
        "event_payload": {"experiment_id": experiment_id or 0, "hypothesis_id": hypothesis_id or 0},
    }


def card_metadata(card: CardState, hypothesis_id: int | None = None) -> dict[str, Any]:
    """The card's metadata: the run, and its status and verdict as data. The card's text states
    the outcome once, in words; a program reading the channel (the demo) reads these instead."""
    data = metadata(card.experiment_id, hypothesis_id)
    data["event_payload"] |= {"status": card.status, "verdict": card.verdict or ""}
    return data


@dataclass
class ThreadSection:
    """One reply of the thread: its blocks so far and, once posted, its ts (then it is edited)."""

    title: str
    blocks: list[BlockDict] = field(default_factory=list)
    text: str = ""
    ts: str | None = None


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

    clock: Callable[[], float] = time.monotonic
    """Times the steps (a test gives its own clock)."""
    sections: dict[str, ThreadSection] = field(default_factory=dict)
    """The thread's replies by part (`bot.slack.thread_sections`), in the order they were posted."""
    current_step: str | None = None
    """The step that is running (its evidence goes to its part); None before the first."""
    step_started: dict[int, float] = field(default_factory=dict)
    run_params: dict[str, Any] = field(default_factory=dict)
    verdict_details: list[str] = field(default_factory=list)
    """The details of the run's verdicts, read for the cells that decided it."""
    ended: bool = False

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
            metadata=card_metadata(self.card, self.hypothesis_id),
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
        """A plain sentence in the thread (what reconcile settled, who clicked what): while the
        run goes, in the part it belongs to; after it ended, a reply of its own."""
        if self.ended:
            await self._reply(render_block(TextBlock(text)).blocks, summary(text))
            return
        await self.evidence(TextBlock(text), self.card.experiment_id or 0)

    async def _reply(self, blocks: list[dict[str, Any]], text: str, *, broadcast: bool = False) -> str | None:
        first: str | None = None
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
                first = first or str(answer["ts"])
        return first

    async def started(self, info: RunStart) -> None:
        self.card.experiment_id = info.experiment_id
        self.card.status = "running"
        self.run_params = dict(info.params)
        await self._restart_eta(info.target)
        await self._update_card()
        await self._record_thread(info)

    async def _restart_eta(self, target: str) -> None:
        """The restart's ETA from the target's stored starts (none shown without a store; a
        failure to read it is logged and never stops the run)."""
        if self.store is None:
            return
        try:
            self.card.restart_eta = (await restart_eta_of(self.store, target)).text()
        except Exception:
            log.warning("could not read the start durations of %s", target, exc_info=True)

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
        now = self.clock()
        if status == "running":
            self.current_step = name
            self.step_started[index] = now
        elif index in self.step_started:
            self.card.step_seconds[index] = now - self.step_started[index]
        await self._update_card()

    async def _upload(self, upload: FileUpload) -> BlockDict | None:
        """A file uploaded without sharing it (a share would be a reply of its own) and linked."""
        answer = await self._slack(
            "uploading a file",
            self.client.files_upload_v2(content=upload.content, filename=upload.filename, title=upload.title),
        )
        found = (answer.get("file") or {}) if answer is not None else {}
        link = found.get("permalink")
        if not isinstance(link, str):
            return None
        return context(f"📎 <{link}|{clip_escaped(upload.title, 200)}>: {upload.initial_comment}")

    async def _image(self, path: str, title: str) -> BlockDict | None:
        """A chart uploaded without sharing it, shown as an image block of that file."""
        answer = await self._slack(
            "uploading a chart",
            self.client.files_upload_v2(file=path, filename=path.rsplit("/", 1)[-1], title=title),
        )
        found = (answer.get("file") or {}) if answer is not None else {}
        link = found.get("permalink")
        if not isinstance(link, str):
            return None
        return {
            "type": "image",
            "slack_file": {"url": link},
            "alt_text": clip_escaped(title, 1900) or "chart",
        }

    async def _blocks_of(self, block: Evidence) -> tuple[list[BlockDict], str]:
        """One evidence block as the blocks of its part: a long table as a linked file, long
        excerpts linked, a chart as an image."""
        table = long_table_file(block)
        if table is not None:
            link = await self._upload(table)
            return ([link] if link is not None else []), summary(table.title)
        rendered = render_block(block)
        blocks = list(rendered.blocks)
        for upload in rendered.files:
            link = await self._upload(upload)
            if link is not None:
                blocks.append(link)
        if isinstance(block, ChartBlock):
            image = await self._image(block.path, block.title)
            if image is not None:
                blocks.append(image)
        return blocks, rendered.text

    async def evidence(self, block: Evidence, experiment_id: int) -> None:
        if isinstance(block, VerdictBlock):
            self.verdict_details.extend(block.details)
        part = section_of(self.current_step, block)
        blocks, text = await self._blocks_of(block)
        if blocks:
            await self._add(part, blocks, text)

    async def add_to_part(self, part: str, blocks: list[BlockDict], text: str) -> None:
        """Blocks added to one part's reply after the run (the proposals with their buttons go
        to `details`): edited into it, not a reply of their own."""
        await self._add(part, blocks, text)

    async def _add(self, part: str, blocks: list[BlockDict], text: str) -> None:
        """Blocks appended to the part's reply: posted the first time, edited after (its fallback
        text says the latest addition). What would not fit in one message (Slack's 50 blocks) is
        uploaded as a file and linked instead."""
        found = self.sections.get(part)
        if found is None:
            title = SECTION_TITLES.get(part, part)
            found = self.sections[part] = ThreadSection(title, [section(f"*{title}*")])
        if len(found.blocks) + len(blocks) > MAX_BLOCKS - 1:
            content = "\n\n".join(
                str(b.get("text", {}).get("text", "")) for b in blocks if isinstance(b.get("text"), dict)
            )
            link = await self._upload(FileUpload(f"{part}-more.txt", content, f"{found.title} (more)", text))
            blocks = (
                [link]
                if link is not None
                else [context(f"{clip_escaped(text, 200)} (too long for the thread; `/flagbot log` has it)")]
            )
            if len(found.blocks) + len(blocks) > MAX_BLOCKS:
                return
        found.blocks.extend(blocks)
        found.text = summary(f"{found.title}: {text}")  # a notification shows the latest addition
        if found.ts is None:
            found.ts = await self._reply(found.blocks, found.text)
            return
        call = self.client.chat_update(
            channel=self.channel,
            ts=found.ts,
            blocks=found.blocks,
            text=found.text,
            metadata=metadata(self.card.experiment_id, self.hypothesis_id),
        )
        await self._slack("adding to a reply", call)

    async def _announce_end(self, outcome: RunOutcome) -> None:
        """The run's last reply: the requester mentioned (a mention in an edit notifies nobody),
        the card's line and the cells that decided the verdict, broadcast when there is one."""
        line = first_line(self.card)
        who = requester(self.card)
        head = f"{who} {line}" if who else line
        cells = decisive_cells(self.verdict_details, outcome.verdict or "")
        text = "\n".join([head, *(f"• {clip_escaped(cell, 400)}" for cell in cells)])
        blocks = [section(text[:MAX_SECTION])]
        plain = summary(self.card.headline.text() if self.card.headline else line)
        fallback = f"{who} {plain}" if who else plain  # the mention is markup: never escaped
        await self._reply(blocks, fallback, broadcast=outcome.verdict is not None)

    async def tell_requester(self) -> None:
        """A run with no verdict (rollback, reconcile, bench) ends with one reply too, after its
        card is concluded: the requester mentioned with the card's line, never broadcast."""
        who = requester(self.card)
        if who is None:
            return
        line = first_line(self.card)
        await self._reply([section(f"{who} {line}"[:MAX_SECTION])], f"{who} {summary(line)}")

    async def finished(self, outcome: RunOutcome) -> None:
        await self._choose_buttons(outcome.experiment_id)
        self.card.headline = headline_of(outcome, self.run_params, self.verdict_details)
        await self.conclude(outcome.status, outcome.summary, outcome.verdict)
        self.ended = True
        await self._announce_end(outcome)
        if self.failed:  # said once, after the run: what the thread misses, and where it is
            await self.note(
                f"experiment #{outcome.experiment_id} ended {outcome.status}"
                + (f": {outcome.summary}" if outcome.summary else "")
                + f". Slack refused {self.failed} update(s) of this thread (error id {self.error_id}); "
                "`/flagbot log` has the whole run."
            )
