"""`flagbot predict CHANGE... [EXPECTATION...]`: a change's capacity, predicted from the store.

Why a module of its own: predict reads only the store (the last observed start's figures), never
the target or the loop, so `bot.main` loads it alone; it reuses the chat-style plumbing of
`bot.cli.records` (words parsed as in Slack, `--json`, one printed answer).
"""

from __future__ import annotations

import typer

from bot.app.predict import predict_json
from bot.cli.common import CHAT_CONTEXT
from bot.cli.records import chat_command, run_read
from bot.commands import Invocation
from bot.config import Settings

__all__ = ["register_predict"]


def _run_predict(config: Settings, invocation: Invocation, target: str, json_output: bool) -> None:
    run_read(config, invocation, target, predict_json, json_output=json_output)


def register_predict(app: typer.Typer) -> None:
    """Register `predict`, replacing the registry's placeholder."""
    app.command("predict", context_settings=CHAT_CONTEXT)(chat_command("predict", _run_predict))
