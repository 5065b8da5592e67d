"""`status` shows each node's own unit: a head/worker layout names both services (issue 20 item 2)."""

from __future__ import annotations

from pathlib import Path

from bot.app.status import status_of
from bot.target.session import TargetSession
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving


async def test_status_reads_and_shows_each_nodes_own_unit(tmp_path: Path) -> None:
    units = ["sglang-head.service", "sglang-worker.service"]
    fakes = [FakeNode(FakeSystemd(rank=k, unit=unit)) for k, unit in enumerate(units)]
    async with serving(tmp_path, fakes) as fake:
        worker = fake.target.nodes[1].model_copy(update={"unit": units[1]})
        target = fake.target.model_copy(update={"unit": units[0], "nodes": [fake.target.nodes[0], worker]})
        async with TargetSession.open("fake", target) as ts:
            found = await status_of(ts)
    shown = found.to_json()
    assert shown["unit"] == "sglang-head.service"
    assert [(node["unit"], node["active"]) for node in shown["nodes"]] == [
        ("sglang-head.service", "active"),
        ("sglang-worker.service", "active"),
    ]
