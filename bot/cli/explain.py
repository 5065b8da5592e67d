"""`flagbot explain COMMAND [ARGS]...`: how a chat command is read, without running it.

Why a module of its own: explain reads the config and the target's flag list, never the store
or the loop; `bot.main.COMMAND_MODULES` loads it alone.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bot.cli.common import CHAT_CONTEXT, catalog_for, fail, set_json_mode, settings
from bot.commands import CommandError, describe_invocation, parse_command

__all__ = ["register_explain"]


def explain(ctx: typer.Context, json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show how flagbot reads a chat command, without running it: `flagbot explain try --tp 8`."""
    set_json_mode(json_output)
    if ctx.args in (["--help"], ["-h"], []):
        typer.echo("usage: flagbot explain [--json] COMMAND [ARGS]...  (shows how a chat command is read)")
        return
    config = settings()
    try:
        invocation = parse_command(ctx.args, catalog=catalog_for(config, ctx.args))
    except CommandError as exc:
        raise fail(exc.render()) from None
    description = describe_invocation(invocation)
    if json_output:
        typer.echo(json.dumps({"ok": True, **description}, indent=2))
    else:
        for key, value in description.items():
            typer.echo(f"{key}: {value}")


def register_explain(app: typer.Typer) -> None:
    app.command("explain", context_settings=CHAT_CONTEXT)(explain)
