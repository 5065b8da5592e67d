"""Two tries at once, a cancel mid-restart, and a flagbot killed between apply and observe.

All through the CLI against the two-node testbed: the second try is refused naming the holder
and the experiment; a cancel stops the first at its next step boundary and restores the flags
it started from; a SIGKILLed try is reconciled by the next mutating command (resumed when the
target runs its flags and is healthy, rolled back otherwise), and the lease is released.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.store.experiments import latest_experiment, list_steps
from bot.store.leases import current
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, start, store_of, wait_for, write_config
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
METRICS = "--enable-metrics"


def step_running(config: Path, action: str) -> Any:
    """The newest try's id once its step `action` has started, else None."""
    store = store_of(config)
    try:
        row = latest_experiment(store, "twin", playbook="try")
        if row is None or row.id is None:
            return None
        started = [s for s in list_steps(store, row.id) if s.action == action]
        return row.id if started else None
    finally:
        store.close()


def lease(config: Path) -> Any:
    store = store_of(config)
    try:
        return current(store, "twin")
    finally:
        store.close()


def flag_names(status: dict[str, Any]) -> list[str]:
    return [item["flag"] for item in status["flags"]]


@pytest.mark.usefixtures("on_baseline")
async def test_a_second_try_is_refused_and_a_cancel_mid_restart_rolls_back(
    testbed: Testbed, tmp_path: Path
) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    first = await start(config, "try", METRICS, "keep=always", "--json")
    try:
        experiment = await wait_for(
            lambda: step_running(config, "await_start"), timeout=120, what="the restart"
        )
        code, _, err = await flagbot(config, "try", "--enable-cache-report")
        assert code == 1 and "busy: held by" in err and f"experiment #{experiment} (try)" in err, err
        code, cancelled, _ = await flagbot_json(config, "cancel")
        assert code == 0 and cancelled["ok"] and cancelled["experiment_id"] == experiment
        out, err_bytes = await first.communicate()
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    outcome = json.loads(out)
    assert first.returncode == 1 and outcome["status"] == "cancelled", (outcome, err_bytes.decode()[-2000:])
    assert any(step["action"] == "restore" and step["status"] == "ok" for step in outcome["steps"])
    code, status, _ = await flagbot_json(config, "status")
    assert status["health"] == 200 and METRICS not in flag_names(status)
    assert lease(config) is None


@pytest.mark.usefixtures("on_baseline")
async def test_a_try_killed_between_apply_and_observe_is_reconciled_by_the_next_command(
    testbed: Testbed, tmp_path: Path
) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    short = {"FLAGBOT_LEASE_TTL_S": "3"}
    doomed = await start(config, "try", METRICS, "keep=always", "--json", **short)
    try:
        experiment = await wait_for(
            lambda: step_running(config, "await_start"), timeout=120, what="the restart"
        )
    finally:
        doomed.kill()  # SIGKILL: no finally of flagbot's runs, the lease stays behind
        await doomed.wait()
    held = lease(config)
    assert held is not None and held.experiment_id == experiment
    await wait_for(lambda: (info := lease(config)) is not None and info.expired(), timeout=30, what="expiry")
    code, verified, err = await flagbot_json(config, "verify", "max_running_requests>=48", **short)
    assert code == 0 and verified["verdict"] == "pass", (verified, err)
    settled = verified["reconciled"]
    assert [item["experiment_id"] for item in settled] == [experiment], settled
    assert settled[0]["status"] in ("succeeded", "rolled-back"), settled
    code, status, _ = await flagbot_json(config, "status")
    assert status["health"] == 200
    if settled[0]["status"] == "succeeded":  # resumed: the kept change is on the target
        assert METRICS in flag_names(status)
    else:
        assert METRICS not in flag_names(status)
    assert lease(config) is None
    code, log, _ = await flagbot_json(config, "log")
    assert any(entry["ref"] == f"#{experiment}" for entry in log["entries"])
