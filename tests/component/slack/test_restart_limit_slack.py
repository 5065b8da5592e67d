"""`policy.max_restarts_per_hour` in Slack, through the real slack-bolt app on the stand-in: a
restarting command over the limit is refused ephemerally before the ack, with the time of the
next allowed restart, and nothing is posted or run. The target listens nowhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.store import Store
from bot.store.experiments import list_experiments
from bot.store.models import utcnow
from bot.store.records import RESTART_ACTION, audit, restart_times
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config

OPERATOR = "U0OPER"
CHANNEL = "C0LIMIT"
CONFIG = lab_config(
    """operators = ["U0OPER"]
viewers = ["*"]
""",
    after="""[targets.lab.policy]
max_restarts_per_hour = 1
""",
)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    def restarted_15_minutes_ago(sync: Store) -> None:
        row = audit(sync, actor="flagbot", target="lab", action=RESTART_ACTION)
        row.at = utcnow() - timedelta(minutes=15)
        sync.add(row)

    async with configured_bot(
        tmp_path, CONFIG, Channel(CHANNEL, "limit"), prepare=restarted_15_minutes_ago
    ) as running:
        yield running


async def test_a_restart_over_the_hourly_limit_is_refused_with_the_next_allowed_time(bot: RunningBot) -> None:
    store = bot.services.store
    [last] = await store.run(restart_times, store.store, "lab", since=utcnow() - timedelta(hours=1))
    expected = (
        "error: lab: `try` needs 1 restart and the target had 1 restart in the last hour "
        f"(policy.max_restarts_per_hour = 1); the next restart is allowed at "
        f"{last + timedelta(hours=1):%Y-%m-%d %H:%M:%S} UTC"
    )
    answer = await bot.standin.slash("try env set NCCL_DEBUG=INFO", user=OPERATOR, channel=CHANNEL)
    body = answer.json()
    assert (answer.status, body["response_type"]) == (200, "ephemeral")
    assert body["text"].startswith(expected), body["text"]
    await bot.standin.mention("try env set NCCL_DEBUG=INFO", user=OPERATOR, channel=CHANNEL)
    await bot.services.drain()
    shown = [e.text for e in bot.standin.ephemerals(OPERATOR)]
    assert len(shown) == 2 and all(text.startswith(expected) for text in shown)
    posts = [m for m in bot.standin.workspace.all_messages(CHANNEL) if m.user != OPERATOR]
    assert posts == []
    assert await store.run(list_experiments, store.store, "lab") == []
