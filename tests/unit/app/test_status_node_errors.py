"""`status` names a node flagbot could not connect to for a reason on its own side (a host key
known_hosts does not hold) as `not connected`, not `unreachable` (issue 20 item 5)."""

from __future__ import annotations

from pathlib import Path

from bot.app.status import status_of
from bot.target.session import TargetSession
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import make_target, serving


async def test_a_node_missing_from_known_hosts_is_not_connected_and_a_stopped_one_unreachable(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, [FakeNode(FakeSystemd(rank=k)) for k in range(3)]) as fake:
        ports = [node.port for node in fake.nodes]
        only_first = tmp_path / "first_only_known_hosts"
        line = (fake.keys.directory / "known_hosts").read_text().splitlines()[0]
        only_first.write_text(line + "\n")
        target = make_target(fake.keys, ports, known_hosts=only_first)
        await fake.nodes[2].stop()
        async with TargetSession.open("fake", target) as ts:
            found = await status_of(ts)
    by_node = {node.node: node.to_json() for node in found.nodes}
    assert by_node[f"127.0.0.1:{ports[0]}"]["active"] == "active"
    assert by_node[f"127.0.0.1:{ports[1]}"]["kind"] == "not connected"
    assert (
        f"ssh.known_hosts {only_first} has no entry for [127.0.0.1]:{ports[1]}"
        in (by_node[f"127.0.0.1:{ports[1]}"]["error"])
    )
    assert by_node[f"127.0.0.1:{ports[2]}"]["kind"] == "unreachable"
