"""A CLI command that reads its target host's flag list and then runs its playbook logs in to
node 0 once, not once per `asyncio.run` (bot/app/command_loop.py; issue 16 item 9).

The fake node (tests/support/fake_node.py, asyncssh on loopback) counts logins; it serves from
a loop of its own in a thread, since the command loop is the caller's thread's, as in the CLI."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.command_loop import command_loop, run_async
from bot.app.flag_list import read_flag_list
from bot.config import Settings
from bot.target.flaglist import forget_cache
from bot.target.session import TargetSession
from bot.target.ssh_pool import current_pool
from bot.target.unit import read_unit
from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help
from tests.unit.app.test_flag_list import HICACHE, settings_for


@pytest.fixture
def host(tmp_path: Path) -> Iterator[tuple[FakeNode, Settings]]:
    forget_cache()
    keys = Keys.make(tmp_path, 1)
    node = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(node.start(keys.host_keys[0], keys.client_public), loop).result(30)
    try:
        yield node, settings_for(tmp_path, node.port, keys)
    finally:
        asyncio.run_coroutine_threadsafe(node.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
        forget_cache()


async def _engine_like(settings: Settings) -> str:
    """What the run does after the flag list: a session of its own on the target."""
    async with TargetSession.open("lab", settings.targets["lab"]) as ts:
        return (await read_unit(ts.node0)).state.active_state


def _a_try(settings: Settings) -> None:
    found = run_async(read_flag_list(settings, HICACHE))
    assert found.host and found.catalog.version == "0.5.23"
    assert run_async(_engine_like(settings))


def test_without_a_command_loop_each_part_logs_in(host: tuple[FakeNode, Settings]) -> None:
    node, settings = host
    _a_try(settings)
    assert node.logins == 2


def test_in_a_command_loop_the_flag_list_and_the_run_share_one_login(host: tuple[FakeNode, Settings]) -> None:
    node, settings = host
    with command_loop():
        _a_try(settings)
        with command_loop():  # a block inside another is the outer one's
            assert run_async(_engine_like(settings))
        assert current_pool() is not None
    assert node.logins == 1
    assert current_pool() is None  # closed with the block: nothing outlives the command


def test_a_command_that_fails_still_closes_its_connections(host: tuple[FakeNode, Settings]) -> None:
    node, settings = host

    def failing() -> None:
        with command_loop():
            _a_try(settings)
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        failing()
    assert current_pool() is None
    _a_try(settings)  # a later command opens its own
    assert node.logins == 3
