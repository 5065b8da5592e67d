"""`flagbot bench rerun=ID` from a terminal (issue 22, item 2): the experiment's stored after-set
decides the profile and levels and is the set compared with; contradicting words are refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.bench_repo import save_set
from bot.store.experiments import create_experiment, update_experiment
from bot.store.models import MeasurementSet
from tests.component.test_cli import flagbot
from tests.component.test_cli_bench_lease import closed_port, configure, sets


@pytest.fixture(autouse=True)
def _sqlite_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)


def test_bench_rerun_names_the_after_set_it_compares_with(tmp_path: Path) -> None:
    env, store = configure(tmp_path, closed_port())  # the load fails at once: nothing listens
    try:
        after = save_set(store, MeasurementSet(target="twin", profile="small", params={"concurrency": [1]}))
        row = create_experiment(store, target="twin", playbook="try", params={}, actor="x")
        assert row.id is not None and after.set.id is not None
        state = {"schema_version": 2, "after": {"set_id": after.set.id}, "restart": {"applied": True}}
        update_experiment(store, row.id, status="succeeded", state=state)

        refused = flagbot("bench", f"rerun={row.id}", "profile=small", cwd=tmp_path, env=env)
        assert refused.returncode == 2, refused.stderr
        assert "rerun= re-runs the experiment's own benchmark" in refused.stderr
        assert "drop profile=" in refused.stderr

        missing = flagbot("bench", "rerun=999", cwd=tmp_path, env=env)
        assert missing.returncode == 1 and "error: no experiment #999" in missing.stderr, missing.stderr

        ran = flagbot("bench", f"rerun={row.id}", cwd=tmp_path, env=env)
        said = f"re-running the benchmark of experiment #{row.id}: compared with set #{after.set.id} "
        assert said + f"(the after-set of experiment #{row.id})" in ran.stderr, ran.stderr
        assert [s.label for s in sets(store) if s.id != after.set.id] == [f"re-run of experiment #{row.id}"]
    finally:
        store.close()
