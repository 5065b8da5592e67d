"""`flagbot config check --connect` (bot/app/connect_check.py) against in-process fake SSH nodes:
one line per check, each failure naming its cause; a local file problem is never "unreachable"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from bot.app.connect_check import ConnectCheck, connect_checks, failed
from bot.config import Settings
from bot.target.flaglist import forget_cache
from bot.target.sudoers import needed_commands
from tests.support.connect_lab import connect_lab
from tests.support.fake_node import UNIT, FakeNode, Keys


@dataclass
class Lab:
    node: FakeNode
    keys: Keys
    tmp: Path
    http_port: int

    def settings(self, **ssh: object) -> Settings:
        port = ssh.pop("port", self.node.port)
        base: dict[str, object] = {
            "key_path": str(self.keys.client_key),
            "known_hosts": str(self.keys.known_hosts([self.node.port])),
            "connect_timeout": 2,
            "command_timeout": 5,
        }
        target = {
            "unit": UNIT,
            "base_url": ssh.pop("base_url", f"http://127.0.0.1:{self.http_port}"),
            "nodes": [{"host": "127.0.0.1", "port": port, "user": "ops"}],
            "ssh": base | ssh,
        }
        return Settings.model_validate(
            {
                "default_target": "lab",
                "targets": {"lab": target},
                "database": {"sqlite_path": str(self.tmp / "state" / "flagbot.db")},
            }
        )


@pytest.fixture(autouse=True)
def _fresh_flag_cache() -> Iterator[None]:
    forget_cache()
    yield
    forget_cache()


@pytest_asyncio.fixture
async def lab(tmp_path: Path) -> AsyncIterator[Lab]:
    async with connect_lab(tmp_path) as found:
        yield Lab(found.node, found.keys, tmp_path, found.http_port)


def by_check(checks: list[ConnectCheck]) -> dict[tuple[str, str], ConnectCheck]:
    return {(check.check, check.node): check for check in checks}


def fails(checks: list[ConnectCheck]) -> list[str]:
    return [check.render() for check in checks if check.status == "fail"]


def one_line_each(checks: list[ConnectCheck]) -> None:
    for check in checks:
        assert "\n" not in check.render()


async def test_a_good_node_passes_every_check(lab: Lab) -> None:
    checks = await connect_checks(lab.settings())
    one_line_each(checks)
    node = f"127.0.0.1:{lab.node.port}"
    assert [(c.check, c.node, c.status) for c in checks] == [
        ("key", "-", "ok"),
        ("known_hosts", "-", "ok"),
        ("login", node, "ok"),
        ("sudoers", node, "ok"),
        ("unit", node, "ok"),
        ("sglang", "-", "ok"),
        ("http_via", "-", "ok"),
        ("http", "-", "ok"),
        ("server_info", "-", "ok"),
    ]
    assert not failed(checks)
    found = by_check(checks)
    assert found["http_via", "-"].text == "direct"
    assert found["sglang", "-"].text == (
        "SGLang 0.5.23; flag list from node 0's --help (host's list for SGLang 0.5.23)"
    )
    assert found["unit", node].text == (
        f"{UNIT} loaded (active/running); ExecStart launches SGLang "
        "(`/usr/bin/python3 -m sglang.launch_server`, 5 flags)"
    )
    assert found["server_info", "-"].text == f"http://127.0.0.1:{lab.http_port}/server_info answered 200"
    assert found["login", node].render() == f"ok: lab {node} login: ops@{node}, host key verified"
    assert "sudo -l -n" in lab.node.received  # read as the login, never through a grant


async def test_a_server_on_node_0s_loopback_only_is_checked_through_the_forward_and_said(lab: Lab) -> None:
    # the lab's endpoint listens on 127.0.0.1 only: 127.0.0.2 refuses, as the bot host's view of
    # a node whose SGLang listens on its loopback; the fake node's loopback is this host's
    configured = f"http://127.0.0.2:{lab.http_port}"
    checks = await connect_checks(lab.settings(base_url=configured))
    assert not failed(checks)
    found = by_check(checks)
    assert found["http_via", "-"].text.startswith("through an SSH forward on node 0")
    assert found["http", "-"].text == f"{configured}/health answered 200"
    assert found["server_info", "-"].status == "ok"
    assert set(lab.node.forwards) == {("127.0.0.1", lab.http_port)}


async def test_a_missing_key_file_is_named_and_no_login_is_tried(lab: Lab) -> None:
    missing = lab.tmp / "no_such_key"
    checks = await connect_checks(lab.settings(key_path=str(missing)))
    one_line_each(checks)
    assert fails(checks)[0] == f"fail: lab key: ssh.key_path {missing} does not exist"
    assert by_check(checks)["login", f"127.0.0.1:{lab.node.port}"].status == "skip"
    assert lab.node.logins == 0
    assert not any("unreachable" in c.text or "Errno" in c.text for c in checks)
    assert failed(checks)


async def test_an_unreadable_key_file_is_named(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bot.target.ssh_files._may_read", lambda path: path != lab.keys.client_key)
    checks = await connect_checks(lab.settings())
    assert fails(checks)[0] == (
        f"fail: lab key: ssh.key_path {lab.keys.client_key} is not readable by this user (permission denied)"
    )
    assert lab.node.logins == 0


async def test_a_file_that_is_not_a_key_and_a_loose_mode_are_named(lab: Lab) -> None:
    junk = lab.tmp / "junk"
    junk.write_text("hello\n")
    checks = await connect_checks(lab.settings(key_path=str(junk)))
    assert fails(checks)[0].startswith(
        f"fail: lab key: ssh.key_path {junk} is not a private key asyncssh can load"
    )
    lab.keys.client_key.chmod(0o644)
    loose = by_check(await connect_checks(lab.settings()))["key", "-"]
    assert loose.status == "warn" and "readable by group or others (mode 0644; chmod 600)" in loose.text


async def test_a_missing_known_hosts_file_is_named_not_a_host_key_problem(lab: Lab) -> None:
    absent = lab.tmp / "absent_known_hosts"
    checks = await connect_checks(lab.settings(known_hosts=str(absent)))
    one_line_each(checks)
    assert fails(checks)[0] == f"fail: lab known_hosts: ssh.known_hosts {absent} does not exist"
    assert not any("offered" in c.text or "unreachable" in c.text for c in checks)
    assert lab.node.logins == 0


async def test_a_known_hosts_without_the_node_and_a_wrong_host_key(lab: Lab) -> None:
    (lab.tmp / "other").mkdir()
    other = Keys.make(lab.tmp / "other", 1)
    wrong = other.known_hosts([lab.node.port])  # the right host:port, another key
    checks = await connect_checks(lab.settings(known_hosts=str(wrong)))
    node = f"127.0.0.1:{lab.node.port}"
    login = by_check(checks)["login", node]
    offered = lab.keys.host_keys[0].get_fingerprint("sha256")
    assert login.status == "fail" and "Host key is not trusted" in login.text and offered in login.text
    assert ("known_hosts", node) not in by_check(checks)  # it has an entry, just not this key

    empty = lab.tmp / "empty_known_hosts"
    empty.write_text("")
    checks = await connect_checks(lab.settings(known_hosts=str(empty)))
    entry = by_check(checks)["known_hosts", node]
    assert fails(checks) == [
        f"fail: lab {node} known_hosts: {empty} has no entry for [127.0.0.1]:{lab.node.port}"
    ]  # one cause, one line: the login is not tried on an entry that is not there
    assert entry.status == "fail" and by_check(checks)["login", node].status == "skip"
    assert not any("offered" in c.text or "unreachable" in c.text for c in checks)


async def test_a_refused_port_fails_the_login_and_says_so(lab: Lab) -> None:
    await lab.node.stop()
    checks = await connect_checks(lab.settings())
    one_line_each(checks)
    node = f"127.0.0.1:{lab.node.port}"
    login = by_check(checks)["login", node]
    assert login.status == "fail" and login.text.startswith(f"{node}: unreachable:")
    assert ("sudoers", node) not in by_check(checks)
    listing = by_check(checks)["sglang", "-"]
    assert (
        listing.status == "warn" and "packaged list" in listing.text and "cannot be reached" in listing.text
    )


async def test_a_missing_sudoers_line_is_named(lab: Lab) -> None:
    lab.node.sudo_grants = [line for line in needed_commands(UNIT) if " stop " not in line]
    checks = await connect_checks(lab.settings())
    assert fails(checks) == [
        f"fail: lab 127.0.0.1:{lab.node.port} sudoers: 1 sudoers line(s) missing: "
        f"/usr/bin/systemctl stop {UNIT}; install `flagbot sudoers target=lab node=0` on it as /etc/sudoers.d/flagbot"
    ]


async def test_ssh_sudo_off_skips_the_sudoers_check(lab: Lab) -> None:
    lab.node.sudo_grants = []
    found = by_check(await connect_checks(lab.settings(sudo=False)))
    assert found["sudoers", f"127.0.0.1:{lab.node.port}"].status == "skip"


async def test_a_missing_unit_is_named(lab: Lab) -> None:
    lab.node.fail["cat"] = f"No files found for {UNIT}.\n"
    checks = await connect_checks(lab.settings())
    assert (
        f"fail: lab 127.0.0.1:{lab.node.port} unit: `systemctl cat {UNIT}` failed: No files found for {UNIT}."
        in (fails(checks))
    )


async def test_a_unit_systemd_does_not_know_is_named(lab: Lab) -> None:
    lab.node.systemd.load_state = "not-found"
    checks = await connect_checks(lab.settings())
    assert fails(checks) == [
        f"fail: lab 127.0.0.1:{lab.node.port} unit: {UNIT} does not exist on this node "
        "(systemd: LoadState=not-found)"
    ]
    lab.node.systemd.load_state = "masked"
    unit = by_check(await connect_checks(lab.settings()))["unit", f"127.0.0.1:{lab.node.port}"]
    assert unit.render().endswith(f"unit: {UNIT} is not loaded by systemd (LoadState=masked)")


async def test_a_unit_whose_exec_start_is_not_an_sglang_launch_is_named(lab: Lab) -> None:
    vendor = lab.node.systemd.vendor
    lab.node.systemd.files[vendor] = "[Service]\nExecStart=/usr/bin/sleep infinity\n"
    lab.node.systemd.reload()
    checks = await connect_checks(lab.settings())
    unit = by_check(checks)["unit", f"127.0.0.1:{lab.node.port}"]
    assert unit.status == "fail" and unit.text.startswith("ExecStart is not an SGLang launch: ")
    assert "\n" not in unit.render()


async def test_the_flag_list_says_it_came_from_the_cache_the_second_time(lab: Lab) -> None:
    cache = lab.tmp / "cache"
    first = by_check(await connect_checks(lab.settings(), cache_dir=cache))["sglang", "-"]
    again = by_check(await connect_checks(lab.settings(), cache_dir=cache))["sglang", "-"]
    assert "from node 0's --help" in first.text
    assert again.status == "ok" and "from the cache of node 0's --help" in again.text


async def test_http_down_is_named_once(lab: Lab) -> None:
    checks = await connect_checks(lab.settings(base_url="http://127.0.0.1:9"))
    assert fails(checks) == [next(c.render() for c in checks if c.check == "http")]
    assert fails(checks)[0].startswith("fail: lab http: http://127.0.0.1:9/health did not answer")
    assert by_check(checks)["server_info", "-"].status == "skip"


async def test_a_server_info_that_is_not_served_is_named(lab: Lab) -> None:
    async def health_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        status = b"200 OK" if request.startswith(b"GET /health ") else b"404 Not Found"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(health_only, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        checks = await connect_checks(lab.settings(base_url=f"http://127.0.0.1:{port}"))
    finally:
        server.close()
        await server.wait_closed()
    assert fails(checks) == [f"fail: lab server_info: http://127.0.0.1:{port}/server_info answered 404"]
