"""From a command text to a run: parse, authorise, then run a playbook in a thread or answer.

The same steps for a slash command, an `@flagbot` mention in a thread and (for the command a
button stands for) a click: the shared grammar reads the words with the target's own flag
list, RBAC decides by the registry's risk tier, and the engine runs the same built-in playbook
`flagbot try` runs on the console. Read-only commands answer in the channel (or the thread).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.commands import CommandError, Invocation, help_text, parse_command
from bot.commands.target_catalog import UnknownTargetError, catalog_for
from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.playbook import load_playbooks, playbook_dirs
from bot.slack.reporter import SlackThreadReporter, metadata
from bot.slack.services import SlackServices
from bot.target.evidence import Evidence, TableBlock, TextBlock

log = logging.getLogger(__name__)
PLAYBOOK_COMMANDS = frozenset({"try", "revert", "verify", "isolate"})


@dataclass(frozen=True)
class Where:
    """Where an answer goes: the channel, and the thread when the command came from one."""

    channel: str
    thread_ts: str | None = None


def parse(settings: Settings, text: str) -> Invocation:
    """The invocation, or CommandError with the exact problem and a correct example."""
    from bot.commands.tokens import tokenize

    words = tokenize(text) if text.strip() else ["help"]
    try:
        catalog = catalog_for(settings, words).catalog
    except UnknownTargetError as exc:
        raise CommandError(str(exc)) from None
    return parse_command(words, catalog=catalog)


def target_of(settings: Settings, invocation: Invocation) -> str:
    name = invocation.options.get("target") or settings.default_target
    if name is None or name not in settings.targets:
        known = ", ".join(sorted(settings.targets)) or "none"
        raise CommandError(f"unknown or missing target {name!r}; targets: {known}")
    return name


def runs_playbook(invocation: Invocation) -> bool:
    return invocation.name in PLAYBOOK_COMMANDS or (
        invocation.name == "baseline" and invocation.sub in ("pin", "set")
    )


async def run_in_thread(
    services: SlackServices,
    client: Any,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
) -> Any:
    """Post the status card (a new thread, or a reply in the given one) and run the playbook."""
    from bot.cli_loop import playbook_params
    from bot.slack.render import CardState, status_card
    from bot.store.leases import LeaseHeld

    settings = services.settings
    target = target_of(settings, invocation)
    books = load_playbooks(playbook_dirs(settings.playbook_dirs))
    name, params = playbook_params(invocation)
    book = books[name]
    card = CardState(
        experiment_id=None,
        playbook=name,
        target=target,
        actor=f"<@{user}>",
        command=f"/flagbot {text}".strip(),
        steps=[(step.name, "pending") for step in book.steps],
        status="pending",
        verdict=None,
        summary=None,
    )
    blocks, fallback = status_card(card)
    root = await client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        blocks=blocks,
        text=fallback,
        metadata=metadata(None),
    )
    thread_ts = where.thread_ts or str(root["ts"])
    reporter = SlackThreadReporter(client, where.channel, str(root["ts"]), card, thread_ts=thread_ts)
    engine = Engine(settings, services.store, reporter, playbooks=books, lease_ttl_s=services.lease_ttl_s)
    try:
        for settled in await engine.reconcile(target):
            await reporter.note(
                f"experiment #{settled.experiment_id} ({settled.playbook}) was left unfinished by a flagbot "
                f"that stopped; it is now {settled.status}: {settled.summary or ''}"
            )
        return await engine.run(
            book, params, target=target, actor=f"slack:{user}", hypothesis_id=hypothesis_id
        )
    except LeaseHeld as exc:
        card.status = "refused"
        card.summary = str(exc)
        await reporter.refresh()
        return None


async def answer(
    services: SlackServices, client: Any, invocation: Invocation, *, user: str, where: Where
) -> list[Evidence]:
    """A read-only command's answer as evidence blocks (posted by the caller)."""
    from bot.loop.records_view import read

    settings = services.settings
    if invocation.name == "help":
        topic = invocation.positionals.get("command")
        return [TextBlock(help_text(str(topic) if topic else None))]
    target = target_of(settings, invocation)
    if invocation.name in ("hypothesis", "log", "baseline"):
        data = await services.store.run(read, services.store.store, invocation, target, actor=f"slack:{user}")
        return _records_blocks(data)
    if invocation.name in ("status", "observe", "grep"):
        return await _target_answer(services, invocation, target)
    if invocation.name == "playbooks":
        books = load_playbooks(playbook_dirs(settings.playbook_dirs))
        rows = tuple(
            (b.name, b.description[:200], ", ".join(p.name for p in b.params)) for b in books.values()
        )
        return [TableBlock("Playbooks", ("name", "what", "parameters"), rows)]
    return [TextBlock(f"`{invocation.name}` is not available in Slack yet; run it with the flagbot CLI.")]


def _records_blocks(data: dict[str, Any]) -> list[Evidence]:
    blocks: list[Evidence] = []
    for line in data.get("lines", []):
        blocks.append(TextBlock(str(line)))
    for table in data.get("tables", []):
        rows = tuple(tuple(str(cell) for cell in row) for row in table["rows"])
        blocks.append(TableBlock(table["title"], tuple(table["columns"]), rows))
    return blocks


async def _target_answer(services: SlackServices, invocation: Invocation, target: str) -> list[Evidence]:
    from bot.cli_target import grepper, observer, status_of
    from bot.target.evidence import evidence_from_json
    from bot.target.session import TargetSession

    settings = services.settings
    async with TargetSession.open(target, settings.targets[target], store=services.store) as ts:
        if invocation.name == "status":
            data = await status_of(ts)
            text = (
                f"*{target}* `{data['unit']}`: /health {data['health']}; "
                + "; ".join(f"{n['node']} {n.get('active', n.get('error'))}" for n in data["nodes"])
                + ("\n:warning: diverged: " + str(data["diverged"]) if data["diverged"] else "")
            )
            return [TextBlock(text, f"Status of {target}")]
        if invocation.name == "observe":
            data = await observer(settings)(ts)
            return [evidence_from_json(item) for item in data.get("evidence", [])]
        data = await grepper(invocation)(ts)
    blocks: list[Evidence] = []
    for item in data["results"]:
        if "error" in item:
            blocks.append(TextBlock(f"{item['node']}: {item['error']}"))
        else:
            from bot.target.evidence import JournalExcerpt

            blocks.append(JournalExcerpt(item["title"], item["node"], item["command"], tuple(item["lines"])))
    return blocks


__all__ = ["Where", "answer", "parse", "run_in_thread", "runs_playbook", "target_of"]
