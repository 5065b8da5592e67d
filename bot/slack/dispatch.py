"""From a command text to a run: parse, authorise, then run a playbook in a thread or answer.

The same steps for a slash command, an `@flagbot` mention in a thread and (for the command a
button stands for) a click: the shared grammar reads the words with the target's own flag
list, RBAC decides by the registry's risk tier, and the engine runs the same built-in playbook
`flagbot try` runs on the console. Read-only commands answer in the channel (or the thread).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Sequence

from slack_sdk.web.async_client import AsyncWebClient

from bot.app import status as app_status
from bot.app import target_commands
from bot.app.ask import keep_command
from bot.app.change_rights import check_call
from bot.app.checks_command import checks_command
from bot.app.flag_list import FlagList, cached_flag_list, packaged_flag_list
from bot.app.fleet import fleet_status, wants_fleet
from bot.app.freeze import check_invocation_not_frozen
from bot.app.freeze import freeze as freeze_target
from bot.app.freeze import unfreeze as unfreeze_target
from bot.app.freeze_state import FrozenError
from bot.app.notify import MemoryNotifier
from bot.app.playbooks import load_set, resolve_playbook, runs_playbook
from bot.app.predict import predict_change
from bot.app.records import read_records
from bot.app.runs import (
    RestartLimitRefusedError,
    check_call_in_store,
    run_playbook,
)
from bot.app.settle import settled_text
from bot.app.targets import target_of
from bot.app.validate import check_invocation
from bot.app.waiters import waiting_text
from bot.bench.chart import preload as preload_chart
from bot.commands import CommandError, Invocation, command_words, help_text, parse_command
from bot.commands.target_catalog import UnknownTargetError
from bot.config import Settings
from bot.heap import settle
from bot.http import warm as warm_http
from bot.loop.actions import ensure_builtin_actions
from bot.loop.report import RunOutcome
from bot.slack.digest import digest_answer
from bot.slack.proposals import post_proposals
from bot.slack.rbac import roles_on
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter
from bot.slack.run_when_free import RUN_WHEN_FREE_WAIT, run_when_free_blocks
from bot.slack.services import SlackServices
from bot.slack.status_text import status_text
from bot.slack.thread_commands import run_bench, run_target_change
from bot.slack.threads import Where, open_thread
from bot.store.leases import LeaseHeld, WaitCancelled
from bot.target.evidence import Evidence, JournalExcerpt, TableBlock, TextBlock, evidence_from_json

log = logging.getLogger(__name__)
THREAD_COMMANDS = frozenset({"rollback", "reconcile", "bench"})
"""Mutating commands that are no playbook: each opens a thread with a status card all the same."""


def words_of(text: str) -> list[str]:
    """The command's words (CommandError for a text the tokenizer refuses); empty is `help`."""
    return command_words(text) if text.strip() else ["help"]


def parse(settings: Settings, text: str, flags: FlagList | None = None) -> Invocation:
    """The invocation, or CommandError with the exact problem and a correct example.

    Flags are judged by `flags` (`bot.app.flag_list`); without it, by the best list known without
    SSH: the target host's cached list, else the packaged one."""
    words = words_of(text)
    try:
        found = flags or cached_flag_list(settings, words) or packaged_flag_list(settings, words)
    except UnknownTargetError as exc:
        raise CommandError(str(exc)) from None
    return parse_command(words, catalog=found.catalog)


def flag_note(flags: FlagList, invocation: Invocation) -> list[str]:
    """What to tell about the list the flags were judged by (nothing for a command without flags),
    and the grammar's notes (a removed flag the list lacks)."""
    shown = [f"flags checked against the {flags.note}"] if flags.needed else []
    return [*shown, *invocation.notes]


def threaded(invocation: Invocation) -> bool:
    """Does the command open an investigation thread (a status card, the work after the ack)?"""
    return runs_playbook(invocation) or invocation.name in THREAD_COMMANDS


