"""The testbed's promises, checked on the two real nodes: SSH with host keys, real systemd
semantics through the limited sudo, real journald, the network fence, the twin's lifecycle.

Every test leaves the nodes as it found them (empty drop-in, reloaded, restarted, healthy), so
the order of tests does not matter.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
import httpx
import pytest
import pytest_asyncio

from bot.target.privileged import dropin_backup_path, dropin_path, render
from bot.target.sudoers import sudoers_text, validate_sudoers
from flagbot_lab.testbed import OPS_USER, UNIT, Testbed

if TYPE_CHECKING:
    from tests.integration.conftest import NodeShells

pytestmark = pytest.mark.asyncio(loop_scope="session")

SHOW = ["ActiveState", "SubState", "InvocationID", "NRestarts", "ExecStart", "NeedDaemonReload", "MainPID"]


async def until(check: Callable[[], Awaitable[Any]], *, timeout: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def show(ssh: NodeShells, k: int) -> dict[str, str]:
    result = await ssh.run(k, render("show", unit=UNIT, properties=SHOW))
    assert result.exit_status == 0, result.stderr
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def argv_of(exec_start: str) -> str:
    match = re.search(r"argv\[\]=(.*?) ; ignore_errors", exec_start)
    assert match, exec_start
    return match.group(1)


async def vendor_exec_line(ssh: NodeShells, k: int) -> str:
    """The unit file's own `ExecStart=` command (continuation lines joined), as systemd wrote it."""
    result = await ssh.run(k, render("cat", unit=UNIT))
    joined = re.sub(r"\\\n\s*", " ", str(result.stdout))
    lines = [line for line in joined.splitlines() if re.match(r"ExecStart=\S", line)]
    assert lines, result.stdout
    return lines[0].removeprefix("ExecStart=")


async def write_dropin(ssh: NodeShells, k: int, content: str) -> None:
    result = await ssh.run(k, render("write-dropin", unit=UNIT), input=content)
    assert result.exit_status == 0, result.stderr


async def health(url: str) -> int | None:
    try:
        async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
            return (await client.get(url)).status_code
    except httpx.HTTPError:
        return None


async def root_restart(bed: Testbed, *nodes: int) -> None:
    """`systemctl restart` as root on the nodes, together: an operator's restart, outside flagbot
    (ops' sudo grant has none; flagbot restarts as stop, then start)."""
    done = await asyncio.gather(*(bed.run_as_root_async(k, ["systemctl", "restart", UNIT]) for k in nodes))
    assert [r.returncode for r in done] == [0] * len(nodes), [r.stderr for r in done]


async def restore(ssh: NodeShells, bed: Testbed) -> None:
    """Back to the vendor line on every node (flagbot cannot delete: it empties the drop-in),
    restarted as flagbot does it: stop every rank, then start every rank."""
    nodes = range(len(bed.addresses))
    for k in nodes:
        await write_dropin(ssh, k, "")
        await ssh.run(k, render("daemon-reload"))
        await ssh.run(k, render("reset-failed", unit=UNIT))  # the crash loop may have hit the start limit
    for action in ("stop", "start"):
        done = await asyncio.gather(*(ssh.run(k, render(action, unit=UNIT)) for k in nodes))
        assert [r.exit_status for r in done] == [0] * len(nodes), [r.stderr for r in done]
    await asyncio.to_thread(bed.wait_healthy, 180)


@pytest_asyncio.fixture(loop_scope="session")
async def clean_after(ssh_ops: NodeShells, testbed: Testbed) -> Any:
    yield
    await restore(ssh_ops, testbed)


# --- SSH ------------------------------------------------------------------------------------


async def test_ssh_as_ops_with_host_key_checking(ssh_ops: NodeShells, testbed: Testbed) -> None:
    for k in range(2):
        result = await ssh_ops.run(k, "id -un; id -Gn; hostname")
        user, groups, hostname = result.stdout.split("\n")[:3]
        assert user == OPS_USER
        assert "systemd-journal" in groups.split()
        assert hostname == testbed.layout.hostname(k)
    lines = testbed.known_hosts.read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [[address, "ssh-ed25519"] for address in testbed.addresses]


async def test_a_wrong_known_hosts_entry_is_refused(testbed: Testbed, tmp_path: Path) -> None:
    other_key = testbed.known_hosts.read_text().splitlines()[1].split(None, 1)[1]
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"{testbed.addresses[0]} {other_key}\n")  # node 1's key for node 0's address
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        await asyncssh.connect(
            testbed.addresses[0],
            username=OPS_USER,
            client_keys=[str(testbed.client_key)],
            known_hosts=str(wrong),
            agent_path=None,
        )


# --- systemd and sudo -------------------------------------------------------------------------


