"""What every console command that reads the config shares: the settings of `--config`, the
target's flag list, and the application context (settings + store); the invocation's own state
(`--config`, `--json`, one-line errors) is `bot.cli.state`, re-exported here.

Why a module of its own: each command module used to import the CLI's main module back for
these (and one its private store opener), which tied them all into one import cycle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TypeVar

import typer

from bot.app.command_loop import run_async
from bot.app.context import AppContext, lease_ttl_s, open_store
from bot.app.errors import AppError
from bot.app.flag_list import needs_flag_list, read_flag_list
from bot.app.playbooks import set_broken_announcer
from bot.cli.state import (
    CHAT_CONTEXT,
    JSON_SWITCH,
    config_path,
    error_document,
    fail,
    json_mode,
    on_each_invocation,
    set_config_path,
    set_json_mode,
    split_json,
)
from bot.commands import CommandError
from bot.commands.target_catalog import UnknownTargetError
from bot.config import ConfigError, Settings, load_settings
from bot.sglang.catalog import FlagCatalog
from bot.store import AsyncStore

T = TypeVar("T")

__all__ = [
    "CHAT_CONTEXT",
    "JSON_SWITCH",
    "catalog_for",
    "error_document",
    "fail",
    "json_mode",
    "run_in_context",
    "set_config_path",
    "set_json_mode",
    "settings",
    "split_json",
    "usage_errors",
]


def _announce_broken_playbooks_on_stderr() -> None:
    """A broken playbook file is told once on stderr, by the first command that loads playbooks
    (every such command imports this module, so the hook is in place before it runs)."""
    set_broken_announcer(lambda message: typer.echo(message, err=True))


on_each_invocation(_announce_broken_playbooks_on_stderr)


def settings() -> Settings:
    try:
        return load_settings(config_path())
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
