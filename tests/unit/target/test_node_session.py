"""NodeSession against in-process SSH servers: table-only commands, EOF, errors, timeouts, host keys."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncssh
import pytest

from bot.config.schema import Node
from bot.target.errors import CommandFailed, CommandTimeout, HostKeyError, UnreachableError
from bot.target.privileged import ParamError
from bot.target.session import TargetSession
from bot.target.ssh import NodeSession
from bot.target.table_match import identify
from tests.unit.target.conftest import FakeTarget, make_target


async def test_run_reuses_one_connection_and_fills_the_unit(fake_target: FakeTarget) -> None:
    async with TargetSession.open("fake", fake_target.target) as ts:
        first = await ts.node0.run("show", properties=["ActiveState"])
        conn = await ts.node0.connection()
        second = await ts.node0.run("show", properties=["ActiveState", "SubState"])
        assert await ts.node0.connection() is conn
    assert first.text == "ActiveState=active\n"
    assert second.text == "ActiveState=active\nSubState=running\n"
    assert second.argv_shell == "systemctl show sglang-qwen.service -p ActiveState,SubState"
    assert second.exit_status == 0 and second.duration_s < 1


async def test_privileged_commands_get_sudo_and_input_gets_eof(fake_target: FakeTarget) -> None:
    async with TargetSession.open("fake", fake_target.target) as ts:
        result = await ts.nodes[1].run("write-dropin", input="[Service]\n")
    assert result.argv_shell == (
        "sudo -n /usr/bin/tee /etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf"
    )
    assert result.stdout == b"[Service]\n"  # tee echoed it: it saw EOF and finished
    assert fake_target.nodes[1].systemd.files[fake_target.nodes[1].systemd.dropin] == "[Service]\n"


async def test_there_is_no_raw_command_api(fake_target: FakeTarget) -> None:
    async with TargetSession.open("fake", fake_target.target) as ts:
        with pytest.raises(ParamError, match="no node command"):
            await ts.node0.run("rm -rf /")
        with pytest.raises(ParamError, match="takes no parameter"):
            await ts.node0.run("cat", path="/etc/shadow")
        with pytest.raises(ParamError, match="reads no input"):
            await ts.node0.run("cat", input="x")
        with pytest.raises(ParamError, match="properties"):
            await ts.node0.run("show", properties=["ExecStart; rm -rf /"])
    assert fake_target.received == []  # refused before anything reached the host


async def test_failed_command_raises_with_the_result(fake_target: FakeTarget) -> None:
    fake_target.nodes[0].fail["daemon-reload"] = "sudo: a password is required\n"
    async with TargetSession.open("fake", fake_target.target) as ts:
        with pytest.raises(CommandFailed) as caught:
            await ts.node0.run("daemon-reload")
        unchecked = await ts.node0.run("daemon-reload", check=False)
    assert caught.value.sudo_refused
    assert "sudo -n /usr/bin/systemctl daemon-reload" in str(caught.value)
    assert caught.value.host == ts.node0.name
    assert unchecked.exit_status == 1


async def test_timeout_signals_the_remote_process(fake_target: FakeTarget) -> None:
    fake_target.nodes[0].hang.add("journal")
    async with TargetSession.open("fake", fake_target.target) as ts:
        started = time.monotonic()
        with pytest.raises(CommandTimeout, match=r"did not finish within 0\.3 s"):
            await ts.node0.run("journal", timeout=0.3)
        assert time.monotonic() - started < 2
        assert fake_target.nodes[0].signals == ["TERM"]
        # the connection is still good for the next command
        assert (await ts.node0.run("show", properties=["ActiveState"])).ok


async def test_stream_yields_and_terminates_on_close(fake_target: FakeTarget) -> None:
    fake_target.nodes[0].systemd.journal = ["line one", "line two"]
    async with TargetSession.open("fake", fake_target.target) as ts:
        chunks = [chunk async for chunk in ts.node0.stream("journal", output="cat")]
        assert b"".join(chunks) == b"line one\nline two\n"
        fake_target.nodes[0].hang.add("journal-follow")
        stream = ts.node0.stream("journal-follow", output="cat")
        reader = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.1)  # let the remote side start hanging
        reader.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reader
        await stream.aclose()
    assert fake_target.nodes[0].signals == ["TERM"]


async def test_unknown_host_key_is_refused_with_the_fingerprint(
    fake_target: FakeTarget, tmp_path: Path
) -> None:
    other = tmp_path / "other_known_hosts"
    fake_target.keys.known_hosts([fake_target.nodes[1].port, fake_target.nodes[0].port], path=other)
    target = make_target(fake_target.keys, [n.port for n in fake_target.nodes], known_hosts=other)
    offered = fake_target.keys.host_keys[0].get_fingerprint("sha256")
    async with TargetSession.open("fake", target) as ts:
        with pytest.raises(HostKeyError) as caught:
            await ts.node0.run("cat")
    assert caught.value.fingerprint == offered
    assert offered in str(caught.value) and ts.node0.name in str(caught.value)
    assert fake_target.received == []


async def test_missing_known_hosts_file_is_refused(fake_target: FakeTarget, tmp_path: Path) -> None:
    target = make_target(
        fake_target.keys, [n.port for n in fake_target.nodes], known_hosts=tmp_path / "absent"
    )
    async with TargetSession.open("fake", target) as ts:
        with pytest.raises(HostKeyError, match="does not exist"):
            await ts.node0.run("cat")


async def test_unreachable_node_names_the_host(fake_target: FakeTarget) -> None:
    port = fake_target.nodes[1].port
    await fake_target.nodes[1].stop()
    async with TargetSession.open("fake", fake_target.target) as ts:
        with pytest.raises(UnreachableError) as caught:
            await ts.nodes[1].run("cat")
    assert caught.value.host == f"127.0.0.1:{port}"


async def test_jump_host_tunnel(fake_target: FakeTarget, tmp_path: Path) -> None:
    """A jump host relays the connection (direct-tcpip); the node's key is still verified."""
    keys = fake_target.keys
    jump_key = asyncssh.generate_private_key("ssh-ed25519")

    class Jump(asyncssh.SSHServer):
        def begin_auth(self, username: str) -> bool:
            return True

        def connection_requested(
            self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
        ) -> bool:
            return True

    server = await asyncssh.create_server(
        Jump,
        "127.0.0.1",
        0,
        server_host_keys=[jump_key],
        authorized_client_keys=asyncssh.import_authorized_keys(keys.client_public),
    )
    jump_port = server.sockets[0].getsockname()[1]
    try:
        known = keys.known_hosts([n.port for n in fake_target.nodes], path=tmp_path / "with_jump")
        with known.open("a") as handle:
            handle.write(f"[127.0.0.1]:{jump_port} {jump_key.export_public_key().decode().strip()}\n")
        target = make_target(
            keys,
            [n.port for n in fake_target.nodes],
            known_hosts=known,
            jump_host={"host": "127.0.0.1", "port": jump_port, "user": "jump"},
        )
        async with TargetSession.open("fake", target) as ts:
            assert ts.jump is not None
            result = await ts.nodes[1].run("show", properties=["ActiveState"])
            assert result.ok
            assert ts.nodes[1].tunnel is ts.jump
    finally:
        server.close()
        await server.wait_closed()


