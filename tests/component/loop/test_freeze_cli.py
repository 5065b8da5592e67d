"""`flagbot freeze` / `unfreeze` / `restart` on the console against a real store: a frozen target
refuses `restart` and `rollback` before anything runs (exit 1, the reason, who and until when),
`unfreeze` lifts it; `restart` over `policy.max_restarts_per_hour` is refused with the next allowed
time; an unknown target is refused (exit 2); `restart --dry-run` runs on the fake target layer
(tests/support/loop_fake_target.py) and restarts nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from bot.store.experiments import list_experiments
from bot.store.models import utcnow
from bot.store.records import FREEZE_ACTION, RESTART_ACTION, UNFREEZE_ACTION, audit, audit_events
from tests.support.cli_config import lab_config
from tests.support.loop_fake_target import faked_target


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    return lab_config(tmp_path, after="[targets.lab.policy]\nmax_restarts_per_hour = 1\n")


def open_db(config: Path) -> Store:
    return Store.open(None, sqlite_path=config.parent / "state" / "flagbot.db")


def flagbot(config: Path, *words: str) -> object:
    return CliRunner().invoke(cli.app, ["--config", str(config), *words])


def test_a_frozen_target_refuses_restart_and_rollback_on_the_cli_until_unfreeze(config: Path) -> None:
    frozen = flagbot(config, "freeze", "reason=change window", "until=2h", "--json")
    assert frozen.exit_code == 0, frozen.stderr
    document = json.loads(frozen.stdout)
    assert document["freeze"]["reason"] == "change window" and document["freeze"]["by"].startswith("cli:")
    for words in (["restart"], ["rollback"], ["run", "restart"]):
        refused = flagbot(config, *words)
        assert refused.exit_code == 1, (words, refused.stderr)
        assert "(it restarts lab) refused: lab is frozen: 'change window' (set by cli:" in refused.stderr
        assert "`unfreeze` lifts it" in refused.stderr
    lifted = flagbot(config, "unfreeze")
    assert lifted.exit_code == 0 and "lab is no longer frozen by cli:" in lifted.stdout
    store = open_db(config)
    try:
        actions = [row.action for row in audit_events(store, "lab")]
        assert actions[:2] == [UNFREEZE_ACTION, FREEZE_ACTION]
        assert list_experiments(store, "lab") == []
    finally:
        store.close()


def test_freeze_without_a_reason_is_a_usage_error(config: Path) -> None:
    result = flagbot(config, "freeze", "until=2h")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: freeze needs reason=TEXT")


def test_restart_refuses_an_unknown_target_and_a_spent_restart_budget(config: Path) -> None:
    unknown = flagbot(config, "restart", "target=nope")
    assert unknown.exit_code == 2 and "unknown target 'nope'; targets: lab" in unknown.stderr
    store = open_db(config)
    try:
        row = audit(store, actor="flagbot", target="lab", action=RESTART_ACTION)
        row.at = utcnow() - timedelta(minutes=20)
        store.add(row)
    finally:
        store.close()
    spent = flagbot(config, "restart")
    assert spent.exit_code == 1, spent.stderr
    when = f"{row.at + timedelta(hours=1):%Y-%m-%d %H:%M:%S} UTC"
    assert spent.stderr.startswith("error: lab: `restart` needs 1 restart and the target had 1 restart")
    assert f"the next restart is allowed at {when}" in spent.stderr


def test_restart_dry_run_on_the_cli_changes_nothing(config: Path) -> None:
    store = open_db(config)
    try:
        with faked_target(store) as fake:
            result = flagbot(config, "restart", "--dry-run", "--json")
    finally:
        store.close()
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["status"] == "succeeded"
    assert document["summary"] == "dry run: the restart was planned, nothing changed on the target"
    assert fake.restarts == []
