"""Per-node units in the command table: each node's commands, drop-in and sudoers name its own unit.

The fake nodes (`fake_node.FakeNode`) accept only the table's commands for their own unit, as
the generated sudoers file does: a command naming another node's unit is refused there."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.schema import Node, Target
from bot.target.dropin import DropinSpec, write_dropin
from bot.target.params import ParamError, dropin_path, unit_name
from bot.target.session import TargetSession
from bot.target.sudoers import needed_commands, target_sudoers
from bot.target.unit import read_unit
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import serving

HEAD_WORKER = {
    "unit": "sglang-head.service",
    "nodes": [{"host": "a"}, {"host": "b", "unit": "sglang-worker.service"}],
}


def test_every_node_command_names_that_nodes_unit() -> None:
    session = TargetSession.build("gb", Target.model_validate(HEAD_WORKER))
    assert [node.unit for node in session.nodes] == ["sglang-head.service", "sglang-worker.service"]
    assert [node.render("stop").argv[-1] for node in session.nodes] == [
        "sglang-head.service",
        "sglang-worker.service",
    ]
    assert session.nodes[1].render("journal-grep", pattern="x").argv[2] == "sglang-worker.service"
    assert (
        session.nodes[1].render("write-dropin").argv[-1]
        == "/etc/systemd/system/sglang-worker.service.d/50-flagbot.conf"
    )
    assert session.unit == "sglang-head.service"


def test_a_templated_units_dropin_is_the_instances_never_the_templates() -> None:
    session = TargetSession.build(
        "gb", Target(unit="sglang@.service", nodes=[Node(host="a"), Node(host="b")])
    )
    written = [node.render("write-dropin").argv[-1] for node in session.nodes]
    assert written == [
        "/etc/systemd/system/sglang@0.service.d/50-flagbot.conf",
        "/etc/systemd/system/sglang@1.service.d/50-flagbot.conf",
    ]
    assert session.nodes[1].render("unit-property", bus_property="ExecStart").argv[4] == (
        "/org/freedesktop/systemd1/unit/sglang_401_2eservice"
    )
    with pytest.raises(ParamError, match="is a template"):
        unit_name("sglang@.service")


def test_sudoers_is_one_file_per_login_and_unit_saying_which_nodes() -> None:
    head, worker = target_sudoers("gb", Target.model_validate(HEAD_WORKER))
    assert (head.nodes, head.unit, worker.nodes, worker.unit) == (
        (0,),
        "sglang-head.service",
        (1,),
        "sglang-worker.service",
    )
    assert "# install on node 1 (flagbot@b:22) of gb only, as /etc/sudoers.d/flagbot" in worker.text
    assert "sglang-head.service" not in worker.text and "sglang-worker.service" not in head.text
    (same,) = target_sudoers("gb", Target(unit="sglang.service", nodes=[Node(host="a"), Node(host="b")]))
    assert same.nodes == (0, 1) and "node 0 (flagbot@a:22), node 1 (flagbot@b:22) of gb" in same.text
    (only,) = target_sudoers("gb", Target.model_validate(HEAD_WORKER), node=1)
    assert only.unit == "sglang-worker.service"
    with pytest.raises(ParamError, match="gb has nodes 0 to 1, not 2"):
        target_sudoers("gb", Target.model_validate(HEAD_WORKER), node=2)


@pytest.mark.parametrize(
    ("target_unit", "own", "units"),
    [
        (
            "sglang-head.service",
            [None, "sglang-worker.service"],
            ["sglang-head.service", "sglang-worker.service"],
        ),
        ("sglang@.service", [None, None], ["sglang@0.service", "sglang@1.service"]),
    ],
)
async def test_a_dropin_write_and_restart_reach_each_nodes_own_unit(
    tmp_path: Path, target_unit: str, own: list[str | None], units: list[str]
) -> None:
    """Each fake node has only its own unit and grants only its sudoers lines."""
    fakes = [FakeNode(FakeSystemd(rank=k, unit=unit)) for k, unit in enumerate(units)]
    async with serving(tmp_path, fakes) as fake:
        nodes = [
            node.model_copy(update={"unit": unit}) for node, unit in zip(fake.target.nodes, own, strict=True)
        ]
        target = fake.target.model_copy(update={"unit": target_unit, "nodes": nodes})
        async with TargetSession.open("fake", target) as ts:
            for node in ts.nodes:
                view = await read_unit(node)
                await write_dropin(
                    node, ts.ledger, DropinSpec([*view.exec_argv, "--mem-fraction-static", "0.8"])
                )
                await node.run("stop")
                await node.run("start")
            other = ts.nodes[0].render("stop", unit=units[1]).argv  # what a shared unit name would run
            refused = await ts.nodes[0].run("stop", unit=units[1], check=False)
            assert refused.exit_status == 127, other  # node 0 has no such unit: not its table command
    for fake_node, unit in zip(fakes, units, strict=True):
        assert str(dropin_path(unit)) in fake_node.systemd.files
        assert "--mem-fraction-static 0.8" in fake_node.systemd.files[str(dropin_path(unit))]
        assert fake_node.sudo_grants is None  # the node granted exactly needed_commands(its unit)
        assert not any(
            path.startswith("/etc/systemd/system/sglang@.service.d") for path in fake_node.systemd.files
        )
    assert needed_commands(units[0]) != needed_commands(units[1])