async def test_every_received_command_is_a_table_rendering(fake_target: FakeTarget) -> None:
    """Whatever the layer does, the hosts receive exact table renderings, nothing else."""
    from bot.target.restart import apply_and_restart, flags_for_nodes, restore_vendor_and_restart
    from bot.target.unit import read_unit

    ts = fake_target.session()
    try:
        view = await read_unit(ts.node0)
        await apply_and_restart(ts, flags_for_nodes(view.flags, 2), {"X": "1"})
        await restore_vendor_and_restart(ts)
    finally:
        await ts.close()
    assert fake_target.received
    assert sorted(text for _, text in fake_target.audit) == sorted(fake_target.received)
    for text in fake_target.received:
        assert identify(text, unit="sglang-qwen.service") is not None, text


def test_node_from_config_expands_paths() -> None:
    from bot.config.schema import SSHSettings

    node = NodeSession.from_config(
        Node(host="gpu1", port=2222, user="ops"), SSHSettings(), unit="x.service", index=1
    )
    assert node.name == "gpu1:2222" and node.index == 1 and node.username == "ops"
    assert "~" not in str(node.known_hosts)
    assert node.connect_timeout == 10 and node.command_timeout == 60


async def test_a_cancelled_run_signals_the_remote_process(fake_target: FakeTarget) -> None:
    fake_target.nodes[0].hang.add("journal")
    async with fake_target.open() as ts:
        task = asyncio.ensure_future(ts.node0.run("journal", timeout=30))
        deadline = time.monotonic() + 2
        while not fake_target.nodes[0].received and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while not fake_target.nodes[0].signals and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    assert fake_target.nodes[0].signals == ["TERM"]
