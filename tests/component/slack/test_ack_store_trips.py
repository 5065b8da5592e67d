"""What one slash `try` asks of the store for its gates (freeze and restart limit), counted
through the real slack-bolt app on the stand-in (issue 16, item 9: the ack's cost).

Before this count, a `try` asked for the target's freeze four times and for its restarts three
times: before the ack, again after the host's flag list, when the thread opened and when the run
began. Now the facts come in one trip (`bot.store.records.gate_facts`) before the ack and one when
the thread opens; the run does not ask again. A count, not a timing: the machine's load does not
move it. The target is busy (its lease is held), so nothing reaches a node.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.store import AsyncStore, Store
from bot.store.leases import acquire
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config

OPERATOR = "U0OPER"
CHANNEL = "C0TRIPS"
CONFIG = lab_config('operators = ["U0OPER"]\nviewers = ["*"]\n')


def _held_by_another_run(sync: Store) -> None:
    acquire(sync, "lab", holder="other", host="elsewhere", pid=1, purpose="verify", ttl_s=3600)


@pytest.fixture(params=[True, False], ids=["flag list known", "flag list read from the host"])
async def bot(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[RunningBot]:
    async with configured_bot(
        tmp_path, CONFIG, Channel(CHANNEL, "trips"), known_flags=request.param, prepare=_held_by_another_run
    ) as running:
        yield running


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Every call sent to the store's thread, by the function's name."""
    counted: collections.Counter[str] = collections.Counter()
    original = AsyncStore.run

    async def counting(self: AsyncStore, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        counted[getattr(func, "__name__", repr(func))] += 1
        return await original(self, func, *args, **kwargs)

    monkeypatch.setattr(AsyncStore, "run", counting)
    return counted


async def test_a_try_asks_for_its_gates_once_before_the_ack_and_once_at_the_thread(
    bot: RunningBot, trips: collections.Counter[str]
) -> None:
    answer = await bot.standin.slash("try set --mem-fraction-static=0.8", user=OPERATOR, channel=CHANNEL)
    assert answer.status == 200
    await bot.services.drain()
    said = [m.text for m in bot.standin.workspace.all_messages(CHANNEL) if m.user != OPERATOR]
    said += [e.text for e in bot.standin.ephemerals(OPERATOR)]
    assert any("busy" in text or "lease" in text for text in said), said  # it got to the run
    assert trips["gate_facts"] == 2, trips
    assert trips["latest_freeze_event"] == trips["restart_times"] == 0, trips
