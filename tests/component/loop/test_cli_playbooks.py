"""`flagbot playbooks` and `flagbot run` in-process (the test actions are registered here), on SQLite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.loop import playbook as playbook_module
from bot.store import Store
from bot.store.leases import acquire
from tests.support.loop_actions import Probe

BOOK = """
name: b
description: two notes
mutating: true
params:
  label: {kind: text, required: true, help: what to write}
  value: {kind: choice, choices: [improved, regressed], default: improved}
steps:
  - {action: t_note, with: {label: $label, value: $value}}
  - {action: t_note, with: {label: done}}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Probe) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    monkeypatch.setattr(playbook_module, "BUILTIN_DIR", tmp_path / "no-builtins")
    books = tmp_path / "books"
    books.mkdir()
    (books / "b.yaml").write_text(BOOK, encoding="utf-8")
    db = tmp_path / "state" / "flagbot.db"
    store = Store.open(None, sqlite_path=db)
    store.upgrade()
    store.close()
    path = tmp_path / "flagbot.toml"
    path.write_text(
        f"""
playbook_dirs = ["{books}"]
default_target = "t1"
[database]
sqlite_path = "{db}"
[targets.t1]
unit = "sglang.service"
nodes = [{{host = "10.0.0.1"}}]
""",
        encoding="utf-8",
    )
    return path


def flagbot(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *args])
    return result.exit_code, result.stdout, result.stderr


def test_playbooks_lists_name_params_and_source(config: Path) -> None:
    code, out, _ = flagbot(config, "playbooks", "--json")
    assert code == 0
    [listed] = json.loads(out)["playbooks"]
    assert (listed["name"], listed["mutating"], listed["steps"]) == ("b", True, ["t_note", "t_note"])
    assert listed["source"] == str(config.parent / "books" / "b.yaml")
    assert [p["name"] for p in listed["params"]] == ["label", "value"]
    code, out, _ = flagbot(config, "playbooks")
    assert code == 0 and "label* (text)" in out and "two notes" in out


def test_run_runs_the_playbook_and_prints_the_outcome(config: Path, probe: Probe) -> None:
    code, out, err = flagbot(config, "run", "b", "label=first", "value=regressed", "--json")
    assert code == 0, err
    outcome = json.loads(out)
    assert (outcome["status"], outcome["verdict"], outcome["target"]) == ("succeeded", "regressed", "t1")
    assert outcome["reconciled"] == [] and len(outcome["steps"]) == 2
    assert probe.calls[0] == ("t_note", {"label": "first", "value": "regressed"})
    code, out, _ = flagbot(config, "run", "b", "label=again")
    assert code == 0 and "succeeded: improved" in out and "step 2 t_note: ok" in out


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["labl=x"], "error: playbook b: unknown parameter 'labl'; parameters: label, value\n"),
        ([], "error: playbook b: missing required parameter 'label' (what to write)\n"),
        (
            ["label=x", "value=maybe"],
            "error: playbook b: value='maybe': 'maybe' is not one of improved, regressed\n",
        ),
        (["label=x", "target=t9"], "error: unknown target 't9'; targets: t1\n"),
    ],
)
def test_usage_problems_exit_2_with_one_line(
    config: Path, probe: Probe, words: list[str], message: str
) -> None:
    code, _, err = flagbot(config, "run", "b", *words)
    assert (code, err) == (2, message)
    assert probe.calls == []


def test_an_unknown_playbook_exits_2(config: Path) -> None:
    code, _, err = flagbot(config, "run", "nope")
    assert (code, err) == (2, "error: no playbook 'nope'; playbooks: b\n")


def test_a_held_lease_exits_1_naming_the_holder(config: Path, tmp_path: Path, probe: Probe) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    acquire(store, "t1", holder="slack:bob", host="bot-1", pid=7, purpose="try", experiment_id=None)
    store.close()
    code, _, err = flagbot(config, "run", "b", "label=x")
    assert code == 1
    assert err.startswith("error: t1 is busy: held by slack:bob on bot-1 (pid 7) for try since ")
    assert probe.calls == []
