"""A broken custom playbook breaks only itself, on the CLI: the built-in `try` and `revert` still
run, `flagbot playbooks` lists the broken file with its error, running it by name answers with
that error, and a command that loads playbooks tells the error once on stderr (issue 22 item 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.app.playbooks import PlaybookCall
from bot.cli import playbooks as cli_playbooks
from bot.loop.playbook import BUILTIN_DIR
from bot.store import Store

GOOD = "name: greet\ndescription: a good custom playbook\nmutating: true\nsteps: [{action: heal}, {action: observe_now}]\n"
BROKEN = "name: tpyo\ndescription: a typo in a step\nsteps:\n  - action: snapshott\n"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    books = tmp_path / "books"
    books.mkdir()
    (books / "greet.yaml").write_text(GOOD, encoding="utf-8")
    (books / "tpyo.yaml").write_text(BROKEN, encoding="utf-8")
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
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[PlaybookCall]:
    """The runs the CLI would start (nothing reaches a host: the call is recorded instead)."""
    seen: list[PlaybookCall] = []

    def execute(config: object, call: PlaybookCall, *, json_output: bool) -> tuple[int, dict[str, Any]]:
        seen.append(call)
        return 0, {}

    monkeypatch.setattr(cli_playbooks, "execute_playbook", execute)
    return seen


def flagbot(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *args])
    return result.exit_code, result.stdout, result.stderr


def test_try_and_revert_still_run_and_the_error_is_told_once(config: Path, calls: list[PlaybookCall]) -> None:
    code, _, err = flagbot(config, "try", "env", "set", "NCCL_DEBUG=INFO", "--dry-run")
    assert code == 0, err
    code, _, err2 = flagbot(config, "revert")
    assert code == 0, err2
    assert [(c.book.name, c.book.source) for c in calls] == [
        ("try", BUILTIN_DIR / "try.yaml"),
        ("revert", BUILTIN_DIR / "revert.yaml"),
    ]
    assert calls[0].params["dry_run"] is True
    told = f"warning: playbook not loaded (the others are): {config.parent / 'books' / 'tpyo.yaml'}: step 1"
    # one process runs both commands here: the error is told by the first and not again
    assert err.count(told) == 1 and told not in err2


def test_playbooks_lists_the_broken_file_with_its_error(config: Path) -> None:
    code, out, err = flagbot(config, "playbooks", "--json")
    assert code == 0, err
    listed = json.loads(out)["playbooks"]
    names = [item["name"] for item in listed if not item.get("broken")]
    assert {"try", "revert", "greet"} <= set(names)
    [broken] = [item for item in listed if item.get("broken")]
    assert broken["name"] == "tpyo" and broken["source"] == str(config.parent / "books" / "tpyo.yaml")
    assert "step 1 (snapshott): unknown action" in broken["error"]
    code, out, _ = flagbot(config, "playbooks")
    assert code == 0 and "BROKEN, not loaded" in out and "greet" in out


def test_running_the_broken_playbook_answers_with_its_load_error(
    config: Path, calls: list[PlaybookCall]
) -> None:
    code, _, err = flagbot(config, "run", "tpyo")
    assert code == 2
    assert "error: playbook 'tpyo' did not load: " in err and "unknown action" in err
    assert calls == []
