"""`flagbot playbooks` and `flagbot run PLAYBOOK key=value ...`: any playbook from the terminal.

`run` reads its words with the shared grammar (the `run` command takes free `key=value`
options, which the playbook itself validates: `bot.app.playbooks`), runs the playbook with the
engine and a console reporter (`bot.app.runs`), and exits 0 when the experiment succeeded, 1 when
it did not or the target's lease is held by someone else (the message says by whom), 2 for a
usage problem.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer
from rich.console import Console

from bot.app.change_rights import CONSOLE_IS_ADMIN, check_call
from bot.app.command_loop import command_loop
from bot.app.context import AppContext, console_actor
from bot.app.errors import AppError
from bot.app.playbooks import PlaybookCall, describe, describe_broken, load_set, resolve_playbook
from bot.app.runs import run_playbook
from bot.app.waiters import waiting_text
from bot.cli.common import CHAT_CONTEXT, catalog_for, fail, run_in_context, settings, split_json, usage_errors
from bot.commands import CommandError, Invocation, help_text, parse_command
from bot.config import Settings
from bot.loop.console import print_table
from bot.loop.playbook import Playbook, PlaybookSet
from bot.loop.report import ConsoleReporter, MemoryReporter, Reporter
from bot.store.leases import LeaseHeld, WaitCancelled


def register_playbooks(app: typer.Typer) -> None:
    """Register `playbooks` and `run`, replacing the registry's placeholders of the same names."""
    app.command("playbooks", context_settings=CHAT_CONTEXT)(playbooks)
    app.command("run", context_settings=CHAT_CONTEXT)(run)


def _describe_params(book: Playbook) -> str:
    return ", ".join(f"{p.name}{'*' if p.required else ''} ({p.kind})" for p in book.params) or "-"


def playbooks(ctx: typer.Context) -> None:
    """List playbooks and their parameters."""
    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("playbooks"))
        return
    if words:
        raise fail(f"error: playbooks takes no arguments, got {words[0]!r}")
    loaded = load_set(settings(), announce=False)  # the listing shows a broken file's error itself
    if json_output:
        document = [describe(book) for book in loaded.books.values()]
        listed = [*document, *map(describe_broken, loaded.broken)]
        typer.echo(json.dumps({"ok": True, "playbooks": listed}, indent=2))
        return
    print_playbooks(Console(highlight=False), loaded)


def print_playbooks(console: Console, loaded: PlaybookSet) -> None:
    """The playbooks table: every loaded playbook, then every broken file with its error."""
    rows = [
        (
            book.name,
            book.description,
            _describe_params(book),
            str(book.source) + "".join(f" (hides {path})" for path in book.shadows),
        )
        for book in loaded.books.values()
    ]
    rows += [
        (broken.name or "?", f"BROKEN, not loaded: {broken.error}", "-", str(broken.path))
        for broken in loaded.broken
    ]
    columns = ("name", "description", "params", "source")
    print_table(console, "playbooks (* required)", columns, rows)


def run(ctx: typer.Context) -> None:
    """Run any playbook, built-in or your own, with key=value parameters."""
    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("run"))
        return
    with command_loop():  # the flag-list read and the run share one loop and one SSH login
        config = settings()
        catalog = catalog_for(config, words, "run")
        try:
            invocation = parse_command(["run", *words], catalog=catalog)
        except CommandError as exc:
            raise fail(f"error: {exc.message}") from None
        run_playbook_command(config, invocation, json_output=json_output)


def run_playbook_command(config: Settings, invocation: Invocation, *, json_output: bool) -> NoReturn:
    """Resolve the playbook the command runs, run it and print it: exit 0 when the experiment
    succeeded, 1 when it did not or the lease is held, 2 for a usage problem."""
    with usage_errors():
        call = resolve_playbook(config, invocation)
        check_call(config, call, admin=CONSOLE_IS_ADMIN)  # before the store is even opened
    code, document = execute_playbook(config, call, json_output=json_output)
    if json_output:
        typer.echo(json.dumps(document, indent=2, default=str))
    raise typer.Exit(code)


def execute_playbook(
    config: Settings, call: PlaybookCall, *, json_output: bool
) -> tuple[int, dict[str, Any]]:
    """Run it; exit code 0 when the experiment succeeded, and the outcome as a JSON document."""
    reporter: Reporter = MemoryReporter() if json_output else ConsoleReporter()

    async def work(ctx: AppContext) -> dict[str, Any]:
        # the CLI has no approvals: its user holds the bot host (docs/security.md)
        done = await run_playbook(
            ctx,
            call,
            reporter,
            actor=console_actor(),
            admin=CONSOLE_IS_ADMIN,
            restart_approved=True,
            on_wait=lambda busy, remaining_s: typer.echo(waiting_text(busy, remaining_s), err=True),
        )
        return done.to_json()

    try:
        document = run_in_context(config, work)
    except WaitCancelled as exc:  # `cancel waiter=ID` while it waited: nothing ran
        raise fail(f"error: {exc}", 1) from None
    except LeaseHeld as exc:
        if call.wait_s > 0:  # `wait=`: the deadline passed with the target still busy
            raise fail(
                f"error: gave up waiting {call.wait_s:.0f} s (wait=) for the target: {exc}", 1
            ) from None
        raise fail(f"error: {exc}; wait=DURATION waits for it", 1) from None
    except CommandError as exc:  # a revert of another target's experiment: nothing ran
        raise fail(f"error: {exc.message}") from None
    except AppError as exc:  # e.g. policy.max_restarts_per_hour: nothing ran
        raise fail(f"error: {exc.message}", exc.exit_code) from None
    except OSError as exc:
        raise fail(f"error: run {call.book.name}: {exc}", 1) from None
    return (0 if document["status"] == "succeeded" else 1), document
