"""`flagbot revert ID` acts only on the experiment's own target: a production experiment named
with `target=dev` (or with dev the default) is refused with exit 2 before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from bot.store.experiments import create_experiment, list_experiments, update_experiment
from bot.store.leases import current

CONFIG = """
default_target = "dev"
[database]
sqlite_path = "{db}"
[targets.dev]
unit = "sglang.service"
nodes = [{{host = "10.0.0.1"}}]
[targets.prod]
unit = "sglang.service"
nodes = [{{host = "10.0.0.2"}}]
[targets.prod.policy]
require_approval = true
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Store, int]:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    db = tmp_path / "state" / "flagbot.db"
    store = Store.open(None, sqlite_path=db)
    store.upgrade()
    row = create_experiment(store, target="prod", playbook="try", params={}, actor="slack:U1")
    assert row.id is not None
    update_experiment(store, row.id, status="succeeded", state={"conclusion": {"kept": True}})
    path = tmp_path / "flagbot.toml"
    path.write_text(CONFIG.format(db=db), encoding="utf-8")
    return path, store, row.id


@pytest.mark.parametrize("words", [["{id}", "target=dev"], ["{id}"], ["{id}", "--force"]])
def test_a_revert_of_another_targets_experiment_exits_2_and_runs_nothing(
    setup: tuple[Path, Store, int], words: list[str]
) -> None:
    config, store, experiment_id = setup
    args = [word.format(id=experiment_id) for word in words]
    result = CliRunner().invoke(cli.app, ["--config", str(config), "revert", *args])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr == (
        f"error: experiment #{experiment_id} ran on target prod, not dev: a revert acts only on the "
        f"experiment's own target (`revert {experiment_id} target=prod`)\n"
    )
    assert list_experiments(store, "dev") == [] and current(store, "dev") is None
    assert [row.playbook for row in list_experiments(store, "prod")] == ["try"]
    store.close()


def test_run_revert_is_checked_the_same_way(setup: tuple[Path, Store, int]) -> None:
    config, store, experiment_id = setup
    result = CliRunner().invoke(cli.app, ["--config", str(config), "run", "revert", f"what={experiment_id}"])
    assert result.exit_code == 2 and "ran on target prod, not dev" in result.stderr, result.stderr
    assert list_experiments(store, "dev") == []
    store.close()
