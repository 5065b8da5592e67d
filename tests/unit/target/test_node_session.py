"""NodeSession against in-process SSH servers: table-only commands, EOF, errors, timeouts, host keys,
and a connection dropped under a command (re-run once when safe, or a clear error)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncssh
import pytest

from bot.config.schema import Node
from bot.target.errors import (
    CommandFailed,
    CommandTimeout,
    ConnectFailedError,
    ConnectionLostError,
    HostKeyError,
    LocalFileError,
    UnreachableError,
    never_reached,
)
from bot.target.privileged import COMMANDS, ParamError
from bot.target.session import TargetSession
from bot.target.ssh import NodeSession
from bot.target.ssh_reconnect import RETRY_SAFE
from bot.target.table_match import identify
from tests.unit.target.conftest import FakeTarget, make_target
from tests.unit.target.dropping_node import When, dropper, dropping_target_fixture  # noqa: F401


async def test_run_reuses_one_connection_and_fills_the_unit(fake_target: FakeTarget) -> None:
    async with TargetSession.open("fake", fake_target.target) as ts:
        first = await ts.node0.run("show", properties=["ActiveState"])
        conn = await ts.node0.connection()
        second = await ts.node0.run("show", properties=["ActiveState", "SubState"])
        assert await ts.node0.connection() is conn
    assert first.text == "ActiveState=active\n"
    assert second.text == "ActiveState=active\nSubState=running\n"
    assert second.argv_shell == "systemctl show sglang-qwen.service -p ActiveState,SubState"
    assert second.exit_status == 0 and second.duration_s >= 0  # measured; its size is the load's


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
        assert time.monotonic() - started >= 0.3  # (how much later it returns is the machine's load)
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
        with pytest.raises(LocalFileError, match=r"ssh\.known_hosts .*absent does not exist") as caught:
            await ts.node0.run("cat")
    assert not isinstance(caught.value, UnreachableError | HostKeyError)
    assert never_reached(caught.value)
    assert "unreachable" not in str(caught.value) and "offered" not in str(caught.value)
    assert fake_target.received == [] and fake_target.nodes[0].logins == 0  # refused before connecting


async def test_missing_key_file_is_a_local_error_not_unreachable(
    fake_target: FakeTarget, tmp_path: Path
) -> None:
    target = make_target(fake_target.keys, [n.port for n in fake_target.nodes], key_path=tmp_path / "nokey")
    async with TargetSession.open("fake", target) as ts:
        with pytest.raises(LocalFileError, match=r"ssh\.key_path .*nokey does not exist") as caught:
            await ts.node0.run("cat")
    assert "unreachable" not in str(caught.value) and "Errno" not in str(caught.value)
    assert fake_target.nodes[0].logins == 0


async def test_a_key_file_that_is_not_a_key_is_a_local_error(fake_target: FakeTarget, tmp_path: Path) -> None:
    junk = tmp_path / "junk_key"
    junk.write_text("not a key\n")
    target = make_target(fake_target.keys, [n.port for n in fake_target.nodes], key_path=junk)
    async with TargetSession.open("fake", target) as ts:
        with pytest.raises(LocalFileError, match="is not a private key asyncssh can load"):
            await ts.node0.run("cat")
    assert fake_target.nodes[0].logins == 0


async def test_a_refused_port_is_a_connect_failure_that_never_reached_the_node(
    fake_target: FakeTarget,
) -> None:
    await fake_target.nodes[0].stop()
    async with TargetSession.open("fake", fake_target.target) as ts:
        with pytest.raises(ConnectFailedError) as caught:
            await ts.node0.run("cat")
    assert isinstance(caught.value, UnreachableError) and never_reached(caught.value)


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
        # the command's own timeout far beyond the wait below: on a busy machine the node may take
        # a while to receive it, and a timeout firing first would be a different test
        task = asyncio.ensure_future(ts.node0.run("journal", timeout=600))
        deadline = time.monotonic() + 120  # a bound for a hung test, not a timing goal
        while not fake_target.nodes[0].received and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while not fake_target.nodes[0].signals and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    assert fake_target.nodes[0].signals == ["TERM"]


class _OpenedChannel:
    """A channel whose command never ends, recording the signals it is sent."""

    def __init__(self) -> None:
        self.signals: list[str] = []
        self.stdin = self
        self.never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def write(self, data: bytes) -> None: ...

    def write_eof(self) -> None: ...

    async def wait(self, check: bool = False) -> None:
        await self.never

    def send_signal(self, name: str) -> None:
        self.signals.append(name)

    def close(self) -> None: ...


async def test_a_cancel_that_lands_as_the_channel_opens_is_not_lost(
    fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a loaded machine hit: the caller cancels in the instant the channel has opened but
    the run has not yet woken to take it. Python 3.11's `wait_for` then returned the channel and
    dropped the cancel, and the command ran on to its own limit. Made deterministic here: the open
    is already complete, and the cancel is queued to land right behind the hand-over."""
    loop = asyncio.get_running_loop()
    channel = _OpenedChannel()
    runs: list[asyncio.Future[object]] = []
    async with fake_target.open() as ts:
        conn = await ts.node0.connection()

        def create_process(command: str, encoding: object = None) -> asyncio.Future[_OpenedChannel]:
            opened: asyncio.Future[_OpenedChannel] = loop.create_future()
            opened.set_result(channel)
            loop.call_soon(lambda: loop.call_soon(runs[0].cancel))  # two turns on: after the hand-over
            return opened

        monkeypatch.setattr(conn, "create_process", create_process)
        runs.append(asyncio.ensure_future(ts.node0.run("journal", timeout=5)))
        with pytest.raises(asyncio.CancelledError):
            await runs[0]
        assert channel.signals == ["TERM"]


