"""The dry run and preflight on the two-node testbed: SGLang's own resolution, no restart, table commands only."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.loop.knowledge import KnowledgeBase
from bot.loop.preflight import preflight
from bot.sglang.change import Change
from bot.target.dryrun import dry_run
from bot.target.flaglist import python_of
from bot.target.nodestate import node_state
from bot.target.session import TargetSession
from bot.target.table_match import identify
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target import support

pytestmark = pytest.mark.asyncio(loop_scope="session")
store, ts = support.store, support.ts  # fixtures used by this module
AR = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"
UNIT = "sglang-qwen.service"


async def test_the_hosts_sglang_resolves_the_seed_flags_without_a_restart(ts: TargetSession) -> None:
    view = await read_unit(ts.node0)
    python = python_of(view.prefix)
    assert python is not None
    before = await node_state(ts.node0)
    result = await dry_run(ts.node0, python=python, argv=[*view.flags.argv(), AR, MOE])
    assert result.ok, result
    args = result.server_args or {}
    assert (
        args["enable_fused_moe_sum_all_reduce"] is True and args["enable_flashinfer_allreduce_fusion"] is True
    )
    assert args["node_rank"] == 0 and args["tp_size"] == 2
    refused = await dry_run(ts.node0, python=python, argv=[*view.flags.argv(), "--bogus-flag"])
    assert refused.available and refused.exit_status == 2
    assert refused.error == "sglang serve: error: unrecognized arguments: --bogus-flag"
    after = await node_state(ts.node0)
    assert after.invocation == before.invocation and after.active == "active"


async def test_preflight_of_the_seeds_change_on_the_gb10_pair(testbed: Testbed, tmp_path: Path) -> None:
    sent: list[str] = []
    target = support.target_of(testbed)
    async with TargetSession.open("twin", target, audit=lambda node, text: sent.append(text)) as session:
        report = await preflight(
            session,
            changes=[Change("add", AR), Change("add", MOE)],
            kb=KnowledgeBase.load(),
            observations=[],
            cache_dir=tmp_path,
        )
    assert report.ok, report.refused
    assert report.compute_capability == "12.1" and report.sglang_version == "0.5.10"
    assert [gate.flag for gate in report.gates] == [AR]
    assert report.dry_run is not None and report.dry_run.ok
    assert report.dry_run_current is not None and report.dry_run_current.ok
    assert "enable_fused_moe_sum_all_reduce" not in report.implied_changes  # requested, not implied
    assert f"{AR} {MOE}" in report.dropin_diff
    assert all(identify(text, unit=UNIT) for text in sent)
    assert not any(text.startswith("sudo") for text in sent)