async def test_systemctl_show_works_as_ops(ssh_ops: NodeShells) -> None:
    props = await show(ssh_ops, 0)
    assert props["ActiveState"] == "active"
    assert props["SubState"] == "running"
    assert re.fullmatch(r"[0-9a-f]{32}", props["InvocationID"])
    assert props["NRestarts"] == "0"
    assert "--port 30000" in argv_of(props["ExecStart"])


async def test_sudo_is_limited_to_the_table(ssh_ops: NodeShells, testbed: Testbed) -> None:
    allowed = await ssh_ops.run(0, render("daemon-reload"))
    assert allowed.exit_status == 0, allowed.stderr
    path = dropin_path(UNIT)
    for outside in (
        "sudo -n cat /etc/shadow",
        "sudo -n /usr/bin/systemctl restart ssh.service",
        f"sudo -n /usr/bin/systemctl restart {UNIT}",  # flagbot stops, then starts: no restart grant
        "sudo -n /usr/bin/systemctl stop sglang-qwen",  # not the exact unit name
        f"sudo -n /usr/bin/tee {path.parent}/../../evil.conf",
        f"sudo -n /usr/bin/tee -a {path}",
        f"sudo -n /usr/bin/tee {path} /etc/passwd",
    ):
        refused = await ssh_ops.run(0, outside, input="")
        assert refused.exit_status != 0, outside
        assert "a password is required" in refused.stderr, (outside, refused.stderr)
    installed = (testbed.layout.root(0) / "etc/sudoers.d/flagbot").read_text()
    assert installed == sudoers_text(OPS_USER, UNIT)
    validate_sudoers(installed)
    assert "*" not in installed


async def test_dropin_reload_restart_changes_exec_start_and_journal_shows_it(
    ssh_ops: NodeShells, clean_after: None
) -> None:
    before = await show(ssh_ops, 1)
    since = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    await asyncio.sleep(1.0)  # journal --since has a one-second resolution
    backup = await ssh_ops.run(1, render("write-dropin-backup", unit=UNIT), input="# previous: none\n")
    assert backup.exit_status == 0, backup.stderr
    line = await vendor_exec_line(ssh_ops, 1)
    await write_dropin(ssh_ops, 1, f"[Service]\nExecStart=\nExecStart={line} --log-level info\n")
    for command in (render("daemon-reload"), render("stop", unit=UNIT), render("start", unit=UNIT)):
        result = await ssh_ops.run(1, command)
        assert result.exit_status == 0, result.stderr
    after = await show(ssh_ops, 1)
    assert argv_of(after["ExecStart"]).endswith("--log-level info")
    assert after["InvocationID"] != before["InvocationID"]
    assert after["NeedDaemonReload"] == "no"
    listing = await ssh_ops.run(1, f"ls {dropin_backup_path(UNIT)} {dropin_path(UNIT)}")
    assert listing.exit_status == 0, listing.stderr

    async def journal_has_both() -> str | None:
        result = await ssh_ops.run(1, render("journal", unit=UNIT, since=since, output="short-iso", all=True))
        text = str(result.stdout)
        wanted = ("Stopped sglang-qwen.service", "Started sglang-qwen.service", "server_args=")
        return text if all(word in text for word in wanted) else None

    text = await until(journal_has_both, timeout=15, what="systemd's and the service's journal lines")
    assert re.search(r"systemd\[1\]: Stopped sglang-qwen\.service", text)
    assert "--log-level" in text or "log_level='info'" in text


async def test_restart_without_daemon_reload_keeps_the_old_exec_start(
    ssh_ops: NodeShells, testbed: Testbed, clean_after: None
) -> None:
    """ops may not `systemctl restart` (sudo refuses it); root on the node restarts, and without a
    daemon-reload systemd keeps running the old ExecStart."""
    before = await show(ssh_ops, 1)
    line = await vendor_exec_line(ssh_ops, 1)
    await write_dropin(ssh_ops, 1, f"[Service]\nExecStart=\nExecStart={line} --log-level info\n")
    refused = await ssh_ops.run(1, f"sudo -n /usr/bin/systemctl restart {UNIT}")
    assert refused.exit_status != 0 and "a password is required" in refused.stderr, refused.stderr
    assert (await show(ssh_ops, 1))["InvocationID"] == before["InvocationID"]
    restarted = await testbed.run_as_root_async(1, ["systemctl", "restart", UNIT])
    assert restarted.returncode == 0, restarted.stderr
    assert "daemon-reload" in restarted.stderr  # systemd's own warning
    after = await show(ssh_ops, 1)
    assert after["NeedDaemonReload"] == "yes"
    assert argv_of(after["ExecStart"]) == argv_of(before["ExecStart"])


