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
from bot.loop.playbook import Playbook, load_playbooks, playbook_dirs
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter, metadata
from bot.slack.services import SlackServices
from bot.target.evidence import Evidence, TableBlock, TextBlock

log = logging.getLogger(__name__)
PLAYBOOK_COMMANDS = frozenset({"try", "revert", "verify", "isolate", "run"})
THREAD_COMMANDS = frozenset({"rollback", "reconcile", "bench"})
"""Mutating commands that are no playbook: each opens a thread with a status card all the same."""


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


_PLAYBOOKS: dict[tuple[tuple[str, int, int], ...], dict[str, Playbook]] = {}


def playbooks(settings: Settings) -> dict[str, Playbook]:
    """Every playbook (built-in and the user's), parsed again only when a file changed: parsing
    the YAML costs ~30 ms of the event loop, paid by every other command's acknowledgement."""
    dirs = playbook_dirs(settings.playbook_dirs)
    files = [
        (str(path), stat.st_mtime_ns, stat.st_size)
        for directory in dirs
        if directory.is_dir()
        for path in sorted(directory.iterdir())
        if path.suffix in (".yaml", ".yml") and (stat := path.stat())
    ]
    key = (*((str(directory), 0, 0) for directory in dirs), *files)
    found = _PLAYBOOKS.get(key)
    if found is None:
        found = load_playbooks(dirs)  # PlaybookError for a broken file: nothing is cached
        _PLAYBOOKS.clear()
        _PLAYBOOKS[key] = found
    return found


def threaded(invocation: Invocation) -> bool:
    """Does the command open an investigation thread (a status card, the work after the ack)?"""
    return runs_playbook(invocation) or invocation.name in THREAD_COMMANDS


def playbook_for(
    settings: Settings, invocation: Invocation
) -> tuple[Playbook, dict[str, Any], str, dict[str, Playbook]]:
    """The playbook a command runs, its parameters, the target and every playbook (the engine
    wants them all). `run NAME key=value ...` reads its options as the CLI's `flagbot run` does.
    CommandError (shown ephemerally) when the playbook or a parameter is wrong."""
    from bot.cli_loop import playbook_params
    from bot.loop.playbook import ParamError, PlaybookError, parse_params

    try:
        books = playbooks(settings)
    except PlaybookError as exc:
        raise CommandError(str(exc)) from None
    if invocation.name != "run":
        name, params = playbook_params(invocation)
        return books[name], params, target_of(settings, invocation), books
    name = str(invocation.positionals["playbook"])
    book = books.get(name)
    if book is None:
        raise CommandError(
            f"no playbook {name!r}; playbooks: {', '.join(books) or 'none'}",
            usage="run PLAYBOOK [key=value ...]",
        )
    raw = dict(invocation.options)
    named = raw.pop("target", None) if book.param("target") is None else None
    target = target_of(settings, invocation if named is None else _with_target(invocation, named))
    try:
        params = parse_params(book, raw, catalog=catalog_for(settings, [f"target={target}"]).catalog)
    except ParamError as exc:
        raise CommandError(
            str(exc), usage=f"run {name} " + " ".join(f"{p.name}=..." for p in book.params)
        ) from None
    return book, params, target, books


def _with_target(invocation: Invocation, name: str) -> Invocation:
    from dataclasses import replace

    return replace(invocation, options={**invocation.options, "target": name})


def preload() -> None:
    """Import now what the commands import when first used (SSH, the statistics behind `log`, the
    playbooks' actions: seconds of CPU). An import runs on the event loop and holds it: done in
    the middle of a burst of commands, it would hold every acknowledgement behind it."""
    import importlib

    from bot.loop.actions import ensure_builtin_actions

    for module in (
        "bot.cli_loop",
        "bot.cli_target",
        "bot.loop.records_view",
        "bot.slack.proposals",
        "bot.slack.thread_commands",
        "bot.target.session",
        "bot.bench.run",
        "bot.bench.chart",
    ):
        importlib.import_module(module)
    ensure_builtin_actions()


def check(settings: Settings, invocation: Invocation) -> None:
    """What the user can fix, found before the ack and answered ephemerally (CommandError): the
    target of a threaded command, `run`'s playbook and parameters, `bench`'s profile."""
    if not threaded(invocation):
        return
    target_of(settings, invocation)
    if invocation.name == "run":
        playbook_for(settings, invocation)
    elif invocation.name == "bench":
        from bot.slack.thread_commands import bench_plan

        bench_plan(settings, invocation)


