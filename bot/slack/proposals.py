"""After a regression: the ranked hypotheses in the thread, each with "Run this experiment".

The loop's `propose` step ranks the suspects (`bot.loop.rank`) and stores them in the
experiment's state, and its evidence table shows, per rank, the command that tests each one.
This module adds nothing to that reasoning: it offers those same commands as buttons, each in
its own `actions` block of the thread's "verdict and hypotheses" reply (a button's action id is
unique only within its block; the click names its block, and only that block is replaced by who
ran it), so the hypotheses add no reply to a try's thread. A click is authorised like the command it stands for (the
handler does that); this module records the proposal as a hypothesis (`hypothesis add`, once:
the click's key is taken first) and gives back the command linked to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.loop.report import RunOutcome
from bot.loop.run_state import RunState
from bot.slack.render import hypothesis_button, messages, render_block
from bot.slack.render_tables import clip_escaped, section
from bot.slack.reporter import SlackThreadReporter, metadata
from bot.slack.services import SlackServices
from bot.store.experiments import get_experiment
from bot.store.hypotheses import add_hypothesis
from bot.store.loop_models import Experiment
from bot.store.records import evidence_of
from bot.target.evidence import TextBlock

PROPOSALS_TITLE = "Hypotheses, most likely first"
"""The title of the `propose` step's evidence table (its last column is the command)."""
MAX_BUTTONS = 5
"""Proposals offered as buttons; the rest stay in the table above."""


@dataclass(frozen=True)
class Proposal:
    """One ranked hypothesis of an experiment and the command that tests it."""

    rank: int
    variable: str
    statement: str
    why: tuple[str, ...]
    command: str


async def proposals_of(services: SlackServices, experiment_id: int) -> list[Proposal]:
    """The experiment's proposals with their commands (as the evidence table shows them)."""
    store = services.store
    row = await store.run(get_experiment, store.store, experiment_id)
    if row is None:
        raise LookupError(f"no experiment #{experiment_id}")
    ranked = RunState.load(row.state).conclusion.proposals
    tables = [
        e.data
        for e in await store.run(evidence_of, store.store, experiment_id)
        if e.kind == "table" and e.title == PROPOSALS_TITLE
    ]
    commands = {str(r[0]): str(r[-1]) for r in (tables[-1].get("rows", []) if tables else [])}
    found = []
    for rank, item in enumerate(ranked, start=1):
        command = commands.get(str(rank), "").strip()
        if command:
            found.append(Proposal(rank, item.variable, item.statement, tuple(item.why), command))
    return found


async def post_proposals(
    services: SlackServices,
    client: AsyncWebClient,
    outcome: RunOutcome,
    *,
    channel: str,
    thread: str,
    reporter: SlackThreadReporter | None = None,
) -> int:
    """The proposals (at most MAX_BUTTONS), each with its button, in one message: added to the
    reporter's "verdict and hypotheses" reply when given, else posted in `thread`; the number.

    Nothing when the run proposed nothing; only a sentence when it was a try whose change was
    reverted (the suspects are gone from the target: their experiments would test nothing)."""
    proposed = any(
        s.get("action") == "propose" and (s.get("result") or {}).get("proposals") for s in outcome.steps
    )
    if not proposed:
        return 0
    row = await services.store.run(get_experiment, services.store.store, outcome.experiment_id)
    blocks: list[dict[str, Any]] = []
    if row is not None and row.playbook == "try" and RunState.load(row.state).conclusion.kept is False:
        note = "The change was reverted, so the hypotheses above have nothing left to test on the target."
        await _post(
            services, client, reporter, channel, thread, render_block(TextBlock(note)).blocks, note, outcome
        )
        return 0
    proposals = (await proposals_of(services, outcome.experiment_id))[:MAX_BUTTONS]
    for proposal in proposals:
        text = f"*H{proposal.rank}* {clip_escaped(proposal.statement, 500)}\n`{clip_escaped(proposal.command, 500)}`"
        blocks += [section(text), hypothesis_button(outcome.experiment_id, proposal.rank, proposal.command)]
    if proposals:
        await _post(
            services,
            client,
            reporter,
            channel,
            thread,
            blocks,
            f"{len(proposals)} hypotheses to test",
            outcome,
        )
    return len(proposals)


async def _post(
    services: SlackServices,
    client: AsyncWebClient,
    reporter: SlackThreadReporter | None,
    channel: str,
    thread: str,
    blocks: list[dict[str, Any]],
    text: str,
    outcome: RunOutcome,
) -> None:
    if reporter is not None:
        await reporter.add_to_part("details", blocks, text)
        return
    for part, part_text in messages(blocks, text):
        await client.chat_postMessage(
            channel=channel,
            thread_ts=thread,
            blocks=part,
            text=part_text,
            metadata=metadata(outcome.experiment_id),
        )


async def proposal(services: SlackServices, experiment_id: int, rank: int) -> tuple[Experiment, Proposal]:
    """The experiment row and its proposal of rank `rank` (LookupError when there is none)."""
    row = await services.store.run(get_experiment, services.store.store, experiment_id)
    chosen = [p for p in await proposals_of(services, experiment_id) if p.rank == rank]
    if row is None or not chosen:
        raise LookupError(f"experiment #{experiment_id} has no proposed hypothesis {rank}")
    return row, chosen[0]


async def record(
    services: SlackServices, row: Experiment, chosen: Proposal, expectations: list[str], *, user: str
) -> int:
    """The proposal as a stored hypothesis (what `hypothesis add` records); its id."""
    added = await services.store.run(
        add_hypothesis,
        services.store.store,
        target=row.target,
        statement=chosen.statement,
        variable=chosen.variable if chosen.variable.startswith("--") else None,
        expectations=expectations,
        because=f"proposed by experiment #{row.id} (rank {chosen.rank}): " + "; ".join(chosen.why),
        created_by=f"slack:{user}",
        investigation_id=row.investigation_id,
    )
    assert added.id is not None
    return int(added.id)
