"""Answering a pending Keep / Revert (`policy.on_regression = "ask"`, `bot.app.ask`) on the
console and through the application layer against a real store: `flagbot keep ID` records the
change as kept (an audit row) and a second answer changes nothing and says so; `revert ID` of a
pending change records the Revert answer before its run (the loop's fake target layer,
tests/support/loop_fake_target.py), after which Keep is refused; `keep` of another target's
experiment, or of one with nothing pending, is refused and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.app.ask import AlreadyDecidedError, answer, keep_command
from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.app.playbooks import resolve_playbook
from bot.app.runs import run_playbook
from bot.commands import parse_command
from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.store import AsyncStore, Store
from bot.store.experiments import create_experiment, get_experiment, update_experiment
from bot.store.records import audit_events
from tests.component.loop.test_on_regression_policy import with_policy
from tests.component.loop.test_playbooks_cite_measurements import METRICS, fake_everywhere
from tests.support.cli_config import lab_config
from tests.support.loop_fake_target import START_FLAGS, TARGET
from tests.support.pending_decision import pending_state

OTHER = """[targets.other]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{host = "127.0.0.1", port = 9}}]
"""


def pending(store: Store, target: str = "lab") -> int:
    row = create_experiment(store, target=target, playbook="try", params={}, actor="cli:x")
    assert row.id is not None
    update_experiment(store, row.id, status="succeeded", verdict="regressed", state=pending_state())
    return row.id


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)
    return lab_config(tmp_path, after=OTHER)


def open_db(config: Path) -> Store:
    return Store.open(None, sqlite_path=config.parent / "state" / "flagbot.db")


def flagbot(config: Path, *words: str) -> object:
    return CliRunner().invoke(cli.app, ["--config", str(config), *words])


def test_keep_on_the_console_is_recorded_once(config: Path) -> None:
    store = open_db(config)
    experiment_id = pending(store)
    done = flagbot(config, "keep", str(experiment_id))
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    assert f"experiment #{experiment_id}: cli:" in done.output and "kept the change" in done.output  # type: ignore[attr-defined]
    row = get_experiment(store, experiment_id)
    assert row is not None and RunState.load(row.state).conclusion.kept is True
    again = flagbot(config, "keep", str(experiment_id))
    assert again.exit_code != 0  # type: ignore[attr-defined]
    assert "has no decision pending" in again.output and "nothing changed" in again.output  # type: ignore[attr-defined]
    assert [e.action for e in audit_events(store, "lab")] == ["keep"]
    store.close()


def test_keep_of_another_targets_experiment_is_refused_and_changes_nothing(config: Path) -> None:
    store = open_db(config)
    experiment_id = pending(store, "other")
    refused = flagbot(config, "keep", str(experiment_id))
    assert refused.exit_code == 2, refused.output  # type: ignore[attr-defined]
    assert f"ran on target other, not lab: `keep {experiment_id} target=other`" in refused.output  # type: ignore[attr-defined]
    row = get_experiment(store, experiment_id)
    assert row is not None and RunState.load(row.state).conclusion.kept is None
    assert audit_events(store, "other") == []
    store.close()


@pytest.fixture
async def astore(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    wrapped = AsyncStore(opened)
    yield wrapped
    await wrapped.aclose()
    opened.close()


async def test_a_revert_of_a_pending_change_answers_revert_and_keep_is_then_refused(
    tmp_path: Path, astore: AsyncStore
) -> None:
    settings = with_policy(tmp_path, "ask")
    ctx = AppContext(settings, astore)
    with fake_everywhere(astore) as fake:
        engine = Engine(settings, astore, MemoryReporter(), cache_dir=tmp_path / "cache")
        tried = await engine.run("try", {"changes": [METRICS.to_json()]}, target=TARGET, actor="cli:alice")
        assert fake.flags != START_FLAGS
        call = resolve_playbook(settings, parse_command(f"revert {tried.experiment_id} target={TARGET}"))
        reverted = await run_playbook(
            ctx, call, MemoryReporter(), actor="cli:bob", admin=False, restart_approved=True
        )
        assert reverted.outcome.status == "succeeded", reverted.outcome.summary
        assert fake.flags == START_FLAGS  # the normal revert ran
    row = await astore.run(get_experiment, astore.store, tried.experiment_id)
    assert row is not None
    conclusion = RunState.load(row.state).conclusion
    assert (conclusion.kept, conclusion.decided_by) == (False, "cli:bob")
    with pytest.raises(AlreadyDecidedError, match="nothing changed"):
        await keep_command(ctx, tried.experiment_id, TARGET, actor="cli:carol")
    with pytest.raises(AppError, match="keep or revert"):
        await answer(ctx, tried.experiment_id, "maybe", actor="cli:carol")
    events = await astore.run(audit_events, astore.store, TARGET)
    assert [(e.actor, e.action) for e in events if e.action in ("keep", "revert-decision")] == [
        ("cli:bob", "revert-decision")
    ]
