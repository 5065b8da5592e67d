"""`flagbot predict` on a twin start stored as `observe` stores it: the CLI, the real SQLite store,
the application layer and the capacity model, end to end (issue 23 item 1). Nothing listens at
the target (`lab` is port 9): predict must not need it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.store import Store
from tests.support.cli_config import lab_config
from tests.support.twin_start import twin_scenario, twin_snapshot


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The seeds' deployment (seed-gb10: hybrid, EAGLE, extra buffer) observed once."""
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    scenario = twin_scenario("seed-gb10")

    def prepare(store: Store) -> None:
        store.add(twin_snapshot("lab", scenario))

    return lab_config(tmp_path, prepare=prepare)


def run(config: Path, *words: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.app, ["--config", str(config), "predict", *words])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def figures(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in document["prediction"]["figures"]}


def test_a_change_is_predicted_from_the_stored_start_with_its_steps(seeded: Path) -> None:
    code, out, _err = run(seeded, "set", "--mem-fraction-static", "0.7", "--json")
    assert code == 0
    document = json.loads(out)
    found = figures(document)
    assert found["max_running_requests"]["today"] == 48
    assert found["max_total_num_tokens"]["value"] < found["max_total_num_tokens"]["today"]
    assert (
        found["max_total_num_tokens"]["low"]
        <= found["max_total_num_tokens"]["value"]
        <= found["max_total_num_tokens"]["high"]
    )
    steps = document["prediction"]["steps"]
    assert {"rest memory", "max_mamba_cache_size", "max_total_num_tokens", "max_running_requests"} <= {
        s["name"] for s in steps
    }
    assert all("SGLang 0.5.10" in s["source"] for s in steps)
    assert "no history yet" in document["prediction"]["band"]


def test_an_expectation_predicted_to_fail_for_sure_says_fail_and_exits_1(seeded: Path) -> None:
    code, out, _err = run(seeded, "add", "--max-running-requests", "64", "max_running_requests>=48")
    assert code == 1
    assert "fail (confident)" in out
    assert "_resolve_max_num_reqs" in out
    assert "nothing was changed" in out


def test_a_flag_the_model_does_not_compute_is_unknown_needs_a_restart(seeded: Path) -> None:
    code, out, _err = run(seeded, "add", "--enable-fused-moe-sum-all-reduce", "--json")
    assert code == 0
    document = json.loads(out)
    assert "needs a restart" in document["lines"][1]
    assert all("unknown" in f for f in document["prediction"]["figures"])


def test_an_unknown_flag_is_refused_by_the_grammar(seeded: Path) -> None:
    code, _out, err = run(seeded, "add", "--no-such-flag")
    assert code == 2
    assert "unknown flag --no-such-flag" in err


def test_a_target_never_observed_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    code, _out, err = run(lab_config(tmp_path), "set", "--mem-fraction-static=0.85")
    assert code == 1
    assert "no start of lab with its memory lines observed yet" in err


def test_predict_changes_nothing_in_the_store(seeded: Path) -> None:
    run(seeded, "set", "--mem-fraction-static", "0.7")
    store = Store.open(None, sqlite_path=seeded.parent / "state" / "flagbot.db")
    try:
        assert len(store.snapshots("lab")) == 1
    finally:
        store.close()
