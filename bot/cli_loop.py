"""`flagbot try|revert|verify|isolate|baseline|hypothesis|log|cancel`: the loop from the terminal.

Each mutating command is its built-in playbook run by the engine, exactly as `flagbot run try
changes=...` would run it (same lease, same reconcile of a dead run first, same evidence);
this module only turns the chat words into the playbook's parameters. The read-only ones
(`hypothesis`, `log`, `baseline show|diff`) read the store. Exit codes: 0 done (the experiment
succeeded), 1 the target could not do it or said no (lease held, verdict not reached), 2 usage.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import socket
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from bot.cli_target import CliError, split_json
from bot.commands import CommandError, Invocation, help_text, parse_command
from bot.config import Settings

LOOP_COMMANDS = ("try", "revert", "verify", "isolate", "baseline", "hypothesis", "log", "cancel")
_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def register_loop(app: typer.Typer) -> None:
    """Register the loop commands, replacing the registry's placeholders of the same names."""
    for name in LOOP_COMMANDS:
        app.command(name, context_settings=_CONTEXT)(_command(name))


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def actor() -> str:
    return f"cli:{getpass.getuser()}@{socket.gethostname()}"


def playbook_params(invocation: Invocation) -> tuple[str, dict[str, Any]]:
    """The built-in playbook a chat command runs, and its parameters in JSON form."""
    options = invocation.options
    expect = [str(e) for e in invocation.expectations]
    name = invocation.name
    if name == "try":
        params: dict[str, Any] = {
            "changes": [change.to_json() for change in invocation.changes],
            "expect": expect,
            "keep": options.get("keep", "auto"),
            "dry_run": options.get("dry-run") == "yes",
            "force": options.get("force") == "yes",
        }
        for key in ("profile", "because"):
            if key in options:
                params[key] = options[key]
        if "hypothesis" in options:
            params["hypothesis"] = int(options["hypothesis"])
        return "try", params
    if name == "revert":
        what = invocation.positionals.get("what")
        return "revert", {"what": None if what is None else str(what), "flags": options.get("flags")}
    if name == "verify":
        return "verify", {
            "expect": expect,
            **({"profile": options["profile"]} if "profile" in options else {}),
        }
    if name == "isolate":
        params = {
            "expect": expect,
            "since": options.get("since", "baseline"),
            "end": options.get("end", "good"),
        }
        if "profile" in options:
            params["profile"] = options["profile"]
        return "isolate", params
    if name == "baseline":
        return "baseline", {
            **({"profile": options["profile"]} if "profile" in options else {}),
            "note": options.get("because", ""),
        }
    raise ValueError(f"{name} runs no playbook")


def _command(name: str) -> Any:
    def run(ctx: typer.Context) -> None:
        from bot import cli

        words, json_output = split_json(list(ctx.args))
        if words in (["--help"], ["-h"]):
            typer.echo(help_text(name))
            return
        words = [{"--dry-run": "dry-run=yes", "--force": "force=yes"}.get(word, word) for word in words]
        config = cli.settings()
        try:
            invocation = parse_command([name, *words], catalog=cli.catalog_for(config, words))
        except CommandError as exc:
            raise _fail(exc.render()) from None
        target = invocation.options.get("target") or config.default_target
        if target is None or target not in config.targets:
            known = ", ".join(sorted(config.targets)) or "none"
            raise _fail(f"error: unknown or missing target {target!r}; targets: {known}")
        if name in ("hypothesis", "log", "cancel") or (
            name == "baseline" and invocation.sub in (None, "show", "diff")
        ):
            _read_command(config, invocation, target, json_output=json_output)
            return
        _run_playbook(config, invocation, target, json_output=json_output)

    run.__doc__ = help_text(name).splitlines()[0]
    return run


def _run_playbook(config: Settings, invocation: Invocation, target: str, *, json_output: bool) -> None:
    from bot.cli_playbooks import execute_playbook, load_all

    books = load_all(config)
    playbook, params = playbook_params(invocation)
    book = books.get(playbook)
    if book is None:
        raise _fail(f"error: no playbook {playbook!r}; playbooks: {', '.join(books) or 'none'}")
    code, document = execute_playbook(config, books, book, params, target, json_output=json_output)
    if json_output:
        typer.echo(json.dumps(document, indent=2, default=str))
    raise typer.Exit(code)


def _read_command(config: Settings, invocation: Invocation, target: str, *, json_output: bool) -> None:
    from bot.cli_target import open_store
    from bot.loop import records_view

    try:
        store = open_store(config)
    except CliError as exc:
        raise _fail(f"error: {exc}", exc.code) from None
    try:
        if invocation.name == "cancel":
            data = asyncio.run(_cancel(config, store, invocation, target))
        else:
            data = records_view.read(store, invocation, target, actor=actor())
    except (LookupError, ValueError) as exc:
        raise _fail(f"error: {invocation.name}: {exc}", 1) from None
    finally:
        store.close()
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        _print(data)
    raise typer.Exit(0 if data.get("ok", True) else 1)


async def _cancel(config: Settings, store: Any, invocation: Invocation, target: str) -> dict[str, Any]:
    from bot.loop.engine import Engine
    from bot.loop.report import MemoryReporter
    from bot.store import AsyncStore
    from bot.store.experiments import unfinished_experiments

    astore = AsyncStore(store)
    try:
        given = invocation.positionals.get("experiment")
        if given is None:
            running = await astore.run(unfinished_experiments, store, target)
            if not running:
                raise LookupError(f"nothing is running on {target}")
            experiment_id = running[-1].id or 0
        else:
            experiment_id = int(str(given))
        engine = Engine(config, astore, MemoryReporter())
        ok = await engine.cancel(experiment_id, actor())
    finally:
        await astore.aclose()
    text = (
        f"experiment #{experiment_id}: cancel requested; it stops at its next step boundary and rolls back"
        if ok
        else f"experiment #{experiment_id} is not running; nothing to cancel"
    )
    return {"ok": ok, "experiment_id": experiment_id, "lines": [text]}


def _print(data: dict[str, Any]) -> None:
    console = Console(highlight=False)
    for table in data.get("tables", []):
        rich_table = Table(title=table["title"], title_justify="left")
        for column in table["columns"]:
            rich_table.add_column(column, overflow="fold")
        for row in table["rows"]:
            rich_table.add_row(*[str(cell) for cell in row])
        console.print(rich_table)
    for line in data.get("lines", []):
        console.print(line, markup=False, soft_wrap=True)
