"""`flagbot`'s entry point: the console commands, `flagbot serve`, and installed add-ons.

Why a module above the front ends: `serve` starts the Slack app and the scheduler, the other
commands are the console's; composing them here keeps `bot.cli` free of the Slack front end
(an import-linter contract: no front end imports another).

Why a table of command modules: importing every command's module costs seconds (the store, SSH,
SciPy, the Slack stack, the lab), and `flagbot status` needs one of them. `main` reads the command
word and imports only the module `COMMAND_MODULES` names for it; any other word (no command,
`--help`, `parse`, `db`, `config`, an add-on's command, a typo) loads every command as before, so
listings and errors stay the same. `app` (PEP 562 attribute) is the application with every
command, for tests and the Docker check. `tests/unit/test_main_commands.py` holds the table to
the commands (every entry imports and registers its names; every command has an entry or is
loaded in full).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Sequence

import typer

from bot.cli.families import LOOP_COMMANDS, RECORD_COMMANDS, TARGET_COMMANDS
from bot.cli.root import app as _root_app
from bot.diagnostics import install_dump_on_signal
from bot.heap import collections_off, exit_without_teardown
from bot.redaction import RedactingStream, install_log_redaction

__all__ = [
    "ALL_COMMANDS_MODULE",
    "COMMAND_MODULES",
    "READ_AND_EXIT_COMMANDS",
    "command_word",
    "load_commands",
    "main",
]

COMMAND_MODULES: dict[str, str] = {
    "help": "bot.cli.help:register_help",
    "explain": "bot.cli.explain:register_explain",
    **dict.fromkeys(sorted(TARGET_COMMANDS), "bot.cli.chat:register_target_commands"),
    **dict.fromkeys(LOOP_COMMANDS, "bot.cli.loop:register_loop"),
    **dict.fromkeys(RECORD_COMMANDS, "bot.cli.records:register_records"),
    "predict": "bot.cli.predict:register_predict",
    "bench": "bot.cli.bench:register_bench",
    "playbooks": "bot.cli.playbooks:register_playbooks",
    "run": "bot.cli.playbooks:register_playbooks",
    "checks": "bot.cli.checks:register_checks",
    "digest": "bot.cli.digest:register_digest",
    "sudoers": "bot.cli.sudoers:register_sudoers",
    "serve": "bot.serve:register_serve",  # the Slack bot and the scheduler (bot/serve.py)
}
"""Command word -> `module:function` that registers it (and its siblings) on the application."""

READ_AND_EXIT_COMMANDS = frozenset({"status", "log", "help", "explain", "observe", "grep", "logs", "predict"})
"""Commands that read, print and exit within seconds: run without the cyclic garbage collector
(`bot.heap.collections_off`) and leave without the interpreter's teardown
(`bot.heap.exit_without_teardown`). Not the loop's commands (an experiment runs for many minutes),
`serve` or `digest` (`bot.heap.collections_paused` covers its bulk read)."""

ALL_COMMANDS_MODULE = "bot.cli.app"
"""Importing it registers every console command (bot/cli/app.py)."""

ROOT_OPTIONS_WITH_VALUE = frozenset({"--config", "-c"})
_loaded: set[str] = set()


def command_word(args: Sequence[str]) -> str | None:
    """The command the arguments name, read past the program's own options (`--config PATH`,
    `-c PATH`, `--config=PATH`); None when there is none or an option this does not know comes
    first (click then says what it makes of them, with every command loaded)."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in ROOT_OPTIONS_WITH_VALUE:
            index += 2
        elif word.startswith("--config=") or (word.startswith("-c") and not word.startswith("--")):
            index += 1
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


def _register(spec: str) -> None:
    """Import `module:function` and let the function register its commands (once per process)."""
    if spec in _loaded:
        return
    module_name, _, function_name = spec.partition(":")
    register: Callable[[typer.Typer], None] = getattr(importlib.import_module(module_name), function_name)
    register(_root_app)
    _loaded.add(spec)


def load_commands(word: str | None) -> typer.Typer:
    """The application with the command `word` on it: only its module's commands for a word in
    `COMMAND_MODULES`, every command (and the add-ons') for anything else."""
    spec = COMMAND_MODULES.get(word) if word is not None else None
    if spec is not None:
        _register(spec)
        return _root_app
    if ALL_COMMANDS_MODULE not in _loaded:
        importlib.import_module(ALL_COMMANDS_MODULE)  # registers every console command on import
        _loaded.add(ALL_COMMANDS_MODULE)
        _register(COMMAND_MODULES["serve"])
        # commands of installed add-ons, e.g. the lab's `twin` and `demo`; no command of
        # `COMMAND_MODULES` needs them
        # deferred: reading the installed packages' entry points costs ~10 ms
        from bot.cli.plugins import register_plugins

        register_plugins(_root_app)
    return _root_app


def __getattr__(name: str) -> typer.Typer:
    """`bot.main.app`: the application with every command, built on first use (PEP 562)."""
    if name == "app":
        return load_commands(None)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point."""
    install_dump_on_signal()  # `kill -USR1 <pid>` prints where a stuck command is
    install_log_redaction()  # secrets never reach the log (bot/redaction.py)
    sys.stdout = RedactingStream(sys.stdout)  # nor the console: every command's output is masked
    sys.stderr = RedactingStream(sys.stderr)
    word = command_word(sys.argv[1:])
    quick = word in READ_AND_EXIT_COMMANDS
    if quick:
        collections_off()  # its objects live until it exits: collections find nothing (bot/heap.py)
    application = load_commands(word)
    status: str | int | None = 0
    try:
        application()  # click ends it with SystemExit, the command's exit status in it
    except SystemExit as done:
        status = done.code
    except BrokenPipeError:
        status = 0
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    if quick:
        exit_without_teardown(status)  # the interpreter's teardown cost it ~0.3 s (bot/heap.py)
    sys.exit(status)
