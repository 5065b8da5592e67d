"""The Slack app against the stand-in, on the two-node testbed: one bot per test, its own store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from bot.config import load_settings
from bot.store import AsyncStore, Store
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import write_config
from tests.support.slack_bot import RunningBot, running_bot


@pytest_asyncio.fixture(loop_scope="session")
async def bot(testbed: Testbed, tmp_path: Path) -> AsyncIterator[RunningBot]:
    """flagbot's app on the testbed's target `twin` (profile `probe`), with an admin and an operator."""
    config = write_config(testbed, tmp_path)
    config.write_text(
        config.read_text() + '\n[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
    )
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(load_settings(config, required=True), store) as running:
            yield running
    finally:
        await store.aclose()
