"""`flagbot status|observe|grep|rollback` as a user runs them, against the two-node testbed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flagbot_lab.testbed import Testbed
from tests.integration.target import support
from tests.support.processes import run_flagbot

pytestmark = pytest.mark.asyncio(loop_scope="session")
baseline_after, store, ts = support.baseline_after, support.store, support.ts  # fixtures used by this module


@pytest.fixture
def config(testbed: Testbed, tmp_path: Path) -> Path:
    """The testbed's own config with a database of this test's."""
    path = tmp_path / "flagbot.toml"
    path.write_text(
        testbed.config_path.read_text() + f'\n[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
    )
    return path


async def flagbot(config: Path, *args: str) -> tuple[int, str, str]:
    return await run_flagbot(config, *args, timeout=180)


async def flagbot_json(config: Path, *args: str) -> tuple[int, Any]:
    code, out, err = await flagbot(config, *args, "--json")
    assert "Traceback" not in err, err
    return code, json.loads(out)


async def test_status_observe_and_grep(config: Path, testbed: Testbed) -> None:
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    code, status = await flagbot_json(config, "status")
    assert code == 0 and status["health"] == 200
    assert [node["active"] for node in status["nodes"]] == ["active", "active"]
    assert status["known_good_snapshot_id"] is None
    code, observed = await flagbot_json(config, "observe")
    assert code == 0 and observed["healthy"] and observed["known_good"]
    assert observed["capacity"]["parsed_max_running_requests"] == 48
    assert observed["effective"]["max_running_requests"] == 48
    code, status = await flagbot_json(config, "status", "--target", "twin")
    assert status["known_good_snapshot_id"] == observed["snapshot_id"]
    assert status["latest_snapshot"]["effective_max_running_requests"] == 48
    code, found = await flagbot_json(config, "grep", "fired up", "lines=5")
    assert code == 0 and found["scope"] == "this"
    node0 = found["results"][0]
    assert node0["count"] == 1 and node0["command"].startswith("journalctl INVOCATION_ID=")
    code, out, _ = await flagbot(config, "grep", "fired up")
    assert code == 0 and "1 line(s) match 'fired up'" in out and node0["command"] in out
    code, _, _ = await flagbot(config, "grep", "no such text anywhere")
    assert code == 1
    code, out, _ = await flagbot(config, "observe")
    assert code == 0 and "Capacity: parsed vs effective" in out and "max_running_requests" in out


async def test_usage_errors_are_one_line(config: Path) -> None:
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    code, _, err = await flagbot(config, "status", "target=nope")
    assert code == 2 and err.startswith("error: unknown target 'nope'") and "Traceback" not in err
    code, _, err = await flagbot(config, "grep", "x", "scope=since")
    assert code == 2 and "since=DURATION" in err
    code, _, err = await flagbot(config, "grep", "x", "scope=everywhere")
    assert code == 2 and "scope" in err


async def test_rollback_on_demand_leaves_the_target_healthy(config: Path, baseline_after: None) -> None:
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    assert (await flagbot_json(config, "observe"))[0] == 0
    code, result = await flagbot_json(config, "rollback")
    assert code == 0 and result["ok"] and result["trigger"] == "on-demand"
    assert (
        result["observation"]["healthy"] and result["observation"]["effective"]["max_running_requests"] == 48
    )
    assert result["readiness"]["outcome"] == "ready"