async def open_thread(
    client: Any, where: Where, card: CardState, *, hypothesis_id: int | None = None
) -> SlackThreadReporter:
    """Post the status card (a new thread, or a reply in the given one); its reporter."""
    from bot.slack.render import status_card

    blocks, fallback = status_card(card)
    root = await client.chat_postMessage(
        channel=where.channel,
        thread_ts=where.thread_ts,
        blocks=blocks,
        text=fallback,
        metadata=metadata(None, hypothesis_id),
    )
    thread_ts = where.thread_ts or str(root["ts"])
    return SlackThreadReporter(
        client, where.channel, str(root["ts"]), card, thread_ts=thread_ts, hypothesis_id=hypothesis_id
    )


async def start_thread(
    services: SlackServices,
    client: Any,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
    hypothesis_id: int | None = None,
) -> Any:
    """Run a threaded command: a playbook, or rollback / reconcile / bench (`bot.slack.thread_commands`)."""
    if runs_playbook(invocation):
        return await run_in_thread(
            services, client, invocation, text=text, user=user, where=where, hypothesis_id=hypothesis_id
        )
    from bot.slack.thread_commands import run_bench, run_target_change

    if invocation.name == "bench":
        return await run_bench(services, client, invocation, text=text, user=user, where=where)
    return await run_target_change(services, client, invocation, text=text, user=user, where=where)


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
    """Post the status card (a new thread, or a reply in the given one) and run the playbook;
    after a regression, the ranked hypotheses follow with their buttons."""
    from bot.slack.proposals import post_proposals
    from bot.store.leases import LeaseHeld

    settings = services.settings
    book, params, target, books = playbook_for(settings, invocation)
    card = CardState(
        experiment_id=None,
        playbook=book.name,
        target=target,
        actor=f"<@{user}>",
        command=f"/flagbot {text}".strip(),
        steps=[(step.name, "pending") for step in book.steps],
        status="pending",
    )
    reporter = await open_thread(client, where, card, hypothesis_id=hypothesis_id)
    engine = Engine(settings, services.store, reporter, playbooks=books, lease_ttl_s=services.lease_ttl_s)
    try:
        if book.mutating:
            await settle_unfinished(engine, reporter, target)
        outcome = await engine.run(
            book, params, target=target, actor=f"slack:{user}", hypothesis_id=hypothesis_id
        )
    except LeaseHeld as exc:
        await reporter.refuse(str(exc))
        return None
    await post_proposals(services, client, outcome, channel=where.channel, thread=reporter.thread)
    return outcome


async def settle_unfinished(engine: Engine, reporter: SlackThreadReporter, target: str) -> None:
    """What a flagbot that stopped left on the target is settled first (as every CLI mutating
    command does), and the thread says so."""
    for settled in await engine.reconcile(target):
        await reporter.note(
            f"experiment #{settled.experiment_id} ({settled.playbook}) was left unfinished by a flagbot "
            f"that stopped; it is now {settled.status}: {settled.summary or ''}"
        )


async def answer(
    services: SlackServices, client: Any, invocation: Invocation, *, user: str, where: Where
) -> list[Evidence]:
    """A read-only command's answer as evidence blocks (posted by the caller)."""
    settings = services.settings
    if invocation.name == "help":
        topic = invocation.positionals.get("command")
        return [TextBlock(help_text(str(topic) if topic else None))]
    if invocation.name == "digest":  # posts itself (blocks and the chart); any target, or one
        from bot.digest.slack import digest_answer

        posted = await digest_answer(
            services, client, invocation, user=user, channel=where.channel, thread_ts=where.thread_ts
        )
        return posted or []
    target = target_of(settings, invocation)
    if invocation.name == "checks":  # list, pause, resume, run, delete (bot/schedule)
        from bot.schedule.commands import checks_answer

        return await checks_answer(services, invocation, target, user)
    if invocation.name in ("hypothesis", "log", "baseline"):
        from bot.loop.records_view import read

        data = await services.store.run(read, services.store.store, invocation, target, actor=f"slack:{user}")
        return _records_blocks(data)
    if invocation.name in ("status", "observe", "grep"):
        return await _target_answer(services, invocation, target)
    if invocation.name == "playbooks":
        books = playbooks(settings)
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


__all__ = [
    "Where",
    "answer",
    "check",
    "open_thread",
    "parse",
    "playbook_for",
    "preload",
    "run_in_thread",
    "runs_playbook",
    "start_thread",
    "target_of",
    "threaded",
]
