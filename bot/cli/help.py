"""`flagbot help [COMMAND]` and every chat command's `--help`: the registry's help text.

Why a module of its own: help needs the command registry and nothing else, so `flagbot help`
loads only this module (`bot.main.COMMAND_MODULES`) and answers without importing the store,
SSH or the statistics the other commands need.
"""

from __future__ import annotations

import json

import typer

from bot.cli.state import CHAT_CONTEXT, fail, split_json
from bot.commands import COMMANDS, get_command, help_text

__all__ = ["answer_help", "register_help"]


def answer_help(name: str, words: list[str], json_output: bool) -> None:
    """Print the help of `help TOPIC` (`name` is "help") or of `name --help`; an unknown topic is
    the registry's list of commands on stderr and exit 2."""
    topic = words[0] if name == "help" and words else (None if name == "help" else name)
    if topic is not None and get_command(topic) is None:
        raise fail(help_text(topic))
    text = help_text(topic)
    typer.echo(json.dumps({"ok": True, "topic": topic, "help": text}, indent=2) if json_output else text)


def _help(ctx: typer.Context) -> None:
    words, json_output = split_json(list(ctx.args))
    answer_help("help", words, json_output)


def register_help(app: typer.Typer) -> None:
    """Register `help` (the same command `bot.cli.chat` registers for the full listing)."""
    _help.__doc__ = next(spec for spec in COMMANDS if spec.name == "help").summary
    app.command("help", context_settings=CHAT_CONTEXT)(_help)
