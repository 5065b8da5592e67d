"""The lab's commands for the product CLI: `flagbot twin up|down|status` and `flagbot demo`.

Registered through the `flagbot.commands` entry point (lab/pyproject.toml); `bot.cli.plugins`
calls `register` when the lab is installed.
"""

from __future__ import annotations

import typer

from flagbot_lab.cli_demo import register_demo
from flagbot_lab.cli_twin import twin_app


def register(app: typer.Typer) -> None:
    """Add `twin` (a command group) and `demo` to the `flagbot` application."""
    app.add_typer(twin_app, name="twin")
    register_demo(app)
