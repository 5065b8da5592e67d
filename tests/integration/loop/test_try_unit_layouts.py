"""A `try` on the two unit layouts a real cluster uses besides one name everywhere (issue 20 item 2):
`sglang-head.service` on node 0 with `sglang-worker.service` on node 1, and one templated
`sglang@.service` (`--node-rank %i`) run as `sglang@0.service` and `sglang@1.service`.

Each layout boots its own testbed on the session's instance (the session's nodes are taken down
for it and booted again afterwards): the lab installs the twin's unit under the layout's names,
each node's sudoers file for the unit it runs, and a twin.toml naming the units as an operator
would. The try applies and restarts both nodes through their own units, and each node's sudo
allows exactly what runs there: its own unit's commands, never the other node's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.app.connect_check import connect_checks
from bot.config import load_settings
from bot.target.nodestate import node_state
from bot.target.sudoers import needed_commands
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import booted, flagbot, flagbot_json, write_config
from tests.integration.target.support_control import session_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

SUDOERS = Path("etc/sudoers.d/flagbot")
SYSTEM = Path("etc/systemd/system")


@pytest.fixture(scope="module", params=["head-worker", "template"])
def layout_bed(
    request: pytest.FixtureRequest, testbed: Testbed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Testbed]:
    """The session's instance booted with `request.param`'s unit layout; the session's own
    nodes are back up (and healthy) afterwards for the tests that follow."""
    testbed.down()
    bed = Testbed(
        testbed.instance,
        tmp_path_factory.mktemp("layout"),
        nodes=2,
        scenario="seed-gb10",
        unit_layout=request.param,
    )
    try:
        with booted(bed):
            yield bed
    finally:
        testbed.up(replace=True)
        testbed.wait_healthy(timeout=180)


def _rules(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


async def test_a_try_applies_and_restarts_each_node_through_its_own_unit(
    layout_bed: Testbed, tmp_path: Path
) -> None:
    bed = layout_bed
    units = [bed.unit(k) for k in range(2)]
    assert units[0] != units[1]
    config = write_config(bed, tmp_path)
    target = load_settings(config, required=True).targets["twin"]
    assert [target.unit_of(k) for k in range(2)] == units  # the config names them as an operator would

    # each node's sudoers file is the one `flagbot sudoers target=twin node=K` prints for it
    for k, unit in enumerate(units):
        code, printed, err = await flagbot(config, "sudoers", "target=twin", f"node={k}")
        assert code == 0, err
        assert f"# install on node {k} (ops@{bed.addresses[k]}:22) of twin only" in printed
        installed = (bed.layout.root(k) / SUDOERS).read_text()
        assert _rules(printed) == _rules(installed) and all(
            unit in line or "daemon-reload" in line for line in _rules(installed)
        )

    checks = await connect_checks(load_settings(config, required=True), cache_dir=tmp_path / "cache")
    assert [check.render() for check in checks if check.status == "fail"] == []
    shown = sorted(check.text.split(" ", 1)[0] for check in checks if check.check == "unit")
    assert shown == sorted(units)  # config check --connect names each node's own unit

    async with session_for(bed) as ts:
        before = [(await node_state(node)).invocation for node in ts.nodes]
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    _, tried, err = await flagbot_json(config, "try", "set", "--served-model-name=layout-try", "keep=always")
    assert tried["ok"] and tried["verdict"] != "failed-to-start", (tried, err)

    async with session_for(bed) as ts:
        after = [(await node_state(node)).invocation for node in ts.nodes]
        for k, node in enumerate(ts.nodes):
            other = units[1 - k]
            refused = await node.run("stop", unit=other, check=False)  # the other node's unit: not granted
            assert refused.exit_status != 0 and b"password is required" in refused.stderr, refused
            assert needed_commands(units[k]) == [
                " ".join(line.split()[3:]) for line in _rules((bed.layout.root(k) / SUDOERS).read_text())
            ]
    assert all(b and a and a != b for a, b in zip(after, before, strict=True)), (
        before,
        after,
    )  # both restarted
    for k, unit in enumerate(units):
        dropin = bed.layout.root(k) / SYSTEM / f"{unit}.d" / "50-flagbot.conf"
        assert "--served-model-name layout-try" in dropin.read_text()
        assert not (bed.layout.root(k) / SYSTEM / "sglang@.service.d").exists()  # never the template's

    async with httpx.AsyncClient() as client:
        models = (await client.get(f"{bed.base_url}/v1/models")).json()
    assert [model["id"] for model in models["data"]] == ["layout-try"]

    _, status, _ = await flagbot_json(config, "status")
    assert [node["unit"] for node in status["nodes"]] == units
