"""A diverged target healed by `flagbot reconcile`, and a start that is not ready in time rolled back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore, Store
from bot.target.observe import observe
from bot.target.restart import RestartError, apply_and_restart, flags_for_nodes
from bot.target.rollback import ensure_ready
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target import support
from tests.integration.target.support_control import on_baseline, target_for  # noqa: F401
from tests.integration.target.test_cli_target import flagbot_json

pytestmark = pytest.mark.asyncio(loop_scope="session")
baseline_after, store, ts = support.baseline_after, support.store, support.ts  # fixtures used by this module
DEBUG = FlagItem("--log-level", "debug")


def _freeze_node1_at_stop(testbed: Testbed) -> Callable[[str, str], None]:
    fired: list[bool] = []

    def audit(node: str, text: str) -> None:
        if node == testbed.addresses[1] and "systemctl stop" in text and not fired:
            fired.append(True)
            testbed.set_frozen(1, True)

    return audit


@pytest.mark.usefixtures("on_baseline")
async def test_reconcile_brings_a_thawed_node_back_with_the_intended_flags(
    testbed: Testbed, tmp_path: Path
) -> None:
    database = tmp_path / "flagbot.db"
    config = tmp_path / "flagbot.toml"
    config.write_text(testbed.config_path.read_text() + f'\n[database]\nsqlite_path = "{database}"\n')
    sync = Store.open(f"sqlite:///{database}")
    sync.upgrade()
    astore = AsyncStore(sync)
    try:
        target = target_for(testbed)
        async with TargetSession.open(
            "twin", target, store=astore, audit=_freeze_node1_at_stop(testbed)
        ) as session:
            view = await read_unit(session.node0)
            flags = flags_for_nodes(FlagSet((*view.flags.items, DEBUG)), len(session.nodes))
            try:
                with pytest.raises(RestartError, match="diverged"):
                    await apply_and_restart(session, flags)
            finally:
                testbed.set_frozen(1, False)
    finally:
        await astore.aclose()
    code, status = await flagbot_json(config, "status")
    assert status["diverged"]["nodes"] == [testbed.addresses[1]]
    code, healed = await flagbot_json(config, "reconcile")
    assert code == 0 and healed["ok"], healed
    assert healed["diverged_nodes"] == [testbed.addresses[1]]
    assert healed["restart"]["phase"] == "reconciled"
    assert healed["start"]["observation"]["health"] == 200
    assert any(block["title"] == "Reconciled" for block in healed["evidence"])
    code, status = await flagbot_json(config, "status")
    assert status["diverged"] is None and status["health"] == 200
    async with TargetSession.open("twin", target_for(testbed)) as session:
        views = [await read_unit(node) for node in session.nodes]
    assert [view.flags for view in views] == flags
    code, again = await flagbot_json(config, "reconcile")
    assert code == 0 and again["diverged_nodes"] == [] and "not diverged" in again["evidence"][0]["text"]


async def test_a_start_not_ready_within_the_timeout_is_rolled_back(
    ts: TargetSession, tmp_path: Path, baseline_after: None
) -> None:
    baseline = await observe(ts, cache_dir=tmp_path)
    assert baseline.known_good
    view = await read_unit(ts.node0)
    report = await apply_and_restart(
        ts, flags_for_nodes(FlagSet((*view.flags.items, DEBUG)), len(ts.nodes)), reason="test: slow start"
    )
    previous = {node.node: node.old_invocation for node in report.nodes}
    outcome = await ensure_ready(ts, previous=previous, timeout=1.0, cache_dir=tmp_path)
    assert outcome.readiness.outcome == "timeout" and outcome.observation is None
    result = outcome.rollback
    assert result is not None and result.trigger == "not-ready" and result.ok, result and result.to_json()
    assert result.snapshot_id == baseline.snapshot_id
    assert result.failed is not None and result.failed["reason"] == "timeout", result.failed
    assert result.observation is not None and result.observation.effective["max_running_requests"] == 48
    assert DEBUG.flag not in str(result.observation.requested)
