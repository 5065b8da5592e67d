"""`flagbot hypothesis|log|baseline show|cancel` read and write the store without touching a host.

The target in the config points at a closed port: none of these commands may contact it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.store import Store
from bot.store.experiments import create_experiment, update_experiment
from bot.store.observations import add_observation, list_observations

FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
    )
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    store.upgrade()
    store.close()
    return path


def run(config: Path, *args: str) -> tuple[int, Any, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    done = subprocess.run(
        [FLAGBOT, "--config", str(config), *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def test_the_hypothesis_log_round_trip(config: Path) -> None:
    code, added, _ = run(
        config,
        "hypothesis",
        "add",
        "--enable-fused-moe-sum-all-reduce costs KV memory",
        "max_running_requests>=48",
    )
    assert code == 0
    hypothesis = added["hypothesis"]
    assert hypothesis["status"] == "open" and hypothesis["variable"] == "--enable-fused-moe-sum-all-reduce"
    assert hypothesis["expectations"] == ["max_running_requests>=48"]
    code, listed, _ = run(config, "hypothesis", "list", "status=open")
    assert [h["id"] for h in listed["hypotheses"]] == [hypothesis["id"]]
    code, closed, _ = run(
        config, "hypothesis", "close", str(hypothesis["id"]), "confirmed", "because=isolate #4"
    )
    assert code == 0 and closed["hypothesis"]["status"] == "confirmed"
    code, listed, _ = run(config, "hypothesis", "list", "status=open")
    assert listed["hypotheses"] == []
    code, shown, _ = run(config, "hypothesis", "show", str(hypothesis["id"]))
    assert shown["hypothesis"]["because"] == "isolate #4" and shown["experiments"] == []
    code, _, err = run(config, "hypothesis", "show", "999")
    assert code == 1 and "no hypothesis #999" in err
    code, log, _ = run(config, "log")
    assert [entry["kind"] for entry in log["entries"]] == ["hypothesis"]
    assert "confirmed" in log["entries"][0]["text"]


def test_baseline_show_without_one_says_how_to_pin(config: Path) -> None:
    code, shown, _ = run(config, "baseline")
    assert code == 1 and "baseline pin" in shown["lines"][0]


def test_cancel_records_a_request_only_for_a_running_experiment(config: Path, tmp_path: Path) -> None:
    code, _, err = run(config, "cancel")
    assert code == 1 and "nothing is running on lab" in err
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    try:
        row = create_experiment(store, target="lab", playbook="try", params={}, actor="test")
        assert row.id is not None
        update_experiment(store, row.id, status="running")
    finally:
        store.close()
    code, cancelled, _ = run(config, "cancel")
    assert code == 0 and cancelled["experiment_id"] == row.id and "cancel requested" in cancelled["lines"][0]
    code, again, _ = run(config, "cancel", str(row.id))
    assert again["experiment_id"] == row.id


def test_a_hypothesis_names_its_variable_and_the_log_has_a_window(config: Path) -> None:
    code, added, _ = run(
        config,
        "hypothesis",
        "add",
        "the fusion is a no-op here",
        "variable=--enable-flashinfer-allreduce-fusion",
    )
    assert code == 0 and added["hypothesis"]["variable"] == "--enable-flashinfer-allreduce-fusion"
    code, recent, _ = run(config, "log", "since=1h")
    assert [entry["ref"] for entry in recent["entries"]] == [f"H{added['hypothesis']['id']}"]
    code, _, err = run(config, "log", "since=soon")
    assert code == 2 and "since" in err


def test_knowledge_forget_retracts_a_fact_from_the_cli_and_refuses_without_a_reason(
    config: Path, tmp_path: Path
) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    try:
        fact = add_observation(
            store, flag="--enable-metrics", kind="culprit", text="isolate: x", target="lab"
        )
    finally:
        store.close()

    code, _, err = run(config, "knowledge", "forget", str(fact.id))
    assert code == 1 and "needs a reason" in err
    code, listed, _ = run(config, "knowledge")
    assert code == 0 and [row[0] for row in listed["tables"][0]["rows"]] == [str(fact.id)]

    code, forgot, _ = run(
        config, "knowledge", "forget", str(fact.id), "because=never measured"
    )  # as the shell passes it
    assert code == 0 and "retracted" in forgot["lines"][0], forgot
    code, listed, _ = run(config, "knowledge")
    assert code == 0 and listed["tables"][0]["rows"] == []
    code, log, _ = run(config, "log")
    assert any("[retracted by cli:" in entry["text"] for entry in log["entries"]), log
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    try:
        assert list_observations(store) == []
        [kept] = list_observations(store, retracted=True)
        assert kept.retracted_because == "never measured"
    finally:
        store.close()
