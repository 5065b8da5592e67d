"""`policy.max_restarts_per_hour` against restarts recorded in a real store: the CLI refuses a
restarting command before anything runs, and `isolate` refuses its worst case before its first
probe (on the fake target layer of tests/support/loop_fake_target.py, with the real steps)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.restart_budget import read_allowance
from bot.store import AsyncStore, Store
from bot.store.experiments import list_experiments
from bot.store.models import utcnow
from bot.store.records import RESTART_ACTION, audit, restart_times
from tests.component.loop.test_playbooks_cite_measurements import METRICS, fake_everywhere
from tests.support.loop_actions import Probe
from tests.support.loop_fake_target import TARGET, settings

BOUNCE = """
name: bounce
description: a note, and a restore on failure (so it counts as restarting)
mutating: true
steps:
  - {action: t_note, with: {label: bounced}}
on_failure:
  - action: restore
"""


def record_restarts(store: Store, target: str, minutes_ago: list[int]) -> None:
    for minutes in minutes_ago:
        row = audit(store, actor="flagbot", target=target, action=RESTART_ACTION)
        row.at = utcnow() - timedelta(minutes=minutes)
        store.add(row)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    books = tmp_path / "books"
    books.mkdir()
    (books / "bounce.yaml").write_text(BOUNCE, encoding="utf-8")
    db = tmp_path / "state" / "flagbot.db"
    store = Store.open(None, sqlite_path=db)
    store.upgrade()
    store.close()
    path = tmp_path / "flagbot.toml"
    path.write_text(
        f"""
playbook_dirs = ["{books}"]
default_target = "dev"
[database]
sqlite_path = "{db}"
[targets.dev]
unit = "sglang.service"
nodes = [{{host = "127.0.0.1", port = 9}}]
[targets.dev.policy]
max_restarts_per_hour = 2
""",
        encoding="utf-8",
    )
    return path


def open_db(config: Path) -> Store:
    return Store.open(None, sqlite_path=config.parent / "state" / "flagbot.db")


def test_the_store_counts_restarts_per_target_since_a_time(config: Path) -> None:
    store = open_db(config)
    try:
        record_restarts(store, "dev", [70, 30, 10])
        record_restarts(store, "other", [5])
        audit(store, actor="cli:alice", target="dev", action="try")
        times = restart_times(store, "dev", since=utcnow() - timedelta(hours=1))
        assert len(times) == 2 and times == sorted(times)
    finally:
        store.close()


def test_the_cli_refuses_a_restarting_command_with_the_time_of_the_next_restart(
    config: Path, probe: Probe
) -> None:
    store = open_db(config)
    try:
        record_restarts(store, "dev", [50, 20])
        oldest = restart_times(store, "dev", since=utcnow() - timedelta(hours=1))[0]
    finally:
        store.close()
    result = CliRunner().invoke(cli.app, ["--config", str(config), "run", "bounce"])
    assert result.exit_code == 1, result.stderr
    when = f"{oldest + timedelta(hours=1):%Y-%m-%d %H:%M:%S} UTC"
    assert result.stderr.startswith("error: dev: `bounce` needs 1 restart")
    assert "policy.max_restarts_per_hour = 2" in result.stderr and f"allowed at {when}" in result.stderr
    assert probe.calls == []
    store = open_db(config)
    try:
        assert list_experiments(store, "dev") == []  # refused before anything ran
    finally:
        store.close()


def test_restarts_older_than_an_hour_do_not_refuse(config: Path, probe: Probe) -> None:
    store = open_db(config)
    try:
        record_restarts(store, "dev", [61, 90, 30])
    finally:
        store.close()
    result = CliRunner().invoke(cli.app, ["--config", str(config), "run", "bounce"])
    assert result.exit_code == 0, result.stderr
    assert [name for name, _ in probe.calls] == ["t_note"]


@pytest.fixture
async def astore(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    wrapped = AsyncStore(opened)
    yield wrapped
    await wrapped.aclose()
    opened.close()


def limited(tmp_path: Path, limit: int) -> Settings:
    base = settings(tmp_path)
    target = base.targets[TARGET]
    policy = target.policy.model_copy(update={"max_restarts_per_hour": limit})
    return base.model_copy(update={"targets": {TARGET: target.model_copy(update={"policy": policy})}})


async def test_isolate_refuses_its_worst_case_before_its_first_probe(
    tmp_path: Path, astore: AsyncStore
) -> None:
    reporter = MemoryReporter()
    with fake_everywhere(astore) as fake:
        free = Engine(settings(tmp_path), astore, reporter, cache_dir=tmp_path / "cache")
        assert (await free.run("baseline", {}, target=TARGET, actor="cli:alice")).status == "succeeded"
        tried = await free.run(
            "try", {"changes": [METRICS.to_json()], "keep": "always"}, target=TARGET, actor="cli:alice"
        )
        assert tried.status == "succeeded", tried.summary
        await astore.run(record_restarts, astore.store, TARGET, [10, 5])
        before = len(fake.restarts)
        # one change: 2 probes at most (1 + settle) on top of 2 recorded: a limit of 3 cannot hold it
        engine = Engine(limited(tmp_path, 3), astore, reporter, cache_dir=tmp_path / "cache")
        outcome = await engine.run(
            "isolate", {"expect": ["max_running_requests>=48"]}, target=TARGET, actor="cli:alice"
        )
    assert outcome.status != "succeeded"
    assert "policy.max_restarts_per_hour = 3" in (outcome.summary or "")
    assert "the next restart is allowed at" in (outcome.summary or "")
    assert len(fake.restarts) == before  # no probe restarted anything
    found = await read_allowance(astore, TARGET, limit=3, needed=1)
    assert found.used == 2
