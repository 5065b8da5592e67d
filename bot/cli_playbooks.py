"""`flagbot playbooks` and `flagbot run PLAYBOOK key=value ...`: any playbook from the terminal.

`run` reads its words with the shared grammar (the `run` command takes free `key=value`
options, which the playbook itself validates), runs the playbook with the engine and a
console reporter, and exits 0 when the experiment succeeded, 1 when it did not or the
target's lease is held by someone else (the message says by whom), 2 for a usage problem.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import os
import socket
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from bot.cli_target import CliError, split_json
from bot.commands import CommandError, help_text, parse_command
from bot.config import Settings
from bot.loop.playbook import ParamError, Playbook, PlaybookError, load_playbooks, parse_params, playbook_dirs

if TYPE_CHECKING:
    from bot.loop.report import RunOutcome

_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def lease_ttl_s() -> float:
    """The lease's time-to-live: 60 s, or `FLAGBOT_LEASE_TTL_S` (tests shorten it to see a dead
    holder's lease expire quickly; the heartbeat renews it every third of that)."""
    raw = os.environ.get("FLAGBOT_LEASE_TTL_S", "")
    try:
        return max(1.0, float(raw)) if raw else 60.0
    except ValueError:
        return 60.0


def register_playbooks(app: typer.Typer) -> None:
    """Register `playbooks` and `run`, replacing the registry's placeholders of the same names."""
    app.command("playbooks", context_settings=_CONTEXT)(playbooks)
    app.command("run", context_settings=_CONTEXT)(run)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def load_all(config: Settings) -> dict[str, Playbook]:
    try:
        return load_playbooks(playbook_dirs(config.playbook_dirs))
    except PlaybookError as exc:
        raise _fail(f"error: {exc}") from None


def _describe_params(book: Playbook) -> str:
    return ", ".join(f"{p.name}{'*' if p.required else ''} ({p.kind})" for p in book.params) or "-"


def playbooks(ctx: typer.Context) -> None:
    """List playbooks and their parameters."""
    from bot import cli

    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("playbooks"))
        return
    if words:
        raise _fail(f"error: playbooks takes no arguments, got {words[0]!r}")
    books = load_all(cli.settings())
    if json_output:
        typer.echo(json.dumps([_book_json(book) for book in books.values()], indent=2))
        return
    table = Table(title="playbooks (* required)", title_justify="left")
    for column in ("name", "description", "params", "source"):
        table.add_column(column, overflow="fold")
    for book in books.values():
        source = str(book.source) + "".join(f"\n(hides {path})" for path in book.shadows)
        table.add_row(book.name, book.description, _describe_params(book), source)
    Console(highlight=False).print(table)


def _book_json(book: Playbook) -> dict[str, Any]:
    return {
        "name": book.name,
        "description": book.description,
        "mutating": book.mutating,
        "params": [
            {
                "name": p.name,
                "kind": p.kind,
                "required": p.required,
                "default": p.default,
                "help": p.help,
                "choices": list(p.choices),
            }
            for p in book.params
        ],
        "steps": [step.name for step in book.steps],
        "source": str(book.source),
        "shadows": [str(path) for path in book.shadows],
    }


def run(ctx: typer.Context) -> None:
    """Run any playbook, built-in or your own, with key=value parameters."""
    from bot import cli

    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("run"))
        return
    config = cli.settings()
    catalog = cli.catalog_for(config, words)
    try:
        invocation = parse_command(["run", *words], catalog=catalog)
    except CommandError as exc:
        raise _fail(f"error: {exc.message}") from None
    books = load_all(config)
    name = str(invocation.positionals["playbook"])
    book = books.get(name)
    if book is None:
        raise _fail(f"error: no playbook {name!r}; playbooks: {', '.join(books) or 'none'}")
    raw = dict(invocation.options)
    target = (raw.pop("target", None) if book.param("target") is None else None) or config.default_target
    if target is None:
        raise _fail("error: no target: give target=NAME or set default_target in flagbot.toml")
    if target not in config.targets:
        raise _fail(
            f"error: unknown target {target!r}; targets: {', '.join(sorted(config.targets)) or 'none'}"
        )
    try:
        params = parse_params(book, raw, catalog=catalog)
    except ParamError as exc:
        raise _fail(f"error: {exc}") from None
    code, document = execute_playbook(config, books, book, params, target, json_output=json_output)
    if json_output:
        typer.echo(json.dumps(document, indent=2, default=str))
    raise typer.Exit(code)


def execute_playbook(
    config: Settings,
    books: dict[str, Playbook],
    book: Playbook,
    params: dict[str, Any],
    target: str,
    *,
    json_output: bool,
) -> tuple[int, dict[str, Any]]:
    """Run it; exit code 0 when the experiment succeeded, and the outcome as a JSON document."""
    from bot.cli_target import open_store
    from bot.store.leases import LeaseHeld

    try:
        store = open_store(config)
    except CliError as exc:
        raise _fail(f"error: {exc}", exc.code) from None
    try:
        reconciled, outcome = asyncio.run(_run(config, store, books, book, params, target, quiet=json_output))
    except LeaseHeld as exc:
        raise _fail(f"error: {exc}", 1) from None
    except OSError as exc:
        raise _fail(f"error: run {book.name}: {exc}", 1) from None
    document = {"reconciled": [item.to_json() for item in reconciled], **outcome.to_json()}
    return (0 if outcome.status == "succeeded" else 1), document


async def _run(
    config: Settings,
    store: Any,
    books: dict[str, Playbook],
    book: Playbook,
    params: dict[str, Any],
    target: str,
    *,
    quiet: bool,
) -> tuple[list[RunOutcome], RunOutcome]:
    """Settle what a dead run left on the target first (mutating playbooks), then run this one."""
    from bot.loop.engine import Engine
    from bot.loop.report import ConsoleReporter, MemoryReporter
    from bot.store import AsyncStore

    astore = AsyncStore(store)
    reporter = MemoryReporter() if quiet else ConsoleReporter()
    engine = Engine(config, astore, reporter, playbooks=books, lease_ttl_s=lease_ttl_s())
    actor = f"cli:{getpass.getuser()}@{socket.gethostname()}"
    try:
        reconciled = await engine.reconcile(target) if book.mutating else []
        outcome = await engine.run(book, params, target=target, actor=actor)
        return reconciled, outcome
    finally:
        await astore.aclose()
