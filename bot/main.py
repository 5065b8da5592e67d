"""`flagbot`'s entry point: the console commands, `flagbot serve`, and installed add-ons.

Why a module above the front ends: `serve` starts the Slack app and the scheduler, the other
commands are the console's; composing them here keeps `bot.cli` free of the Slack front end
(an import-linter contract: no front end imports another).
"""

from __future__ import annotations

import sys

from bot.cli.app import app
from bot.cli.plugins import register_plugins
from bot.diagnostics import install_dump_on_signal
from bot.serve import register_serve

register_serve(app)  # the Slack bot and the scheduler (bot/serve.py)
register_plugins(app)  # commands of installed add-ons, e.g. the lab's `twin` and `demo` (bot/cli/plugins.py)

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    install_dump_on_signal()  # `kill -USR1 <pid>` prints where a stuck command is
    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
