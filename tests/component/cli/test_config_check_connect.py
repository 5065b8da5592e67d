"""`flagbot config check --connect` through the installed console script (issue 20 item 5), against
a fake node behind an in-process SSH server: every check one line, exit 1 when one fails, `--json`;
a missing key file is named as such, never "unreachable"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.support.connect_lab import connect_lab
from tests.support.fake_node import FakeNode, Keys
from tests.support.processes import run_flagbot


def _config(tmp_path: Path, port: int, http_port: int, key: Path, known_hosts: Path) -> Path:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        'default_target = "lab"\n'
        f'[database]\nsqlite_path = "{tmp_path / "state" / "flagbot.db"}"\n'
        f'[targets.lab]\nunit = "sglang-qwen.service"\nbase_url = "http://127.0.0.1:{http_port}"\n'
        f'nodes = [{{ host = "127.0.0.1", port = {port}, user = "ops" }}]\n'
        "[targets.lab.ssh]\nconnect_timeout = 2\ncommand_timeout = 5\n"
        f'key_path = "{key}"\nknown_hosts = "{known_hosts}"\n'
    )
    return path


@pytest_asyncio.fixture
async def lab(tmp_path: Path) -> AsyncIterator[tuple[FakeNode, Keys, int]]:
    async with connect_lab(tmp_path) as found:
        yield found.node, found.keys, found.http_port


async def test_config_check_connect_passes_a_good_node_and_names_a_missing_key(
    lab: tuple[FakeNode, Keys, int], tmp_path: Path
) -> None:
    served, keys, http_port = lab
    known = keys.known_hosts([served.port])
    config = _config(tmp_path, served.port, http_port, keys.client_key, known)
    code, out, err = await run_flagbot(config, "config", "check", "--connect")
    assert code == 0, out + err
    node = f"127.0.0.1:{served.port}"
    for line in (
        f"ok: lab login: ops@{node}, host key verified",
        f"ok: lab {node} sudoers: every privileged command for sglang-qwen.service is granted",
        f"ok: lab {node} unit: sglang-qwen.service loaded (active/running); ExecStart launches SGLang "
        "(`/usr/bin/python3 -m sglang.launch_server`, 5 flags)",
        "ok: lab sglang: SGLang 0.5.23; flag list from node 0's --help (host's list for SGLang 0.5.23)",
        f"ok: lab http: http://127.0.0.1:{http_port}/health answered 200",
        f"ok: lab server_info: http://127.0.0.1:{http_port}/server_info answered 200",
    ):
        assert line.replace("lab login", f"lab {node} login") in out.splitlines(), out

    logins = served.logins
    code, out, err = await run_flagbot(config, "config", "check")  # without --connect: offline, as before
    assert code == 0, out + err
    assert served.logins == logins
    assert not [line for line in out.splitlines() if line.startswith(("ok:", "warn:", "skip:", "fail:"))]

    missing = tmp_path / "no_key"
    broken = _config(tmp_path, served.port, http_port, missing, known)
    logins = served.logins
    code, out, err = await run_flagbot(broken, "config", "check", "--connect")
    assert code == 1
    assert f"fail: lab key: ssh.key_path {missing} does not exist" in out.splitlines()
    assert "unreachable" not in out and "Errno" not in out
    assert served.logins == logins  # nothing tried with a key that is not there

    code, out, err = await run_flagbot(broken, "config", "check", "--connect", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False and report["targets"] == ["lab"]
    assert "FLAGBOT_DATABASE_URL" in report["environment_set"] + report["environment_not_set"]
    assert {"target": "lab", "node": "-", "check": "key", "status": "fail"}.items() <= report["checks"][
        0
    ].items()
