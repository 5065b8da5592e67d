"""`flagbot status` and `flagbot checks` over every target (the CLI app, a real SQLite file):
with several targets configured, `status` is one line per target and a target that cannot be
reached is its own line, not a failed command; `checks` counts the checks by target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from tests.support.schedule import concluded_check


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """`lab` and `other`, both behind a closed port (1 s to give up), and one check of `lab`."""
    targets = "".join(
        f'[targets.{name}]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[targets.{name}.ssh]\nknown_hosts = "{tmp_path / "known_hosts"}"\nconnect_timeout = "1s"\n'
        for name in ("lab", "other")
    )
    path = tmp_path / "flagbot.toml"
    path.write_text(
        f'default_target = "lab"\n{targets}[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
    )
    (tmp_path / "known_hosts").write_text("")
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    store.upgrade()
    concluded_check(store)
    store.close()
    return path


def flagbot(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def _json(text: str) -> Any:
    return json.loads(text)


@pytest.mark.parametrize("words", [["status"], ["status", "target=all"]])
def test_status_without_a_target_is_the_fleet_and_a_target_down_is_its_line(
    config: Path, words: list[str]
) -> None:
    code, out = flagbot(config, *words, "--json")
    document = _json(out)
    assert code == 1 and document["ok"] is False  # not every target was read: the table still comes
    assert [row["target"] for row in document["targets"]] == ["lab", "other"]
    assert {row["reachable"] for row in document["targets"]} <= {"unreachable", "not connected"}
    assert document["unreachable"] == ["lab", "other"]
    assert document["targets"][0]["checks"]["scheduled"] == 1
    assert document["targets"][0]["last_experiment"]["playbook"] == "try"

    code, shown = flagbot(config, *words)
    assert code == 1
    assert "2 targets, 2 not reached" in shown and "other" in shown and "1 scheduled" in shown


def test_status_of_one_target_is_still_its_own_status(config: Path) -> None:
    code, out = flagbot(config, "status", "target=other", "--json")
    assert code == 1 and "targets" not in out  # one target's status: an error line, no table


def test_checks_lists_every_check_with_the_counts_by_target(config: Path) -> None:
    code, out = flagbot(config, "checks", "--json")
    document = _json(out)
    assert code == 0 and [row["target"] for row in document["checks"]] == ["lab"]
    assert document["by_target"]["lab"]["scheduled"] == 1
    assert document["by_target"]["other"] == {
        "scheduled": 0,
        "overdue": 0,
        "failed": 0,
        "paused": 0,
        "next_due": None,
    }
    code, shown = flagbot(config, "checks")
    assert code == 0 and "Checks by target" in shown