async def test_crash_loop_shows_nrestarts_rising(
    ssh_ops: NodeShells, testbed: Testbed, clean_after: None
) -> None:
    line = await vendor_exec_line(ssh_ops, 1)
    await write_dropin(ssh_ops, 1, f"[Service]\nExecStart=\nExecStart={line} --no-such-flag\n")
    await ssh_ops.run(1, render("daemon-reload"))
    await root_restart(testbed, 1)
    seen: list[int] = []

    async def rising() -> bool:
        seen.append(int((await show(ssh_ops, 1))["NRestarts"]))
        return len(set(seen)) >= 3 and seen == sorted(seen)

    await until(rising, timeout=30, what="NRestarts to rise")
    journal = await ssh_ops.run(1, render("journal", unit=UNIT, lines=200, output="cat"))
    assert "unrecognized arguments: --no-such-flag" in journal.stdout


async def test_stopping_the_unit_on_one_node_kills_its_process_only(
    ssh_ops: NodeShells, clean_after: None
) -> None:
    node0 = await show(ssh_ops, 0)
    stopped = await ssh_ops.run(1, render("stop", unit=UNIT))
    assert stopped.exit_status == 0, stopped.stderr
    node1 = await show(ssh_ops, 1)
    assert (node1["ActiveState"], node1["MainPID"]) == ("inactive", "0")
    leftover = await ssh_ops.run(1, "pgrep -u root -f -a 'launch_server|sglang' || true")
    assert leftover.stdout.strip() == ""
    again = await show(ssh_ops, 0)
    assert (again["MainPID"], again["ActiveState"]) == (node0["MainPID"], "active")


# --- network ------------------------------------------------------------------------------------


async def test_nodes_reach_each_other_and_the_host_but_nothing_else(
    ssh_ops: NodeShells, testbed: Testbed
) -> None:
    routes = await ssh_ops.run(1, "ip route show")
    assert "default" not in routes.stdout
    peer = await ssh_ops.run(1, f"timeout 3 bash -c 'echo > /dev/tcp/{testbed.addresses[0]}/22' && echo ok")
    assert peer.stdout.strip() == "ok", peer.stderr
    host = await ssh_ops.run(1, f"timeout 3 bash -c 'echo > /dev/tcp/{testbed.layout.host_address}/9'")
    assert "Connection refused" in host.stderr  # an answer: the host is reachable
    outside = await ssh_ops.run(1, "timeout 3 bash -c 'echo > /dev/tcp/1.1.1.1/443'")
    assert outside.exit_status != 0
    assert "Network is unreachable" in outside.stderr


# --- the twin -----------------------------------------------------------------------------------


async def test_health_goes_refused_then_503_then_200_after_a_restart(
    ssh_ops: NodeShells, testbed: Testbed, clean_after: None
) -> None:
    url = f"{testbed.base_url}/health"
    phases: list[int | None] = []

    async def healthy() -> bool:
        code = await health(url)
        if not phases or phases[-1] != code:
            phases.append(code)
        return code == 200 and None in phases

    await root_restart(testbed, 0, 1)
    await until(healthy, timeout=180, what="/health 200 after the restart")
    first_refused = phases.index(None)
    assert phases[first_refused:][-1] == 200
    assert 503 in phases[first_refused:], phases


async def test_ranks_rendezvous_across_nodes(
    ssh_ops: NodeShells, testbed: Testbed, clean_after: None
) -> None:
    await ssh_ops.run(1, render("stop", unit=UNIT))
    await root_restart(testbed, 0)
    url = f"{testbed.base_url}/health"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # alone, rank 0 cannot finish starting
        assert await health(url) != 200
        await asyncio.sleep(0.1)
    await ssh_ops.run(1, render("start", unit=UNIT))

    async def healthy() -> bool:
        return await health(url) == 200

    await until(healthy, timeout=180, what="rank 0 healthy once rank 1 joined")


async def test_ground_truth_records_a_request(testbed: Testbed) -> None:
    truth = testbed.layout.root(0) / "var/lib/sglang-twin/truth.jsonl"
    before = truth.read_text().count("\n") if truth.exists() else 0
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        models = (await client.get(f"{testbed.base_url}/v1/models")).json()
        response = await client.post(
            f"{testbed.base_url}/v1/completions",
            json={"model": models["data"][0]["id"], "prompt": "flagbot testbed probe", "max_tokens": 8},
        )
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 8

    async def recorded() -> list[dict[str, Any]]:
        lines = truth.read_text().splitlines()[before:] if truth.exists() else []
        return [json.loads(line) for line in lines]

    records = await until(recorded, timeout=10, what=f"a new record in {truth}")
    requests = [record for record in records if record.get("kind") == "request"]
    assert requests, records
