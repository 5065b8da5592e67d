"""`flagbot serve` shares SSH connections between sessions (bot/target/ssh_pool.py); a CLI command does not."""

from __future__ import annotations

import asyncio

from bot.target.ssh_pool import MAX_CHANNELS, RESERVED_CHANNELS, current_pool, pooled
from tests.unit.target.conftest import FakeTarget


async def _status_twice(fake: FakeTarget) -> list[object]:
    """Two commands, each in its own session (as two Slack commands are); their node-0 connections."""
    seen = []
    for _ in range(2):
        async with fake.open() as ts:
            await ts.each(lambda node: node.run("show", properties=["ActiveState"]))
            seen.append(await ts.node0.connection())
    return seen


async def test_without_a_pool_every_session_logs_in_and_closes(fake_target: FakeTarget) -> None:
    first, second = await _status_twice(fake_target)
    assert first is not second
    assert [node.logins for node in fake_target.nodes] == [2, 2]
    assert first.is_closed() and second.is_closed()  # type: ignore[attr-defined]


async def test_in_a_pool_sessions_share_one_login_per_node_until_the_pool_ends(
    fake_target: FakeTarget,
) -> None:
    async with pooled() as pool:
        first, second = await _status_twice(fake_target)
        assert first is second and not first.is_closed()  # type: ignore[attr-defined]
        assert [node.logins for node in fake_target.nodes] == [1, 1]
        assert len(pool) == 2
    assert first.is_closed()  # type: ignore[attr-defined]
    assert current_pool() is None


async def test_a_pooled_connection_that_broke_is_replaced_and_recorded(fake_target: FakeTarget) -> None:
    async with pooled():
        first, _ = await _status_twice(fake_target)
        first.abort()  # type: ignore[attr-defined]  # an idle cut
        async with fake_target.open() as ts:
            result = await ts.node0.run("show", properties=["ActiveState"])
            assert result.ok
            assert await ts.node0.connection() is not first
            assert len(ts.node0.reconnects) == 1  # found closed, or lost under the command and re-run
        assert fake_target.nodes[0].logins == 2


async def test_sessions_with_other_ssh_settings_do_not_share(fake_target: FakeTarget) -> None:
    async with pooled() as pool:
        async with fake_target.open() as ts:
            ours = await ts.node0.connection()
            other = fake_target.target.model_copy(
                update={"ssh": fake_target.target.ssh.model_copy(update={"sudo": False})}
            )
            from bot.target.session import TargetSession

            async with TargetSession.open("fake", other) as elsewhere:
                assert await elsewhere.node0.connection() is ours  # sudo is not part of the login
            renamed = fake_target.target.model_copy(
                update={"nodes": [n.model_copy(update={"user": "root"}) for n in fake_target.target.nodes]}
            )
            async with TargetSession.open("fake", renamed) as as_root:
                assert await as_root.node0.connection() is not ours  # another user is another login
        assert len(pool) == 2  # node 0 as ops, node 0 as root


async def test_sessions_sharing_a_connection_never_open_more_channels_than_sshd_allows(
    fake_target: FakeTarget,
) -> None:
    """sshd refuses channels beyond MaxSessions (10): a burst from several sessions waits for a slot."""
    node = fake_target.nodes[0]
    node.delay_s = 0.05
    async with pooled(), fake_target.open() as first, fake_target.open() as second:
        results = await asyncio.gather(
            *(
                session.node0.run("show", properties=["ActiveState"])
                for session in (first, second)
                for _ in range(3 * MAX_CHANNELS)
            )
        )
    assert all(result.ok for result in results)
    assert node.logins == 1
    assert node.peak == MAX_CHANNELS - RESERVED_CHANNELS  # reads: the rest is kept for writes


async def test_a_changed_known_hosts_file_closes_the_connections_verified_against_the_old_one(
    fake_target: FakeTarget,
) -> None:
    async with pooled():
        first, _ = await _status_twice(fake_target)
        known_hosts = fake_target.target.ssh.known_hosts
        known_hosts.write_text(known_hosts.read_text() + "\n")  # an operator edits the file
        async with fake_target.open() as ts:
            assert (await ts.node0.run("show", properties=["ActiveState"])).ok
            assert await ts.node0.connection() is not first
        assert first.is_closed()  # type: ignore[attr-defined]
        assert fake_target.nodes[0].logins == 2
