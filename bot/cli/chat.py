"""The chat commands the console runs through the shared grammar alone: the target commands
(`status`, `observe`, `grep`, `logs`, `rollback`, `reconcile`) and a placeholder for every other
registry command, which its own module replaces (`bot.cli.loop`, `bot.cli.bench`, ...).

Why a module of its own: `flagbot status` loads this module and `bot.cli.status` only
(`bot.main.COMMAND_MODULES`), not the loop, the benchmark statistics or the digest; the other
target commands' module (`bot.cli.target`: rollback, the run settler, the journal readers) is
imported when one of them runs.
"""

from __future__ import annotations

import typer

from bot import __version__
from bot.cli.common import CHAT_CONTEXT, catalog_for, fail, settings, split_json
from bot.cli.families import TARGET_COMMANDS
from bot.cli.help import answer_help
from bot.cli.status import run_status_command
from bot.commands import COMMANDS, CommandError, parse_command

__all__ = ["register_chat_command", "register_target_commands"]


def register_chat_command(app: typer.Typer, name: str) -> None:
    """Register the registry command `name`: its words go to the shared grammar; a target
    command runs, any other is "understood but not available" until its module replaces it."""
    spec = next(spec for spec in COMMANDS if spec.name == name)

    def run(ctx: typer.Context) -> None:
        words, json_output = split_json(list(ctx.args))
        if words in (["--help"], ["-h"]) or name == "help":
            answer_help(name, words, json_output)
            return
        config = settings()
        try:
            invocation = parse_command([name, *words], catalog=catalog_for(config, words, name))
        except CommandError as exc:
            raise fail(exc.render()) from None
        if name == "status":
            run_status_command(invocation, config, json_output=json_output)
        if name in TARGET_COMMANDS:
            # `flagbot status` registers through this module, without the other target commands
            from bot.cli.target import run_target_command  # deferred: ~0.2 s of CPU (bench/cli_startup.py)

            run_target_command(name, invocation, config, json_output=json_output)
        raise fail(
            f"`{name}` is understood ({invocation.tier}) but not available in flagbot {__version__} yet; "
            "`flagbot explain` shows how it was read.",
            code=3,
        )

    run.__doc__ = spec.summary
    app.command(name, context_settings=CHAT_CONTEXT)(run)


def register_target_commands(app: typer.Typer) -> None:
    """Register the target commands, in the registry's order."""
    for spec in COMMANDS:
        if spec.name in TARGET_COMMANDS:
            register_chat_command(app, spec.name)
