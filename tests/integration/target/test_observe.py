"""Observe on the two-node testbed: the baseline snapshot, and the seeds' case (parsed 48, effective 26)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.known_good import known_good
from bot.target.observe import observe
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.rollback import ensure_ready
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target import support
from tests.integration.target.support import truth_start

pytestmark = pytest.mark.asyncio(loop_scope="session")
baseline_after, store, ts = support.baseline_after, support.store, support.ts  # fixtures used by this module
FUSED = "--enable-fused-moe-sum-all-reduce"


async def test_the_baseline_snapshot_matches_the_twins_truth(
    ts: TargetSession, testbed: Testbed, tmp_path: Path
) -> None:
    obs = await observe(ts, cache_dir=tmp_path)
    assert obs.healthy and obs.known_good and obs.snapshot_id is not None
    assert (obs.capacity["parsed_max_running_requests"], obs.effective["max_running_requests"]) == (48, 48)
    assert obs.capacity["server_info_effective_per_dp"] == [48] and obs.capacity["agree"]
    assert obs.sglang_version == "0.5.10" and obs.flag_list["source"] in ("host --help", "cache")
    assert obs.flag_list["flags"] >= 354
    assert {gpu["name"] for gpus in obs.gpus.values() for gpu in gpus} == {"NVIDIA GB10"} and len(
        obs.gpus
    ) == 2
    assert obs.node_mismatch == {testbed.addresses[1]: {}}
    truth = truth_start(testbed)
    assert truth is not None
    assert set(obs.implied) | set(obs.derived) == set(truth["implied"])
    assert obs.effective["max_total_num_tokens"] == truth["effective"]["max_total_num_tokens"]
    assert 0 < obs.startup["ready_s"] < 60 and obs.startup["weight_load_s"] > 0
    assert obs.journal["command"].startswith(f"journalctl _SYSTEMD_INVOCATION_ID={obs.invocation} ")
    good = await ts.store.run(known_good, ts.store.store, ts.name)  # type: ignore[union-attr]
    assert good is not None and good.id == obs.snapshot_id and good.ready


async def test_the_fused_moe_flag_shows_parsed_48_next_to_effective_26(
    ts: TargetSession, testbed: Testbed, tmp_path: Path, baseline_after: None
) -> None:
    view = await read_unit(ts.node0)
    flags = FlagSet((*view.flags.items, FlagItem(FUSED)))
    report = await apply_and_restart(
        ts, flags_for_nodes(flags, len(ts.nodes)), reason="test: the seeds' flag"
    )
    previous = {node.node: node.old_invocation for node in report.nodes}
    outcome = await ensure_ready(ts, previous=previous, timeout=120, cache_dir=tmp_path, promote=False)
    assert outcome.readiness.ready and outcome.rollback is None
    obs = outcome.observation
    assert obs is not None and obs.healthy and not obs.known_good
    assert obs.requested[-1] == {"flag": FUSED, "value": None}
    assert obs.capacity["parsed_max_running_requests"] == 48
    assert obs.capacity["log_max_running_requests"] == 26
    assert obs.capacity["server_info_effective_per_dp"] == [26]
    assert any("differs from the parsed 48" in note for note in obs.capacity["notes"])
    table = obs.evidence[0].to_json()
    assert table["rows"][0] == ["max_running_requests", "48", "26", "26"]
    assert "enable_fused_moe_sum_all_reduce" not in obs.implied  # requested, not implied
    truth = truth_start(testbed)
    assert truth is not None and truth["effective"]["max_running_requests"] == 26
    assert obs.effective["max_total_num_tokens"] == truth["effective"]["max_total_num_tokens"]
    snapshot = (await ts.store.run(ts.store.store.snapshots, ts.name))[0]  # type: ignore[union-attr]
    assert (
        snapshot.effective["parsed_max_running_requests"] == 48
        and snapshot.effective["max_running_requests"] == 26
    )
    assert snapshot.effective["readiness"]["outcome"] == "ready"
    assert outcome.readiness.timings["total_s"] < 60
