"""`flagbot checks` (the CLI app, a real SQLite file) and `/flagbot checks` (`checks_answer`).

The target points at a closed port: `checks run` must record that it could not look (an
`error` run, the state unchanged) instead of failing without a trace.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot import main as cli
from bot.commands import parse_command
from bot.slack.dispatch import checks_answer
from bot.slack.services import SlackServices
from bot.store import AsyncStore, Store
from bot.store.checks import check_runs, get_check, list_checks
from bot.store.records import audit_events
from bot.target.evidence import TableBlock, TextBlock
from tests.support.schedule import T0, concluded_check, settings


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        'default_target = "lab"\n[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        f'[targets.lab.ssh]\nknown_hosts = "{tmp_path / "known_hosts"}"\nconnect_timeout = "2s"\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
    )
    store = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    store.upgrade()
    concluded_check(store, due_at=T0 + timedelta(minutes=10))
    concluded_check(store, due_at=T0 + timedelta(hours=24), after=timedelta(hours=24))
    store.close()
    return path


def flagbot(config: Path, *args: str) -> tuple[int, Any, str]:
    """`flagbot --config CONFIG checks ARGS --json`, in this process; (exit code, JSON, stderr)."""
    result = CliRunner().invoke(cli.app, ["--config", str(config), "checks", *args, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr


def test_list_pause_resume_run_and_delete_from_the_cli(config: Path) -> None:
    code, listed, _ = flagbot(config, "list")
    assert code == 0 and [row["id"] for row in listed["checks"]] == [1, 2]
    first = listed["checks"][0]
    assert (first["status"], first["after"], first["last_result"]) == ("scheduled", "10m", None)
    assert first["next_run"] == (T0 + timedelta(minutes=10)).isoformat()

    assert flagbot(config, "pause", "1")[0] == 0
    code, listed, _ = flagbot(config)
    assert listed["checks"][0]["status"] == "paused" and listed["checks"][0]["next_run"] is None
    code, _, err = flagbot(config, "pause", "1")
    assert code == 0
    assert flagbot(config, "resume", "#1")[1]["lines"][0].startswith("check #1 scheduled; it runs at")

    code, ran, _ = flagbot(config, "run", "2")  # the target is unreachable: recorded as an error
    assert code == 1 and ran["run"]["result"] == "error" and not ran["run"]["changed"]
    assert "could not look at lab" in ran["run"]["summary"]
    store = Store.open(f"sqlite:///{config.parent / 'flagbot.db'}")
    try:
        assert [r.result for r in check_runs(store, 2)] == ["error"]
        assert get_check(store, 2).status == "scheduled"  # type: ignore[union-attr]  (a run now is not its scheduled run)
        assert flagbot(config, "delete", "2")[0] == 0
        assert [c.id for c in list_checks(store)] == [1]
        actions = [event.action for event in audit_events(store, "lab")]
        assert actions[:4] == ["check-delete", "check-run", "check-resume", "check-pause"]
    finally:
        store.close()
    code, _, err = flagbot(config, "resume", "2")
    assert code == 1 and "no check #2" in err
    code, _, err = flagbot(config, "pause")
    assert code == 2 and "needs ID" in err


async def test_slack_checks_lists_and_pauses(tmp_path: Path) -> None:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    check = concluded_check(sync)
    services = SlackServices(settings(tmp_path), AsyncStore(sync))
    try:
        listed = await checks_answer(services, parse_command("checks"), "U1")
        table = next(block for block in listed if isinstance(block, TableBlock))
        assert table.rows[0][:5] == (f"#{check.id}", "lab", f"#{check.experiment_id}", "10m", "scheduled")
        paused = await checks_answer(services, parse_command(f"checks pause {check.id}"), "U1")
        assert isinstance(paused[0], TextBlock) and "paused" in paused[0].text
        assert (await services.store.run(get_check, sync, check.id or 0)).status == "paused"  # type: ignore[union-attr]
        assert (await services.store.run(audit_events, sync, "lab"))[0].actor == "slack:U1"
        missing = await checks_answer(services, parse_command("checks delete 99"), "U1")
        assert missing == [TextBlock("checks delete: no check #99")]
    finally:
        await services.store.aclose()
