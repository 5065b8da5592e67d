"""`wait=DURATION` on the console: a busy target is waited for, and at the deadline the command
gives up with exit 1 and a message saying so (with `--json`, as a JSON error); a bad `wait=` on
`run` (free options, checked in the app layer) is a usage error naming the rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from bot.store.leases import acquire
from tests.support.cli_config import lab_config


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)

    def busy(store: Store) -> None:  # another run holds the target
        acquire(store, "lab", holder="slack:bob", host="bot-1", pid=7, purpose="try", experiment_id=None)

    return lab_config(tmp_path, prepare=busy)


def flagbot(config: Path, *words: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *words])
    return result.exit_code, result.stdout, result.stderr


def test_a_busy_target_without_wait_is_refused_pointing_at_wait(config: Path) -> None:
    code, _, err = flagbot(config, "restart")
    assert code == 1
    assert "lab is busy: held by slack:bob" in err and "wait=DURATION waits for it" in err


def test_wait_gives_up_at_its_deadline_with_exit_1(config: Path) -> None:
    code, _, err = flagbot(config, "restart", "wait=1s")
    assert code == 1
    assert "error: gave up waiting 1 s (wait=) for the target: lab is busy: held by slack:bob" in err


def test_wait_giving_up_under_json_is_a_json_error(config: Path) -> None:
    code, out, _ = flagbot(config, "restart", "wait=1s", "--json")
    document = json.loads(out)
    assert code == 1 and document["ok"] is False and document["kind"] == "failed"
    assert document["error"].startswith("gave up waiting 1 s (wait=)")


@pytest.mark.parametrize(("value", "rule"), [("soon", "not a duration"), ("9h", "at most 4h")])
def test_a_bad_wait_on_run_is_a_usage_error(config: Path, value: str, rule: str) -> None:
    code, _, err = flagbot(config, "run", "restart", f"wait={value}")
    assert code == 2
    assert f"wait={value}: {rule}" in err
