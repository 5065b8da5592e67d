"""`flagbot checks [list|pause ID|resume ID|run ID|delete ID] [--json]`: the verification checks.

The same words and implementation as `/flagbot checks` (`bot.app.checks_command`). Without a
running bot this process has no scheduler: pause, resume and delete change the store, and the
bot's scheduler follows at its next sync or start; `run` runs the check here and now (under
the target's lease), records it, and prints a change of state instead of posting it.
Exit codes: 0 done (a run that passed or failed was recorded), 1 the check could not act or
look (unknown id, wrong state, target busy or unreachable), 2 usage.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console

from bot.app.checks_command import ChecksAnswer, checks_command
from bot.app.context import AppContext, console_actor
from bot.app.notify import MemoryNotifier, Notifier
from bot.cli.common import CHAT_CONTEXT, fail, run_in_context, settings, split_json
from bot.cli.notify import ConsoleNotifier
from bot.commands import CommandError, help_text, parse_command
from bot.loop.console import render_evidence

__all__ = ["register_checks"]


def register_checks(app: typer.Typer) -> None:
    """Register `checks`, replacing the registry's placeholder of the same name."""
    app.command("checks", context_settings=CHAT_CONTEXT)(checks)


def checks(ctx: typer.Context) -> None:
    """Verification checks: list (last result, next run), pause, resume, run now, delete."""
    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("checks"))
        return
    try:
        invocation = parse_command(["checks", *words])
    except CommandError as exc:
        raise fail(exc.render()) from None
    config = settings()
    notifier: Notifier = MemoryNotifier() if json_output else ConsoleNotifier()

    async def work(app_ctx: AppContext) -> ChecksAnswer:
        return await checks_command(app_ctx, invocation, actor=console_actor(), notifier=notifier)

    try:
        answer = run_in_context(config, work)
    except (LookupError, ValueError) as exc:
        raise fail(f"error: checks {invocation.sub or 'list'}: {exc}", 1) from None
    if json_output:
        typer.echo(json.dumps(answer.to_json(), indent=2, default=str))
    else:
        render_evidence(Console(highlight=False), answer.blocks())
    raise typer.Exit(0 if answer.ok else 1)
