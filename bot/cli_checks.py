"""`flagbot checks [list|pause ID|resume ID|run ID|delete ID] [--json]`: the verification checks.

The same words and implementation as `/flagbot checks` (`bot.schedule.commands`). Without a
running bot this process has no scheduler: pause, resume and delete change the store, and the
bot's scheduler follows at its next sync or start; `run` runs the check here and now (under
the target's lease), records it, and prints a change of state instead of posting it.
Exit codes: 0 done (a run that passed or failed was recorded), 1 the check could not act or
look (unknown id, wrong state, target busy or unreachable), 2 usage.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import typer

from bot.cli_target import CliError, split_json
from bot.commands import CommandError, help_text, parse_command

__all__ = ["register_checks"]

_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def register_checks(app: typer.Typer) -> None:
    """Register `checks`, replacing the registry's placeholder of the same name."""
    app.command("checks", context_settings=_CONTEXT)(checks)


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def checks(ctx: typer.Context) -> None:
    """Verification checks: list (last result, next run), pause, resume, run now, delete."""
    from bot import cli
    from bot.cli_loop import actor
    from bot.cli_target import open_store

    words, json_output = split_json(list(ctx.args))
    if words in (["--help"], ["-h"]):
        typer.echo(help_text("checks"))
        return
    try:
        invocation = parse_command(["checks", *words])
    except CommandError as exc:
        raise _fail(exc.render()) from None
    config = cli.settings()
    try:
        store = open_store(config)
    except CliError as exc:
        raise _fail(f"error: {exc}", exc.code) from None
    raw = invocation.positionals.get("id")
    check_id = int(str(raw)) if raw is not None else None
    sub = invocation.sub or "list"
    try:
        answer = asyncio.run(_run(config, store, sub, check_id, actor(), quiet=json_output))
    except (LookupError, ValueError) as exc:
        raise _fail(f"error: checks {sub}: {exc}", 1) from None
    finally:
        store.close()
    if json_output:
        typer.echo(json.dumps(answer.to_json(), indent=2, default=str))
    else:
        _print(answer)
    raise typer.Exit(0 if answer.ok else 1)


async def _run(config: Any, store: Any, sub: str, check_id: int | None, who: str, *, quiet: bool) -> Any:
    from bot.cli_playbooks import lease_ttl_s
    from bot.cli_target import cache_dir
    from bot.schedule.commands import run_checks_command
    from bot.schedule.notify import ConsoleNotifier, MemoryNotifier
    from bot.schedule.runtime import ScheduleRuntime
    from bot.store import AsyncStore

    astore = AsyncStore(store)
    notifier = MemoryNotifier() if quiet else ConsoleNotifier()
    runtime = ScheduleRuntime(
        config, astore, notifier, lease_ttl_s=lease_ttl_s(), cache_dir=cache_dir(config)
    )
    try:
        return await run_checks_command(astore, sub, check_id, actor=who, runtime=runtime)
    finally:
        await astore.aclose()


def _print(answer: Any) -> None:
    from rich.console import Console

    from bot.loop.console import render_evidence

    render_evidence(Console(highlight=False), answer.blocks())
