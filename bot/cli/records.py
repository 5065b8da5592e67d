"""`flagbot hypothesis|knowledge|log`: the loop's records, read from the store (`bot.app.records`),
and the plumbing every chat-style loop command shares (words in, one invocation, a printed answer).

Why apart from `bot.cli.loop`: `log` is what an on-call engineer types first, and the loop's
module brings the engine, the benchmark statistics and SciPy with it. This module imports none of
that, so `flagbot log` reaches the database without paying for the loop (`bot.main` maps these
words here, `RECORD_COMMANDS`); `bot.cli.loop` builds its commands from the same plumbing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import typer
from rich.console import Console

from bot.app.command_loop import command_loop
from bot.app.context import AppContext, console_actor
from bot.app.errors import AppError
from bot.app.records import RecordsAnswer, read_records
from bot.app.targets import target_of
from bot.cli.common import CHAT_CONTEXT, catalog_for, fail, run_in_context, settings, split_json, usage_errors
from bot.cli.families import RECORD_COMMANDS
from bot.commands import CommandError, Invocation, help_text, normalize_words, parse_command
from bot.config import Settings
from bot.loop.console import print_table

WordsRunner = Callable[[Settings, Invocation, str, bool], None]
"""Runs one parsed command: the settings, the invocation, its target, whether `--json` was given."""

Reader = Callable[[AppContext, Invocation, str], Awaitable[dict[str, Any]]]
"""A read-only command's use case: the answer as JSON-ready data (`lines`, `tables`, `ok`, ...)."""


def register_records(app: typer.Typer) -> None:
    """Register `hypothesis`, `knowledge` and `log`, replacing the registry's placeholders."""
    for name in RECORD_COMMANDS:
        app.command(name, context_settings=CHAT_CONTEXT)(chat_command(name, _run_records))


def chat_command(name: str, runner: WordsRunner) -> Callable[[typer.Context], None]:
    """The typer command for `name`: its words read as in Slack (`--dry-run` is `dry-run=yes`,
    `--json` taken off), parsed against the target's flag list, then handed to `runner`."""

    def run(ctx: typer.Context) -> None:
        words, json_output = split_json(list(ctx.args))
        if words in (["--help"], ["-h"]):
            typer.echo(help_text(name))
            return
        words = normalize_words([name, *words])[1:]
        with command_loop():  # the flag-list read and the run share one loop and one SSH login
            config = settings()
            invocation, target = parse_words(config, name, words)
            runner(config, invocation, target, json_output)

    run.__doc__ = help_text(name).splitlines()[0]
    return run


def parse_words(config: Settings, name: str, words: list[str]) -> tuple[Invocation, str]:
    """The invocation the words make and the target it names; exit 2 on a usage error."""
    try:
        invocation = parse_command([name, *words], catalog=catalog_for(config, words, name))
    except CommandError as exc:
        raise fail(exc.render()) from None
    for note in invocation.notes:  # e.g. a removed flag the list lacks
        typer.echo(f"note: {note}", err=True)
    with usage_errors():
        target = target_of(config, invocation)
    return invocation, target


def run_read(
    config: Settings, invocation: Invocation, target: str, read: Reader, *, json_output: bool
) -> None:
    """Run a read-only use case in the command's context, print its answer, exit 0 (1 when the
    answer says `ok: false`; `error:` and 1 for a lookup that found nothing)."""
    try:
        data = run_in_context(config, lambda ctx: read(ctx, invocation, target))
    except AppError as exc:  # a freeze without a reason, a bad until=
        raise fail(f"error: {exc.message}", exc.exit_code) from None
    except (LookupError, ValueError) as exc:
        raise fail(f"error: {invocation.name}: {exc}", 1) from None
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        print_answer(data, Console(highlight=False))
    raise typer.Exit(0 if data.get("ok", True) else 1)


def print_answer(data: dict[str, Any], console: Console) -> None:
    """An answer on the terminal: a Markdown document as it is, else its tables and lines."""
    if "markdown" in data:  # `log ID --markdown`: the document as it is, to paste or redirect
        typer.echo(data["markdown"], nl=False)
        return
    for table in data.get("tables", []):
        rows = [[str(cell) for cell in row] for row in table["rows"]]
        print_table(console, table["title"], table["columns"], rows)
    for line in data.get("lines", []):
        console.print(line, markup=False, soft_wrap=True)


async def read_records_json(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    """`hypothesis`, `knowledge`, `log` and `baseline show|diff` as JSON-ready data."""
    answer: RecordsAnswer = await read_records(ctx, invocation, target, actor=console_actor())
    return answer.to_json()


def _run_records(config: Settings, invocation: Invocation, target: str, json_output: bool) -> None:
    run_read(config, invocation, target, read_records_json, json_output=json_output)
