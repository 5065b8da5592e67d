"""A console test's preamble: a migrated SQLite store and a config whose target `lab` listens
nowhere (port 9, a 1 s SSH connect timeout), so a command that must be answered or refused before
anything reaches a node fails fast if it does reach one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.store import Store

LAB = """default_target = "lab"
[database]
sqlite_path = "{db}"
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{host = "127.0.0.1", port = 9}}]
[targets.lab.ssh]
connect_timeout = 1
"""


def store_path(config: Path) -> Path:
    """Where `lab_config` put the store of `config`."""
    return config.parent / "state" / "flagbot.db"


def lab_config(directory: Path, *, after: str = "", prepare: Callable[[Store], None] | None = None) -> Path:
    """flagbot.toml in `directory` (`LAB`, then `after`: a policy, more targets) over a fresh
    migrated store; `prepare` writes what the test needs in the store first."""
    path = directory / "flagbot.toml"
    store = Store.open(None, sqlite_path=store_path(path))
    store.upgrade()
    if prepare is not None:
        prepare(store)
    store.close()
    path.write_text((LAB + after).format(db=store_path(path)), encoding="utf-8")
    return path