_preloaded = False
"""Whether `preload` has run in this process."""


def preload() -> None:
    """Import now what the commands import when first used (SSH, the statistics behind `log`, the
    playbooks' actions, matplotlib for a verdict's chart: seconds of CPU). An import runs on the
    event loop, or holds the GIL in the thread that draws the chart: done in the middle of a burst
    of commands, it would hold every acknowledgement behind it. Also what the first HTTP client of a
    run imports (`bot.http.warm`). Then the start-up heap is collected and frozen
    (`bot.heap.settle`): those objects live as long as the bot, and a full collection scanning
    them (50-100 ms on the 2-core machine) would hold every ack in flight. Once per process."""
    global _preloaded
    if _preloaded:
        return
    for module in (
        "bot.app.target_commands",
        "bot.app.bench",
        "bot.loop.records_view",
        "bot.slack.thread_commands",
        "bot.target.session",
        "bot.bench.run",
    ):
        importlib.import_module(module)
    ensure_builtin_actions()
    warm_http()
    preload_chart()
    settle()
    _preloaded = True


def check(settings: Settings, invocation: Invocation) -> None:
    """What the user can fix, found before the ack and answered ephemerally (CommandError): the
    target of every command, `grep`'s scope, the playbook and its parameters, `bench`'s plan
    (`bot.app.validate`)."""
    check_invocation(settings, invocation)


async def is_admin(services: SlackServices, client: AsyncWebClient, user: str, target: str) -> bool:
    """Whether the user has the admin role on `target` (`slack.rbac.admins`, or the target's own
    `targets.NAME.rbac.admins`; by id or user group): the target's change rules
    (`bot.app.change_rights`) let admins change protected flags and the variables
    `policy.env_admin_allow` names."""
    roles, _ = await roles_on(client, services.settings, user, target)
    return "admin" in roles


async def check_stored(services: SlackServices, invocation: Invocation) -> None:
    """What the store says the user must fix, answered before the ack like `check` (CommandError):
    a revert of an experiment that ran on another target; a restart over the target's
    `policy.max_restarts_per_hour` (checked again when the run starts, after any approval); a
    change of a frozen target (`bot.app.freeze`, checked again when it runs). A playbook run's
    freeze and restart facts come from one store trip (`check_call_in_store`)."""
    if not runs_playbook(invocation):
        try:
            await check_invocation_not_frozen(services.context, invocation)
        except FrozenError as exc:
            raise CommandError(exc.message) from None
        return
    call = resolve_playbook(services.settings, invocation)
    try:
        await check_call_in_store(services.context, call)
    except (FrozenError, RestartLimitRefusedError) as exc:
        raise CommandError(exc.message) from None


async def start_thread(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
    restart_approved: bool = False,
    notes: Sequence[str] = (),
) -> object:
    """Run a threaded command: a playbook, or rollback / reconcile / bench (`bot.slack.thread_commands`).

    `restart_approved`: an approver approved this request (a production restart), so `heal` may
    restart the target when it is diverged; a command that needed no approval may not. `notes`
    (which flag list judged the flags) are the thread's first replies."""
    if runs_playbook(invocation):
        return await run_in_thread(
            services,
            client,
            invocation,
            text=text,
            user=user,
            where=where,
            hypothesis_id=hypothesis_id,
            restart_approved=restart_approved,
            notes=notes,
        )
    if invocation.name == "bench":
        return await run_bench(services, client, invocation, text=text, user=user, where=where)
    return await run_target_change(services, client, invocation, text=text, user=user, where=where)


