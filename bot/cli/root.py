"""The console's Typer application with no command on it yet: the program's own options
(`--config`, `--version`) and what every invocation starts with.

Why apart from `bot.cli.app`: `bot.main` registers on this application only the command that was
typed (its module named in `bot.main.COMMAND_MODULES`), so `flagbot help` does not import the
store, SSH or SciPy that other commands need; `bot.cli.app` registers every command for the full
listing (`flagbot --help`) and for tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot import __version__
from bot.cli.state import start_invocation

app = typer.Typer(
    name="flagbot",
    help="Run the SGLang flag-tuning loop: try, revert, verify, isolate; evidence and a log that lasts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"flagbot {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="flagbot.toml to use (default: $FLAGBOT_CONFIG, then ./flagbot.toml)"
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    start_invocation(config)  # `--config`, `--json` off, the loaded modules' hooks (bot/cli/state.py)
