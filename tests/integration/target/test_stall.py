"""A start that hangs silently in its weight load on node 1 (the twin's `hang_in` effect, on a
flag the test adds a rule for) is reported as stalled there, by the configured bound, and rolled
back (issue 21 item 5). Without the stall bound it would wait out `timeouts.ready`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.config.schema import TargetTimeouts
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore
from bot.target.observe import observe
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.rollback import ensure_ready
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.loop.scenario_switch import scenario_patched
from tests.integration.target import support

pytestmark = pytest.mark.asyncio(loop_scope="session")
baseline_after, store = support.baseline_after, support.store  # fixtures used by this module
HANGS = "--weight-loader-disable-mmap"
BOUND_S = 15
"""Longer than the healthy silence of node 1's weight load on the testbed (52 s × startup_scale
0.1 between `Load weight begin` and `Load weight end`, its only lines there), far below `ready`."""


def hang_node_1_in_weight_load(document: dict[str, Any]) -> None:
    """A rule for `HANGS`: a start with it stops in its weight load on node 1 (engine/hangs.py)."""
    template = document["flags"][0]
    rule = {
        **template,
        "when": [{"flag": HANGS, "field": "weight_loader_disable_mmap"}],
        "effect": {**template["side_effects"], "hang_in": "weight_load", "hang_node": 1},
        "requires": None,
    }
    document["flags"] = [*document["flags"], rule]


@pytest_asyncio.fixture(loop_scope="session")
async def ts(testbed: Testbed, store: AsyncStore) -> AsyncIterator[TargetSession]:
    """The testbed's target with `timeouts.stall_weight_load` set to `BOUND_S`, as a config would."""
    target = support.target_of(testbed)
    timeouts = TargetTimeouts.model_validate(
        {**target.timeouts.model_dump(), "stall_weight_load": f"{BOUND_S}s"}
    )
    async with TargetSession.open(
        "twin", target.model_copy(update={"timeouts": timeouts}), store=store
    ) as session:
        yield session


async def test_a_weight_load_hang_on_node_1_is_reported_as_a_stall_and_rolled_back(
    ts: TargetSession, testbed: Testbed, tmp_path: Path, baseline_after: None
) -> None:
    baseline = await observe(ts, cache_dir=tmp_path)
    assert baseline.known_good
    view = await read_unit(ts.node0)
    changed = FlagSet((*view.flags.items, FlagItem(HANGS)))
    with scenario_patched(testbed, hang_node_1_in_weight_load):
        report = await apply_and_restart(ts, flags_for_nodes(changed, len(ts.nodes)), reason="test: a stall")
        previous = {node.node: node.old_invocation for node in report.nodes}
        outcome = await ensure_ready(ts, previous=previous, timeout=600, cache_dir=tmp_path)
    failure = outcome.readiness.failure
    assert failure is not None, outcome.readiness.to_json()
    assert (failure.reason, failure.stage) == ("stall", "weight_load"), failure.to_json()
    node1 = ts.nodes[1].name
    assert failure.node == node1
    assert failure.message.startswith(f"stalled in weight load on node 1 ({node1})")
    assert "Load weight begin" in failure.message  # the last line node 1 wrote
    result = outcome.rollback
    assert result is not None and result.ok, result.to_json() if result else None
    assert result.trigger == "failed-start" and result.snapshot_id == baseline.snapshot_id
    assert result.evidence[0].to_json()["text"].startswith("stalled in weight load on node 1")