async def run_in_thread(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
    restart_approved: bool = False,
    notes: Sequence[str] = (),
) -> RunOutcome | None:
    """Post the status card (a new thread, or a reply in the given one) and run the playbook;
    after a regression, the ranked hypotheses follow with their buttons."""
    call = resolve_playbook(services.settings, invocation)
    admin = await is_admin(services, client, user, call.target)
    check_call(services.settings, call, admin=admin)  # a refusal: ephemeral, no thread
    # a button or an approved request on a frozen target, over its restart limit, or reverting
    # another target's experiment, too: asked here, before the thread opens, not again by run_playbook
    await check_call_in_store(services.context, call)
    card = CardState(
        experiment_id=None,
        playbook=call.book.name,
        target=call.target,
        actor=f"<@{user}>",
        command=f"/flagbot {text}".strip(),
        steps=[(step.name, "pending") for step in call.book.steps],
        status="pending",
    )
    reporter = await open_thread(client, where, card, hypothesis_id=hypothesis_id, store=services.store)
    for note in notes:
        await reporter.note(note)

    async def say_settled(outcome: RunOutcome) -> None:  # what a flagbot that stopped left
        await reporter.note(settled_text(outcome))

    told: list[asyncio.Task[None]] = []

    def say_waiting(busy: LeaseHeld, remaining_s: float) -> None:  # `wait=`: whom it waits for
        told.append(asyncio.create_task(reporter.note(waiting_text(busy, remaining_s))))

    try:
        done = await run_playbook(
            services.context,
            call,
            reporter,
            actor=f"slack:{user}",
            admin=admin,
            restart_approved=restart_approved,
            hypothesis_id=hypothesis_id,
            gates_checked=True,
            on_settled=say_settled,
            on_wait=say_waiting,
        )
    except WaitCancelled as exc:  # `cancel waiter=ID` while it waited: nothing ran
        await asyncio.gather(*told)
        await reporter.refuse(str(exc))
        return None
    except LeaseHeld as exc:
        await asyncio.gather(*told)
        await reporter.refuse(
            f"gave up waiting {call.wait_s:.0f} s (wait=): {exc}"
            if call.wait_s > 0
            else f"{exc}; add wait=DURATION (e.g. wait=30m) to run when it is free"
        )
        if call.wait_s <= 0:  # one click re-sends the same words with wait= (bot.slack.run_when_free)
            await offer_run_when_free(reporter, text, user, call.target)
        return None
    await asyncio.gather(*told)
    await post_proposals(
        services, client, done.outcome, channel=where.channel, thread=reporter.thread, reporter=reporter
    )
    return done.outcome


async def offer_run_when_free(reporter: SlackThreadReporter, words: str, user: str, target: str) -> None:
    """Under a refusal for a busy target: a "Run when free" button for the requester."""
    reason = (
        f"<@{user}>: {target} is busy. *Run when free* sends the same command with wait={RUN_WHEN_FREE_WAIT}."
    )
    blocks = run_when_free_blocks(words, user, reason)
    if blocks is not None:
        await reporter.client.chat_postMessage(
            channel=reporter.channel,
            thread_ts=reporter.thread,
            blocks=blocks,
            text=f"{target} is busy: run when free?",
        )


