"""`flagbot restart` on the two-node testbed (real systemd, journald, sshd, sudo): a dry run
changes nothing; a restart stops and starts every rank on the same flags (no drop-in written),
waits for this invocation's readiness, reports the start's capacity, and counts one restart; a
frozen target refuses it. Modelled on test_try_failures.py (the shared booted testbed)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.store.experiments import list_steps
from bot.store.models import utcnow
from bot.store.records import evidence_of, restart_times
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, store_of, write_config
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")


def invocations(status: dict[str, object]) -> dict[str, object]:
    return {node["node"]: node["invocation"] for node in status["nodes"]}  # type: ignore[attr-defined, index]


@pytest.mark.usefixtures("on_baseline")
async def test_restart_restarts_every_rank_on_the_same_flags_and_reports_the_start(
    testbed: Testbed, tmp_path: Path
) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    _, before, _ = await flagbot_json(config, "status")
    assert before["health"] == 200

    code, dry, err = await flagbot_json(config, "restart", "--dry-run")
    assert code == 0 and dry["status"] == "succeeded", (dry, err)
    assert dry["summary"] == "dry run: the restart was planned, nothing changed on the target"
    _, unchanged, _ = await flagbot_json(config, "status")
    assert invocations(unchanged) == invocations(before)

    code, done, err = await flagbot_json(config, "restart")
    assert code == 0 and done["status"] == "succeeded", (done, err)
    _, after, _ = await flagbot_json(config, "status")
    assert after["health"] == 200 and after["flags"] == before["flags"]
    assert all(after_inv != invocations(before)[node] for node, after_inv in invocations(after).items())
    store = store_of(config)
    try:
        steps = {step.action: step for step in list_steps(store, done["experiment_id"])}
        evidence = [row.data for row in evidence_of(store, done["experiment_id"])]
        restarts = restart_times(store, "twin", since=utcnow() - timedelta(hours=1))
    finally:
        store.close()
    assert steps["await_start"].result["ready"] is True
    titles = [block.get("title") for block in evidence]
    assert "Restart plan" in titles and "Restarted" in titles
    assert any("max_running_requests" in str(block) for block in evidence)  # the start's capacity line
    assert len(restarts) == 1  # what policy.max_restarts_per_hour counts

    frozen, _, _ = await flagbot(config, "freeze", "reason=release", "until=1h")
    assert frozen == 0
    code, _, err = await flagbot(config, "restart")
    assert code == 1 and "twin is frozen: 'release'" in err
    assert (await flagbot(config, "unfreeze"))[0] == 0
