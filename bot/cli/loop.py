"""`flagbot try|revert|verify|isolate|restart|baseline|hypothesis|knowledge|log|cancel|keep|freeze|unfreeze`:
the loop from the terminal (`freeze`/`unfreeze`: `bot.app.freeze`).

Each mutating command is its built-in playbook run by the engine, exactly as `flagbot run try
changes=...` would run it (same lease, same reconcile of a dead run first, same evidence): the
words are read by `bot.app.playbooks`, the run by `bot.app.runs`. The read-only ones
(`hypothesis`, `knowledge`, `log`, `baseline show|diff`) read the store (`bot.app.records`). Exit codes: 0
done (the experiment succeeded), 1 the target could not do it or said no (lease held, verdict not
reached), 2 usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from bot.app.ask import keep_command
from bot.app.command_loop import command_loop
from bot.app.context import AppContext, console_actor
from bot.app.errors import AppError
from bot.app.freeze import freeze, unfreeze
from bot.app.records import RecordsAnswer, read_records
from bot.app.runs import CancelResult, cancel, cancel_wait
from bot.app.targets import target_of
from bot.cli.common import CHAT_CONTEXT, catalog_for, fail, run_in_context, settings, split_json, usage_errors
from bot.cli.families import LOOP_COMMANDS
from bot.cli.playbooks import run_playbook_command
from bot.commands import CommandError, Invocation, help_text, normalize_words, parse_command
from bot.config import Settings
from bot.loop.console import print_table


def register_loop(app: typer.Typer) -> None:
    """Register the loop commands, replacing the registry's placeholders of the same names."""
    for name in LOOP_COMMANDS:
        app.command(name, context_settings=CHAT_CONTEXT)(_command(name))


def _command(name: str) -> Callable[[typer.Context], None]:
    def run(ctx: typer.Context) -> None:
        words, json_output = split_json(list(ctx.args))
        if words in (["--help"], ["-h"]):
            typer.echo(help_text(name))
            return
        words = normalize_words([name, *words])[1:]  # `--dry-run` is `dry-run=yes`, as in Slack
        with command_loop():  # the flag-list read and the run share one loop and one SSH login
            _run_command(name, words, json_output=json_output)

    run.__doc__ = help_text(name).splitlines()[0]
    return run


def _run_command(name: str, words: list[str], *, json_output: bool) -> None:
    config = settings()
    try:
        invocation = parse_command([name, *words], catalog=catalog_for(config, words, name))
    except CommandError as exc:
        raise fail(exc.render()) from None
    for note in invocation.notes:  # e.g. a removed flag the list lacks
        typer.echo(f"note: {note}", err=True)
    with usage_errors():
        target = target_of(config, invocation)
    if name in ("hypothesis", "knowledge", "log", "cancel", "keep", "freeze", "unfreeze") or (
        name == "baseline" and invocation.sub in (None, "show", "diff")
    ):
        _read_command(config, invocation, target, json_output=json_output)
        return
    run_playbook_command(config, invocation, json_output=json_output)


async def _cancel(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    given = invocation.positionals.get("experiment")
    waiter = invocation.options.get("waiter")
    if waiter is not None:  # a command waiting for the target (wait=): it has no experiment yet
        if given is not None:
            raise LookupError("cancel takes an experiment or waiter=ID, not both")
        stopped = await cancel_wait(ctx, int(waiter), actor=console_actor())
        if stopped.waiter is None:
            raise LookupError(stopped.text())
        return {**stopped.to_json(), "lines": [stopped.text()]}
    result: CancelResult = await cancel(
        ctx, target, None if given is None else int(str(given)), actor=console_actor()
    )
    if result.experiment_id is None:
        raise LookupError(f"nothing is running on {target}")
    if result.experiment is None:
        raise LookupError(f"no experiment #{result.experiment_id}")
    text = (
        f"experiment #{result.experiment_id}: cancel requested; it stops at its next step boundary and rolls back"
        if result.requested
        else f"experiment #{result.experiment_id} is not running; nothing to cancel"
    )
    return {**result.to_json(), "lines": [text]}


async def _keep(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    experiment_id = int(str(invocation.positionals["experiment"]))
    done = await keep_command(ctx, experiment_id, target, actor=console_actor())
    return {
        "ok": True,
        "experiment_id": done.experiment_id,
        "decision": done.decision,
        "lines": [done.text()],
    }


async def _records(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    answer: RecordsAnswer = await read_records(ctx, invocation, target, actor=console_actor())
    return answer.to_json()


async def _freeze(ctx: AppContext, invocation: Invocation, target: str) -> dict[str, Any]:
    if invocation.name == "freeze":
        done = await freeze(
            ctx,
            target,
            reason=invocation.options.get("reason"),
            until=invocation.options.get("until"),
            actor=console_actor(),
        )
    else:
        done = await unfreeze(ctx, target, actor=console_actor())
    return done.to_json()


def _read_command(config: Settings, invocation: Invocation, target: str, *, json_output: bool) -> None:
    read = {"cancel": _cancel, "keep": _keep, "freeze": _freeze, "unfreeze": _freeze}.get(
        invocation.name, _records
    )
    try:
        data = run_in_context(config, lambda ctx: read(ctx, invocation, target))
    except AppError as exc:  # a freeze without a reason, a bad until=
        raise fail(f"error: {exc.message}", exc.exit_code) from None
    except (LookupError, ValueError) as exc:
        raise fail(f"error: {invocation.name}: {exc}", 1) from None
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        _print(data, Console(highlight=False))
    raise typer.Exit(0 if data.get("ok", True) else 1)


def _print(data: dict[str, Any], console: Console) -> None:
    if "markdown" in data:  # `log ID --markdown`: the document as it is, to paste or redirect
        typer.echo(data["markdown"], nl=False)
        return
    for table in data.get("tables", []):
        rows = [[str(cell) for cell in row] for row in table["rows"]]
        print_table(console, table["title"], table["columns"], rows)
    for line in data.get("lines", []):
        console.print(line, markup=False, soft_wrap=True)
