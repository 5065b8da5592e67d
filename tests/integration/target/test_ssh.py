"""SSH to real nodes: reused connections, host-key refusal, timeouts that kill, a link that goes down."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncssh
import pytest

from bot.target.errors import CommandTimeout, HostKeyError, UnreachableError
from flagbot_lab.testbed import Testbed, cgroups
from tests.integration.target.support_control import CONNECT_S, on_baseline, session_for  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")


def node_fingerprint(bed: Testbed, k: int) -> str:
    key = asyncssh.read_public_key(str(bed.layout.root(k) / "etc/ssh/ssh_host_ed25519_key.pub"))
    return str(key.get_fingerprint("sha256"))


def followers(bed: Testbed, k: int) -> list[str]:
    """`journalctl --follow` processes running on node k (found through its cgroup)."""
    found = []
    for pid in cgroups.pids(bed.layout.node_cgroup(k)):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cmdline.startswith("journalctl") and "--follow" in cmdline:
            found.append(cmdline)
    return found


async def wait_no_followers(bed: Testbed, k: int, within: float = 3.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := followers(bed, k)) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return left


async def test_one_connection_per_node_is_reused(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        first = await ts.node0.run("show", properties=["ActiveState"])
        conn = await ts.node0.connection()
        again = [await ts.node0.run("show", properties=["ActiveState"]) for _ in range(5)]
        assert await ts.node0.connection() is conn  # the same login each time, not a new handshake
    assert first.text.strip() == "ActiveState=active"
    assert all(r.text == first.text for r in again)


async def test_a_host_key_mismatch_is_refused_with_the_offered_fingerprint(
    testbed: Testbed, tmp_path: Path
) -> None:
    lines = testbed.known_hosts.read_text().splitlines()
    keys = [line.split(" ", 1)[1] for line in lines]
    swapped = tmp_path / "swapped_known_hosts"
    swapped.write_text(f"{testbed.addresses[0]} {keys[1]}\n{testbed.addresses[1]} {keys[0]}\n")
    async with session_for(testbed, known_hosts=swapped) as ts:
        with pytest.raises(HostKeyError) as caught:
            await ts.nodes[1].run("cat")
    assert caught.value.host == testbed.addresses[1]
    assert caught.value.fingerprint == node_fingerprint(testbed, 1)
    assert node_fingerprint(testbed, 1) in str(caught.value)

    unknown = tmp_path / "empty_known_hosts"
    unknown.write_text("")
    async with session_for(testbed, known_hosts=unknown) as ts:
        with pytest.raises(HostKeyError, match=node_fingerprint(testbed, 0).replace("+", r"\+")):
            await ts.node0.run("cat")


async def test_a_timed_out_command_is_killed_on_the_node(testbed: Testbed) -> None:
    """OpenSSH leaves a process running when only the channel closes; flagbot signals it."""
    async with session_for(testbed) as ts:
        with pytest.raises(CommandTimeout):
            await ts.nodes[1].run("journal-follow", output="cat", lines=1, timeout=1.0)
        assert await wait_no_followers(testbed, 1) == []
        assert (await ts.nodes[1].run("show", properties=["ActiveState"])).ok  # connection still fine


async def test_closing_a_stream_ends_the_remote_follower(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        stream = ts.node0.stream("journal-follow", output="cat", lines=3)
        first = await stream.__anext__()
        assert first
        assert followers(testbed, 0)
        await stream.aclose()
        assert await wait_no_followers(testbed, 0) == []


@pytest.mark.usefixtures("on_baseline")
async def test_a_node_whose_link_is_down_fails_in_bounded_time(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        await ts.nodes[1].run("cat")
        testbed.set_link(1, False)
        try:
            started = time.monotonic()
            with pytest.raises(UnreachableError) as caught:
                await ts.nodes[1].run("cat")
            assert time.monotonic() - started < CONNECT_S + 9
            assert caught.value.host == testbed.addresses[1]
            assert (await ts.node0.run("show", properties=["ActiveState"])).ok  # node 0 untouched
        finally:
            testbed.set_link(1, True)
        assert (await ts.nodes[1].run("cat")).ok  # reconnected lazily
