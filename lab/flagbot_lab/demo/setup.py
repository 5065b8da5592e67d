"""The demo's files under `state/demo/`: its flagbot config, a fresh SQLite database, the bot's log.

The config is the testbed's own `twin.toml` (the nodes, their keys, known_hosts) plus what the
demo needs: a small benchmark profile so the whole story takes minutes on a 2-core machine,
RBAC for the stand-in's seeded people, and the database in the demo's folder. It is checked
with flagbot's own loader, so a config the bot would refuse fails here, before anything starts.
"""

from __future__ import annotations

import json
from pathlib import Path

from bot.config import ConfigError, Settings, load_settings
from bot.store import Store
from flagbot_lab.demo.story import ADMIN, OPERATOR

PROFILE = "demo"
PROFILE_TEXT = f"""
# The demo's benchmark: two levels (8 and 32 running), two repeats, short requests. Enough for a
# verdict with statistics on the twin, short enough for the whole story in a few minutes.
[bench.{PROFILE}]
concurrency = [8, 32]
repeats = 2
input_len = 256
output_len = 64
num_requests = 16
warmup_requests = 1
"""
TIMEOUTS_TEXT = """
# The twin starts in ~10 s: a start that is not ready in 3 minutes is a failure the bot reports.
[targets.twin.timeouts]
ready = "3m"
"""
RBAC_TEXT = f"""
# The stand-in's seeded people (docs/slack.md): alice is admin (baseline pin), bob operator.
[slack.rbac]
admins = ["{ADMIN}"]
operators = ["{OPERATOR}", "S0OPERATORS"]
approvers = ["U0APPR"]
viewers = ["*"]
"""
_VERSION_LINE = 'sglang_version = "0.5.10"'


class DemoSetupError(Exception):
    """The demo cannot start; the message says why and what to do."""


def state_dir(base: Path, instance: int, default_instance: int) -> Path:
    """`state/demo` for the demo's own instance, `state/demo-<i>` for any other."""
    return base / ("demo" if instance == default_instance else f"demo-{instance}")


def demo_config_text(twin_toml: str, database: Path) -> str:
    """The testbed's config with the demo's profile, RBAC and database added."""
    if twin_toml.count(_VERSION_LINE) != 1:
        raise DemoSetupError(f"the testbed's config has no single `{_VERSION_LINE}` line to extend")
    text = twin_toml.replace(_VERSION_LINE, f'{_VERSION_LINE}\nbenchmark_profile = "{PROFILE}"', 1)
    database_text = f"\n[database]\nsqlite_path = {json.dumps(str(database))}\n"
    return text + TIMEOUTS_TEXT + PROFILE_TEXT + RBAC_TEXT + database_text


def write_demo_config(path: Path, twin_toml: str, database: Path) -> Settings:
    """Write the config and load it back as the bot will; DemoSetupError if it is refused."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(demo_config_text(twin_toml, database))
    try:
        settings = load_settings(path, required=True)
    except ConfigError as exc:
        raise DemoSetupError(f"the demo's config {path} is invalid: {exc}") from None
    if settings.targets["twin"].benchmark_profile != PROFILE:
        raise DemoSetupError(f"the demo's config {path} does not select the {PROFILE!r} profile")
    return settings


def fresh_database(path: Path) -> None:
    """A new SQLite database at the newest schema: each demo tells the story from the start."""
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = Store.open(f"sqlite:///{path}")
    try:
        store.upgrade()
    finally:
        store.close()
