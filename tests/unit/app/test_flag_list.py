"""The flag list a command is judged by (bot/app/flag_list.py): the target host's own `--help`,
read over SSH from a fake node that prints the twin's help text, cached per version and per target;
the packaged list, named with the reason, only when the host cannot answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.app.flag_list import cached_flag_list, flag_list, needs_flag_list, read_flag_list, target_flag_list
from bot.commands import CommandError, parse_command
from bot.commands.target_catalog import UnknownTargetError
from bot.config import Settings
from bot.target.flaglist import forget_cache
from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help

HICACHE = ["try", "add", "--enable-hicache"]


def settings_for(tmp_path: Path, port: int, keys: Keys | None, version: str | None = None) -> Settings:
    ssh: dict[str, object] = {"connect_timeout": 2, "command_timeout": 5}
    if keys is not None:
        ssh |= {"key_path": str(keys.client_key), "known_hosts": str(keys.known_hosts([port]))}
    target: dict[str, object] = {
        "unit": "sglang-qwen.service",
        "base_url": "http://127.0.0.1:9",
        "nodes": [{"host": "127.0.0.1", "port": port, "user": "ops"}],
        "ssh": ssh,
    }
    if version is not None:
        target["sglang_version"] = version
    return Settings.model_validate(
        {
            "default_target": "lab",
            "targets": {"lab": target},
            "database": {"sqlite_path": str(tmp_path / "state" / "flagbot.db")},
        }
    )


@pytest_asyncio.fixture
async def host(tmp_path: Path) -> AsyncIterator[tuple[FakeNode, Settings]]:
    """A node whose SGLang says 0.5.23 and prints the twin's help with 0.5.23's `--enable-hicache`."""
    forget_cache()
    keys = Keys.make(tmp_path, 1)
    node = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    await node.start(keys.host_keys[0], keys.client_public)
    try:
        yield node, settings_for(tmp_path, node.port, keys)
    finally:
        await node.stop()
        forget_cache()


def test_only_words_that_name_a_flag_need_the_list() -> None:
    assert needs_flag_list(HICACHE)
    assert needs_flag_list(["try", "remove", "--x"])
    assert needs_flag_list(["revert", "flags=--enable-metrics"])
    assert needs_flag_list(["run", "try", "changes=--enable-metrics"])
    assert not needs_flag_list(["try", "env", "set", "NCCL_DEBUG=INFO"])
    assert not needs_flag_list(["grep", "--enable-metrics"])  # a pattern, not a change
    assert not needs_flag_list(["status"])
    assert not needs_flag_list(["verify", "max_running_requests>=-1"])


async def test_the_host_list_takes_a_flag_the_packaged_list_lacks_and_is_cached_per_version(
    host: tuple[FakeNode, Settings], tmp_path: Path
) -> None:
    node, settings = host
    with pytest.raises(CommandError, match=r"unknown flag --enable-hicache for SGLang 0\.5\.10"):
        parse_command(HICACHE)  # the packaged list alone refuses it
    assert cached_flag_list(settings, HICACHE) is None  # never read: a miss, no SSH
    assert node.received == []

    found = await read_flag_list(settings, HICACHE)
    assert found.host and found.note == "host's list for SGLang 0.5.23" and found.catalog.version == "0.5.23"
    invocation = parse_command(HICACHE, catalog=found.catalog)
    assert [change.flag for change in invocation.changes] == ["--enable-hierarchical-cache"]
    with pytest.raises(CommandError, match=r"unknown flag --no-such-flag for SGLang 0\.5\.23") as refused:
        parse_command(["try", "add", "--no-such-flag"], catalog=found.catalog)
    assert refused.value.flag_list

    # the list and the target's version are kept: the next command needs no SSH
    cache = tmp_path / "state" / "cache"
    assert json.loads((cache / "target-lab-sglang.json").read_text())["sglang_version"] == "0.5.23"
    assert (cache / "sglang-0.5.23-help.json").is_file()
    before = len(node.received)
    hit = cached_flag_list(settings, HICACHE)
    assert hit is not None and hit.catalog.version == "0.5.23" and hit.note == "host's list for SGLang 0.5.23"
    assert target_flag_list(settings, "lab").version == "0.5.23"
    forget_cache()  # a new process: read back from the JSON files
    again = cached_flag_list(settings, HICACHE)
    assert again is not None and "--enable-hicache" in again.catalog
    assert len(node.received) == before


async def test_a_new_version_on_the_host_is_read_and_remembered(host: tuple[FakeNode, Settings]) -> None:
    node, settings = host
    await read_flag_list(settings, HICACHE)
    node.sglang_version = "0.5.24"
    node.help_text = host_help(aliases={}, drop=["--enable-metrics"])
    upgraded = await read_flag_list(settings, HICACHE)  # the CLI's way: the version is asked each time
    assert upgraded.catalog.version == "0.5.24" and upgraded.catalog.get("--enable-hicache") is None
    assert upgraded.catalog.get("--enable-metrics") is None  # (a prefix of another flag, so not `in`)
    hit = cached_flag_list(settings, HICACHE)
    assert hit is not None and hit.catalog.version == "0.5.24"
    help_reads = [text for text in node.received if "--help" in text]
    assert len(help_reads) == 2  # one per version


async def test_a_command_without_flags_never_asks_the_host(host: tuple[FakeNode, Settings]) -> None:
    node, settings = host
    found = await flag_list(settings, ["status"])
    assert not found.host and not found.needed and found.catalog.version == "0.5.10"
    assert node.received == []


async def test_an_unreachable_host_is_judged_by_the_packaged_list_named_in_the_note(tmp_path: Path) -> None:
    forget_cache()
    settings = settings_for(tmp_path, 9, Keys.make(tmp_path, 1))  # a closed port
    found = await read_flag_list(settings, HICACHE)
    assert not found.host and found.catalog.version == "0.5.10"
    assert found.note == "packaged list for SGLang 0.5.10 (lab's node 0 cannot be reached)"
    assert "127.0.0.1" not in found.note
    assert cached_flag_list(settings, HICACHE) is None  # nothing remembered: the next one asks again


async def test_a_host_without_sglang_falls_back_and_says_why(tmp_path: Path) -> None:
    forget_cache()
    keys = Keys.make(tmp_path, 1)
    node = FakeNode(FakeSystemd())  # neither version nor --help
    await node.start(keys.host_keys[0], keys.client_public)
    try:
        found = await read_flag_list(settings_for(tmp_path, node.port, keys, version="0.5.10"), HICACHE)
    finally:
        await node.stop()
        forget_cache()
    assert not found.host
    assert (
        found.note == "packaged list for SGLang 0.5.10 (SGLang 0.5.10's --help gave no flag list on node 0)"
    )


async def test_an_unknown_target_is_refused_before_any_list(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, 9, None)
    with pytest.raises(UnknownTargetError, match="unknown target 'nope'"):
        cached_flag_list(settings, [*HICACHE, "target=nope"])
    with pytest.raises(UnknownTargetError):
        await read_flag_list(settings, [*HICACHE, "target=nope"])


async def test_a_remembered_version_belongs_to_the_host_and_unit_it_was_read_from(
    host: tuple[FakeNode, Settings], tmp_path: Path
) -> None:
    node, settings = host
    await read_flag_list(settings, HICACHE)
    moved = settings_for(tmp_path, node.port + 1, None)  # the config now names another node
    assert cached_flag_list(moved, HICACHE) is None


async def test_commands_that_miss_at_once_share_one_read_of_the_host(host: tuple[FakeNode, Settings]) -> None:
    """A burst of Slack `try`s on a cold cache: one SSH login and one `--help`, the same answer each."""
    node, settings = host
    answers = await asyncio.gather(*(read_flag_list(settings, HICACHE) for _ in range(8)))
    assert {answer.note for answer in answers} == {"host's list for SGLang 0.5.23"}
    assert node.logins == 1
    assert len([text for text in node.received if "--help" in text]) == 1
    await read_flag_list(settings, HICACHE)  # once answered, the next miss reads the host again
    assert node.logins == 2


async def test_a_caller_that_gives_up_leaves_the_shared_read_to_the_others(
    host: tuple[FakeNode, Settings],
) -> None:
    node, settings = host
    impatient = asyncio.ensure_future(read_flag_list(settings, HICACHE))
    patient = asyncio.ensure_future(read_flag_list(settings, HICACHE))
    await asyncio.sleep(0)  # both are waiting on the one read
    impatient.cancel()
    found = await patient
    assert found.host and found.catalog.version == "0.5.23"
    assert impatient.cancelled()
    assert node.logins == 1


async def test_a_missing_key_file_is_named_in_the_note_not_called_unreachable(tmp_path: Path) -> None:
    forget_cache()
    keys = Keys.make(tmp_path, 1)
    keys.client_key.unlink()
    found = await read_flag_list(settings_for(tmp_path, 9, keys), HICACHE)
    assert not found.host
    assert found.note == "packaged list for SGLang 0.5.10 (lab's ssh.key_path does not exist)"
