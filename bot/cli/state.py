"""What an invocation of the console sets before its command runs: the `--config` path, whether
`--json` was asked, and one-line errors with their exit codes.

Why a module apart from `bot.cli.common`: `flagbot help` and the root options need these and
nothing else; `common` brings the application context (the store, SSH, the flag list), which
`help` must not pay for at start-up (docs/performance.md, "CLI start-up").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import typer

JSON_SWITCH = "--json"
CHAT_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""Typer settings of a command that takes the chat grammar's raw words."""

_config_path: list[Path | None] = [None]
_json_mode: list[bool] = [False]
_invocation_hooks: list[Callable[[], None]] = []
ERROR_KINDS = {1: "failed", 2: "usage", 3: "not_available"}
"""The `kind` of a `--json` error document, by exit code (docs/commands.md, "`--json`")."""


def set_config_path(path: Path | None) -> None:
    """The `--config` of this invocation (the root callback sets it)."""
    _config_path[0] = path


def config_path() -> Path | None:
    return _config_path[0]


def set_json_mode(on: bool) -> None:
    """Whether this invocation asked for `--json`: its errors are then also one JSON document
    on stdout (`{"ok": false, "error": ..., "kind": ...}`), with the same exit code."""
    _json_mode[0] = on


def json_mode() -> bool:
    return _json_mode[0]


def on_each_invocation(hook: Callable[[], None]) -> None:
    """Run `hook` at the start of every invocation (the root callback), for state that a command
    module owns: the module registers it when it is loaded, so a command that never loads the
    module never imports what the hook needs."""
    if hook not in _invocation_hooks:
        _invocation_hooks.append(hook)


def start_invocation(path: Path | None) -> None:
    """What the root callback does before any command: `--config`, `--json` off (a command that
    takes `--json` turns it on), then the hooks of the loaded command modules."""
    set_config_path(path)
    set_json_mode(False)
    for hook in _invocation_hooks:
        hook()


def error_document(message: str, code: int) -> dict[str, object]:
    """The `--json` form of an error line: `error:` taken off, the kind named by the exit code."""
    text = message.removeprefix("error: ").strip()
    return {"ok": False, "error": text, "kind": ERROR_KINDS.get(code, "failed"), "exit_code": code}


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `message` on stderr (and, under `--json`, its JSON document on stdout); the Exit
    to raise with `code`."""
    typer.echo(message, err=True)
    if _json_mode[0]:
        typer.echo(json.dumps(error_document(message, code), indent=2))
    return typer.Exit(code)


def split_json(words: list[str]) -> tuple[list[str], bool]:
    """The words without `--json`, and whether it was there (remembered for `fail`)."""
    found = JSON_SWITCH in words
    set_json_mode(found)
    return [word for word in words if word != JSON_SWITCH], found