async def answer(
    services: SlackServices, client: AsyncWebClient, invocation: Invocation, *, user: str, where: Where
) -> list[Evidence]:
    """A read-only command's answer as evidence blocks (posted by the caller)."""
    settings = services.settings
    if invocation.name == "help":
        topic = invocation.positionals.get("command")
        return [TextBlock(help_text(str(topic) if topic else None))]
    if invocation.name == "digest":  # posts itself (blocks and the chart); any target, or one
        posted = await digest_answer(
            services, client, invocation, user=user, channel=where.channel, thread_ts=where.thread_ts
        )
        return posted or []
    ctx = services.context
    if invocation.name == "checks":  # list, pause, resume, run, delete; checks name their targets
        return await checks_answer(services, invocation, user)
    if invocation.name == "status" and wants_fleet(settings, invocation):  # the targets the user may view
        viewed = [t for t in settings.targets if "viewer" in (await roles_on(client, settings, user, t))[0]]
        return (await fleet_status(ctx, targets=viewed)).blocks()
    target = target_of(settings, invocation)
    if invocation.name in ("hypothesis", "knowledge", "log", "baseline"):
        records = await read_records(ctx, invocation, target, actor=f"slack:{user}")
        return [
            *(TextBlock(line) for line in records.lines),
            *(TableBlock(table.title, table.columns, table.rows) for table in records.tables),
        ]
    if invocation.name == "status":
        status = await app_status.status(ctx, target)
        return [TextBlock(status_text(target, status.to_json()), f"Status of {target}")]
    if invocation.name == "keep":
        kept = await keep_command(
            ctx, int(str(invocation.positionals["experiment"])), target, actor=f"slack:{user}"
        )
        return [TextBlock(kept.text())]
    if invocation.name in ("freeze", "unfreeze"):
        done = (
            await freeze_target(
                ctx,
                target,
                reason=invocation.options.get("reason"),
                until=invocation.options.get("until"),
                actor=f"slack:{user}",
            )
            if invocation.name == "freeze"
            else await unfreeze_target(ctx, target, actor=f"slack:{user}")
        )
        return [TextBlock("\n".join(done.lines), "Change freeze")]
    if invocation.name == "predict":  # read-only: the store's last start, no target contact
        predicted = await predict_change(ctx, invocation, target)
        return [
            TextBlock("\n".join(predicted.lines()), "Prediction (no restart)"),
            *(
                TableBlock(
                    table["title"], tuple(table["columns"]), tuple(tuple(row) for row in table["rows"])
                )
                for table in predicted.tables()
            ),
        ]
    if invocation.name == "observe":
        observed = await target_commands.observation(ctx, target)
        return [evidence_from_json(item) for item in observed.to_json().get("evidence", [])]
    if invocation.name in ("grep", "logs"):
        found = (
            await target_commands.grep_target(ctx, target, target_commands.GrepRequest.of(invocation))
            if invocation.name == "grep"
            else await target_commands.logs_target(ctx, target, target_commands.LogsRequest.of(invocation))
        )
        return [
            TextBlock(f"{item.node}: {item.error}")
            if item.result is None
            else JournalExcerpt(
                item.result.describe(), item.node, item.result.command, tuple(item.result.lines)
            )
            for item in found.results
        ]
    if invocation.name == "playbooks":
        loaded = load_set(settings, announce=False)  # the listing shows a broken file's error itself
        rows = tuple(
            (b.name, b.description[:200], ", ".join(p.name for p in b.params)) for b in loaded.books.values()
        ) + tuple((b.name or "?", "BROKEN, not loaded (below)", "-") for b in loaded.broken)
        broken = [
            TextBlock(f"`{b.name or b.path}` is broken, not loaded: {b.error[:1500]}", "Broken playbook")
            for b in loaded.broken
        ]
        return [TableBlock("Playbooks", ("name", "what", "parameters"), rows), *broken]
    return [TextBlock(f"`{invocation.name}` is not available in Slack yet; run it with the flagbot CLI.")]


async def checks_answer(services: SlackServices, invocation: Invocation, user: str) -> list[Evidence]:
    """`/flagbot checks ...`: the answer as evidence blocks (the dispatcher posts them).

    Checks carry their own targets: the list shows every target's, with the counts by target.
    `run` runs the check in this process now; a change of state is also posted to its thread
    by the bot's notifier.
    """
    try:
        answer = await checks_command(
            services.context, invocation, actor=f"slack:{user}", notifier=MemoryNotifier()
        )
    except (LookupError, ValueError) as exc:
        return [TextBlock(f"checks {invocation.sub}: {exc}")]
    return answer.blocks()


__all__ = [
    "Where",
    "answer",
    "check",
    "check_stored",
    "checks_answer",
    "flag_note",
    "open_thread",
    "parse",
    "preload",
    "run_in_thread",
    "runs_playbook",
    "start_thread",
    "target_of",
    "threaded",
    "words_of",
]
