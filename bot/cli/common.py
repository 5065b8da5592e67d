"""What every console command shares: the config given with `--config`, one-line errors with
their exit codes, the target's flag list, and the application context (settings + store).

Why a module of its own: each command module used to import the CLI's main module back for
these (and one its private store opener), which tied them all into one import cycle.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TypeVar

import typer

from bot.app.command_loop import run_async
from bot.app.context import AppContext, lease_ttl_s, open_store
from bot.app.errors import AppError
from bot.app.flag_list import needs_flag_list, read_flag_list
from bot.commands import CommandError
from bot.commands.target_catalog import UnknownTargetError
from bot.config import ConfigError, Settings, load_settings
from bot.sglang.catalog import FlagCatalog
from bot.store import AsyncStore

JSON_SWITCH = "--json"
CHAT_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""Typer settings of a command that takes the chat grammar's raw words."""

_config_path: list[Path | None] = [None]
_json_mode: list[bool] = [False]
ERROR_KINDS = {1: "failed", 2: "usage", 3: "not_available"}
"""The `kind` of a `--json` error document, by exit code (docs/commands.md, "`--json`")."""
T = TypeVar("T")


def set_config_path(path: Path | None) -> None:
    """The `--config` of this invocation (the root callback sets it)."""
    _config_path[0] = path


def set_json_mode(on: bool) -> None:
    """Whether this invocation asked for `--json`: its errors are then also one JSON document
    on stdout (`{"ok": false, "error": ..., "kind": ...}`), with the same exit code."""
    _json_mode[0] = on


def json_mode() -> bool:
    return _json_mode[0]


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


def settings() -> Settings:
    try:
        return load_settings(_config_path[0])
    except ConfigError as exc:
        raise fail(f"error: {exc}") from None


def catalog_for(config: Settings, words: list[str], command: str | None = None) -> FlagCatalog:
    """The flag list of the command's target (`bot.app.flag_list`): for a command whose words
    name SGLang flags, the host's own list (its version read now, the list cached per version),
    or the packaged one when the host cannot answer; a note on stderr says which list it was.
    `words` start with the command's name unless `command` gives it. An unknown `target=` is one
    `error:` line."""
    full = [command, *words] if command is not None else list(words)
    try:
        found = run_async(read_flag_list(config, full))
    except UnknownTargetError as exc:
        raise fail(f"error: {exc}") from None
    if needs_flag_list(full):
        typer.echo(f"note: flags checked against the {found.note}", err=True)
    return found.catalog


def split_json(words: list[str]) -> tuple[list[str], bool]:
    """The words without `--json`, and whether it was there (remembered for `fail`)."""
    found = JSON_SWITCH in words
    set_json_mode(found)
    return [word for word in words if word != JSON_SWITCH], found


@contextmanager
def usage_errors() -> Iterator[None]:
    """A CommandError or a usage AppError becomes its `error:` line and exit 2 (1 for AppError
    that is not the user's words)."""
    try:
        yield
    except CommandError as exc:
        raise fail(f"error: {exc.message}") from None
    except AppError as exc:
        raise fail(f"error: {exc.message}", exc.exit_code) from None


@asynccontextmanager
async def _context(config: Settings) -> AsyncIterator[AppContext]:
    store = AsyncStore(open_store(config))
    try:
        yield AppContext(config, store, lease_ttl_s=lease_ttl_s())
    finally:
        await store.aclose()


def run_in_context(config: Settings, work: Callable[[AppContext], Awaitable[T]]) -> T:
    """Open the store (a store that is not ready is `error:` and exit 2), run `work` with the
    application context on a fresh event loop (the command's, inside `bot.app.command_loop`),
    close the store however it ends."""
    try:
        return run_async(_run(config, work))
    except AppError as exc:
        if exc.usage:
            raise fail(f"error: {exc.message}", exc.exit_code) from None
        raise


async def _run(config: Settings, work: Callable[[AppContext], Awaitable[T]]) -> T:
    async with _context(config) as ctx:
        return await work(ctx)
