"""The change rules through the CLI (`flagbot try`, `flagbot run`), in-process, on SQLite.

The console acts as an admin (bot/app/change_rights.py: the CLI has no RBAC), so it may change a
protected flag unless the target refuses them outright, and it is refused a start-up variable,
a deny-listed one or one outside the allow-list like everyone. A refusal is exit 2 with the rule
named, before anything is stored or sent (the target here is a closed port: nothing may reach it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from bot.store.experiments import list_experiments
from tests.support.loop_actions import Probe

TUNE = """
name: tune
description: take flag changes, write a note
mutating: true
params:
  changes: {kind: changes, required: true, help: the changes}
steps:
  - {action: t_note, with: {label: tuned}}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probe: Probe) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    books = tmp_path / "books"
    books.mkdir()
    (books / "tune.yaml").write_text(TUNE, encoding="utf-8")
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
env_admin_allow = ["LD_LIBRARY_PATH"]
[targets.prod]
unit = "sglang.service"
nodes = [{{host = "127.0.0.1", port = 9}}]
[targets.prod.policy]
require_approval = true
protected_flags_mode = "refuse"
""",
        encoding="utf-8",
    )
    return path


def flagbot(config: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), *args])
    return result.exit_code, result.stdout, result.stderr


def experiments(config: Path) -> int:
    store = Store.open(None, sqlite_path=config.parent / "state" / "flagbot.db")
    try:
        return sum(len(list_experiments(store, target)) for target in ("dev", "prod"))
    finally:
        store.close()


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (
            ("env", "set", "LD_PRELOAD=/tmp/x.so"),
            "LD_PRELOAD changes how a process starts (sudo's env_delete: LD_*)",
        ),
        (
            ("env", "set", "BASH_ENV=/tmp/x"),
            "BASH_ENV changes how a process starts (sudo's env_delete: BASH_ENV)",
        ),
        (
            ("env", "set", "PYTHONWARNINGS=x"),
            "PYTHONWARNINGS changes how a process starts (python3 --help-env",
        ),
        (
            ("env", "set", "NCCL_NET_PLUGIN=/tmp/x.so"),
            "NCCL_NET_PLUGIN is on flagbot's environment deny-list",
        ),
        (("env", "set", "HF_HUB_OFFLINE=1"), "HF_HUB_OFFLINE is not in policy.env_allow of target dev"),
        (("env", "unset", "PYTHONPATH"), "PYTHONPATH changes how a process starts"),
    ],
)
def test_try_and_its_dry_run_refuse_a_variable_before_anything_runs(
    config: Path, words: tuple[str, ...], says: str
) -> None:
    for dry in ((), ("--dry-run",)):
        code, _, err = flagbot(config, "try", *words, *dry)
        assert code == 2, err
        assert says in err and err.startswith("error: ")
    assert experiments(config) == 0


def test_run_of_a_playbook_with_changes_is_held_to_the_same_rules(config: Path, probe: Probe) -> None:
    code, _, err = flagbot(config, "run", "tune", "changes=env set LD_PRELOAD=/tmp/x.so")
    assert code == 2 and "LD_PRELOAD changes how a process starts" in err
    assert probe.calls == [] and experiments(config) == 0
    code, out, err = flagbot(config, "run", "tune", "changes=env set NCCL_DEBUG=INFO", "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "succeeded" and probe.calls == [
        ("t_note", {"label": "tuned", "value": None})
    ]


def test_the_console_is_an_admin_for_protected_flags_and_admin_entries(config: Path, probe: Probe) -> None:
    for change in ("changes=set --model-path /models/other", "changes=env set LD_LIBRARY_PATH=/opt/lib"):
        code, _, err = flagbot(config, "run", "tune", change, "target=dev")
        assert code == 0, (change, err)
    assert experiments(config) == 2


def test_a_target_that_refuses_protected_flags_refuses_the_console_too(config: Path, probe: Probe) -> None:
    expected = (
        "`--api-key` is a protected flag of target prod (policy.protected_flags, "
        'protected_flags_mode = "refuse"): flagbot does not change it; edit the unit instead'
    )
    code, _, err = flagbot(config, "run", "tune", "changes=add --api-key=${SGLANG_API_KEY}", "target=prod")
    assert code == 2 and expected in err
    code, _, err = flagbot(config, "try", "set", "--model-path", "/m", "target=prod", "--dry-run")
    assert code == 2 and "`--model-path` is a protected flag of target prod" in err
    code, _, err = flagbot(config, "run", "tune", "changes=set --tp-size 4", "target=prod")
    assert code == 0, err  # a flag that is not protected goes ahead
    assert probe.calls == [("t_note", {"label": "tuned", "value": None})]


@pytest.mark.parametrize(
    "breaker", ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
)
def test_every_line_break_in_a_value_is_refused_with_its_name(config: Path, breaker: str) -> None:
    for words in (
        ("env", "set", f"NCCL_DEBUG=INFO{breaker}ActiveState=failed"),
        ("set", "--served-model-name", f"a{breaker}b"),
    ):
        code, _, err = flagbot(config, "try", *words, "--dry-run")
        assert code == 2, err
        assert "a line break; a value must be one line" in err
    assert experiments(config) == 0