# --- a connection dropped under a command (the host still up) ------------------------------------


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_drop_under_start_is_retried_once_on_a_fresh_connection(
    dropping_target: FakeTarget, when: When
) -> None:
    node = dropper(dropping_target, 0)
    node.drop["start"] = (when, 1)
    async with dropping_target.open() as ts:
        first = await ts.node0.connection()
        result = await ts.node0.run("start")
        assert result.ok and await ts.node0.connection() is not first
        [reconnect] = ts.node0.reconnects
    assert node.dropped == ["start"]
    assert [text for text in node.received if "systemctl start" in text] == [result.argv_shell] * 2
    assert reconnect.command == result.argv_shell and reconnect.node == ts.node0.name
    assert reconnect.describe().startswith(f"connection to {ts.node0.name} lost during `{result.argv_shell}`")
    assert reconnect.describe().endswith("reconnected, command re-run")


async def test_input_is_sent_again_on_the_retry(dropping_target: FakeTarget) -> None:
    node = dropper(dropping_target, 1)
    node.drop["write-dropin"] = ("before", 1)
    async with dropping_target.open() as ts:
        result = await ts.nodes[1].run("write-dropin", input="[Service]\n")
    assert result.stdout == b"[Service]\n" and node.systemd.files[node.systemd.dropin] == "[Service]\n"
    assert len(ts.nodes[1].reconnects) == 1


BENCH = {
    "python": "/usr/bin/python3",
    "bench_module": "sglang.bench_serving",
    "bench_backend": "sglang-oai",
    "base_url": "http://127.0.0.1:30000",
    "input_len": 8,
    "output_len": 8,
    "num_prompts": 4,
    "request_rate": "inf",
    "seed": 1,
    "warmup_requests": 0,
    "bench_output": "/tmp/flagbot-bench-" + "0" * 32 + ".jsonl",
}


@pytest.mark.parametrize(("command", "params"), [("bench-serving", BENCH), ("journal-follow", {})])
async def test_a_drop_under_a_command_not_safe_to_repeat_is_not_retried(
    dropping_target: FakeTarget, command: str, params: dict[str, object]
) -> None:
    node = dropper(dropping_target, 0)
    node.drop[command] = ("after", 1)
    async with dropping_target.open() as ts:
        with pytest.raises(ConnectionLostError, match="connection lost during") as caught:
            await ts.node0.run(command, **params)
        assert ts.node0.reconnects == []
        assert (await ts.node0.run("show", properties=["ActiveState"])).ok  # the next one reconnects
    assert command not in RETRY_SAFE and len(node.received) == 2
    assert caught.value.host == ts.node0.name and caught.value.argv_shell == node.received[0]


def test_bench_serving_and_streams_are_never_retried() -> None:
    assert {"bench-serving", "journal-follow"}.isdisjoint(RETRY_SAFE)
    assert {"start", "stop", "daemon-reload", "reset-failed", "write-dropin", "show"} <= RETRY_SAFE
    assert COMMANDS.keys() >= RETRY_SAFE


async def test_a_failed_reconnect_says_both(dropping_target: FakeTarget) -> None:
    node = dropper(dropping_target, 1)
    node.drop["stop"] = ("before", 1)
    node.refuse_after_drop = True
    async with dropping_target.open() as ts:
        with pytest.raises(UnreachableError) as caught:
            await ts.nodes[1].run("stop")
    assert not isinstance(caught.value, ConnectionLostError)
    message = str(caught.value)
    assert "connection lost during `sudo -n /usr/bin/systemctl stop sglang-qwen.service`" in message
    assert "the reconnect failed too" in message and ts.nodes[1].name in message
    assert ts.nodes[1].reconnects == []


async def test_a_second_drop_after_the_reconnect_is_not_retried_again(dropping_target: FakeTarget) -> None:
    node = dropper(dropping_target, 0)
    node.drop["stop"] = ("after", 2)
    async with dropping_target.open() as ts:
        with pytest.raises(ConnectionLostError):
            await ts.node0.run("stop")
        assert len(ts.node0.reconnects) == 1
    assert node.dropped == ["stop", "stop"]


async def test_commands_sharing_a_dropped_connection_all_recover(dropping_target: FakeTarget) -> None:
    """Two commands in flight on one connection both see it drop; neither kills the other's new one."""
    node = dropper(dropping_target, 0)
    node.hang.add("journal")
    node.drop["show"] = ("before", 1)
    async with dropping_target.open() as ts:
        reading = asyncio.ensure_future(ts.node0.run("journal", timeout=60))
        deadline = time.monotonic() + 30  # a bound for a hung test, not a timing goal
        while not node.received and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        node.hang.clear()
        shown, read = await asyncio.gather(ts.node0.run("show", properties=["ActiveState"]), reading)
        assert shown.ok and read.ok
        conn = await ts.node0.connection()
        assert not conn.is_closed()
        assert {r.command for r in ts.node0.reconnects} == {shown.argv_shell, read.argv_shell}


async def test_an_idle_cut_is_noticed_and_recorded(dropping_target: FakeTarget) -> None:
    node = dropper(dropping_target, 0)
    async with dropping_target.open() as ts:
        first = await ts.node0.connection()
        assert (await ts.node0.run("show", properties=["ActiveState"])).ok
        node.cut_idle()
        deadline = time.monotonic() + 30  # a bound for a hung test, not a timing goal
        while not first.is_closed() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert (await ts.node0.run("show", properties=["ActiveState"])).ok
        [reconnect] = ts.node0.reconnects
    assert reconnect.command is None and "found closed" in reconnect.describe()
