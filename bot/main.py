"""`flagbot`'s entry point: the console commands, `flagbot serve`, and installed add-ons.

Why a module above the front ends: `serve` starts the Slack app and the scheduler, the other
commands are the console's; composing them here keeps `bot.cli` free of the Slack front end
(an import-linter contract: no front end imports another).
"""

from __future__ import annotations

import contextlib
import sys

from bot.cli.app import app
from bot.cli.plugins import register_plugins
from bot.config.redaction import RedactingStream, install_log_redaction
from bot.diagnostics import install_dump_on_signal
from bot.serve import register_serve

register_serve(app)  # the Slack bot and the scheduler (bot/serve.py)
register_plugins(app)  # commands of installed add-ons, e.g. the lab's `twin` and `demo` (bot/cli/plugins.py)

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    install_dump_on_signal()  # `kill -USR1 <pid>` prints where a stuck command is
    install_log_redaction()  # secrets never reach the log (bot/config/redaction.py)
    sys.stdout = RedactingStream(sys.stdout)  # nor the console: every command's output is masked
    sys.stderr = RedactingStream(sys.stderr)
    try:
        app()
    except BrokenPipeError:
        sys.exit(0)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
