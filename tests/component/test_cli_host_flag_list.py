"""The console judges flags by the target host's own list (issue 19 item 1): the installed `flagbot`
script, against a fake node behind an in-process SSH server whose SGLang says 0.5.23 and prints the
twin's `--help` with 0.5.23's `--enable-hicache` (`tests/support/host_flags.py`); the packaged
list, named with the reason, when the host cannot be reached."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help
from tests.support.processes import run_flagbot


def _config(tmp_path: Path, port: int, keys: Keys | None) -> Path:
    ssh = "connect_timeout = 2\ncommand_timeout = 5\n"
    if keys is not None:
        ssh += f'key_path = "{keys.client_key}"\nknown_hosts = "{keys.known_hosts([port])}"\n'
    path = tmp_path / "flagbot.toml"
    path.write_text(
        'default_target = "lab"\n'
        f'[database]\nsqlite_path = "{tmp_path / "state" / "flagbot.db"}"\n'
        '[targets.lab]\nunit = "sglang-qwen.service"\nbase_url = "http://127.0.0.1:9"\n'
        f'nodes = [{{ host = "127.0.0.1", port = {port}, user = "ops" }}]\n'
        "[targets.lab.ssh]\n" + ssh
    )
    return path


@pytest_asyncio.fixture
async def node(tmp_path: Path) -> AsyncIterator[tuple[FakeNode, Path]]:
    keys = Keys.make(tmp_path, 1)
    served = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    await served.start(keys.host_keys[0], keys.client_public)
    try:
        yield served, _config(tmp_path, served.port, keys)
    finally:
        await served.stop()


async def test_the_cli_takes_a_flag_of_the_hosts_list_the_packaged_list_lacks(
    node: tuple[FakeNode, Path], tmp_path: Path
) -> None:
    served, config = node
    code, out, err = await run_flagbot(config, "explain", "--json", "try", "add", "--enable-hicache")
    assert code == 0, err
    assert json.loads(out)["changes"] == [{"op": "add", "flag": "--enable-hierarchical-cache", "value": None}]
    assert "note: flags checked against the host's list for SGLang 0.5.23" in err
    assert (tmp_path / "state" / "cache" / "sglang-0.5.23-help.json").is_file()
    helps = sum("--help" in text for text in served.received)

    code, _out, err = await run_flagbot(config, "try", "add", "--no-such-flag")
    assert code == 2
    assert "error: unknown flag --no-such-flag for SGLang 0.5.23" in err
    # the version is asked each time (a host upgraded is judged by its new list); the list is cached
    assert sum("--help" in text for text in served.received) == helps
    assert sum("__version__" in text for text in served.received) == 2


async def test_the_cli_removes_a_flag_no_list_knows_with_a_note(node: tuple[FakeNode, Path]) -> None:
    _served, config = node
    code, out, err = await run_flagbot(
        config, "explain", "--json", "try", "remove", "--disable-hicache-numa-detect"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["changes"] == [{"op": "remove", "flag": "--disable-hicache-numa-detect", "value": None}]
    assert "not a flag of SGLang 0.5.23's list" in data["notes"][0]


async def test_an_unreachable_host_is_judged_by_the_packaged_list_named_on_stderr(tmp_path: Path) -> None:
    config = _config(tmp_path, 9, Keys.make(tmp_path, 1))
    code, _out, err = await run_flagbot(config, "explain", "try", "add", "--enable-hicache")
    assert code == 2
    assert (
        "note: flags checked against the packaged list for SGLang 0.5.10 (lab's node 0 cannot be reached)"
        in err
    )
    assert "error: unknown flag --enable-hicache for SGLang 0.5.10" in err
    code, _out, err = await run_flagbot(config, "explain", "status")
    assert code == 0 and "note:" not in err  # no flag, no list to name


async def test_a_try_reads_the_list_and_runs_on_one_login(node: tuple[FakeNode, Path]) -> None:
    """The flag-list read and the engine's session share node 0's connection
    (`bot.app.command_loop`): one SSH login per `flagbot try`, not one each (issue 16 item 9)."""
    served, config = node
    code, out, err = await run_flagbot(config, "try", "add", "--enable-hicache", "dry-run=yes")
    assert code == 0, err
    assert "note: flags checked against the host's list for SGLang 0.5.23" in err
    assert "nothing changed on the target" in out  # heal and preflight ran on the node too
    assert served.logins == 1
