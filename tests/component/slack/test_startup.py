"""At `flagbot serve` start, a run a stopped bot left unfinished is settled and said in Slack."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.loop.engine import Engine
from bot.loop.playbook import Playbook, load_playbook
from bot.loop.report import MemoryReporter
from bot.slack.services import SlackServices
from bot.slack.startup import reconcile_at_start
from bot.store import AsyncStore, Store
from bot.store.experiments import get_experiment
from bot.store.leases import current
from flagbot_lab.standin import Standin
from tests.support.loop_actions import CRASHY, Probe, registered_actions

TARGET = "t1"
CHANNEL = "C0FLAGBOT"
TOKEN = "xoxb-startup-test"


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as registered:
        yield registered


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    astore = AsyncStore(opened)
    yield astore
    await astore.aclose()


def crashy(tmp_path: Path) -> Playbook:
    path = tmp_path / "books" / "crashy.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text("name: crashy\n" + textwrap.dedent(CRASHY), encoding="utf-8")
    return load_playbook(path)


@pytest.mark.parametrize("resume", [True, False])
async def test_an_interrupted_run_is_settled_at_start_and_posted(
    tmp_path: Path, store: AsyncStore, probe: Probe, resume: bool
) -> None:
    settings = Settings(
        database={"sqlite_path": tmp_path / "state" / "flagbot.db"}, slack={"investigation_channel": CHANNEL}
    )
    book = crashy(tmp_path)
    run = asyncio.create_task(
        Engine(settings, store, MemoryReporter()).run(book, {}, target=TARGET, actor="slack:U0OPER")
    )
    await asyncio.wait_for(probe.arrived("g").wait(), 30)
    run.cancel()  # what the end of serve's stop grace does
    with pytest.raises(asyncio.CancelledError):
        await run
    probe.resume_answer = {"resume": resume, "why": "flags as intended" if resume else "flags differ"}
    probe.gate("g").set()
    standin = Standin("unused-secret", bot_token=TOKEN)
    await standin.start()
    try:
        services = SlackServices(settings, store)
        client = AsyncWebClient(token=TOKEN, base_url=standin.api_url)
        [outcome] = await reconcile_at_start(services, client, playbooks={"crashy": book})
        assert outcome.status == ("succeeded" if resume else "rolled-back")
        [posted] = standin.messages(CHANNEL)
        assert (
            f"experiment #{outcome.experiment_id} (crashy)" in posted.text and outcome.status in posted.text
        )
        row = await store.run(get_experiment, store.store, outcome.experiment_id)
        assert row is not None and row.status == outcome.status
        assert await store.run(current, store.store, TARGET) is None  # the lease is given back
        assert await reconcile_at_start(services, client, playbooks={"crashy": book}) == []  # settled once
    finally:
        await standin.stop()


async def test_nothing_unfinished_posts_nothing(tmp_path: Path, store: AsyncStore) -> None:
    settings = Settings(
        database={"sqlite_path": tmp_path / "state" / "flagbot.db"}, slack={"investigation_channel": CHANNEL}
    )
    standin = Standin("unused-secret", bot_token=TOKEN)
    await standin.start()
    try:
        services = SlackServices(settings, store)
        client = AsyncWebClient(token=TOKEN, base_url=standin.api_url)
        assert await reconcile_at_start(services, client, playbooks={}) == []
        assert standin.calls("chat.postMessage") == []
    finally:
        await standin.stop()
