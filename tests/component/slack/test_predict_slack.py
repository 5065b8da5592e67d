"""`/flagbot predict` in Slack through the real Bolt app on the stand-in (issue 23 item 1): the
answer is read from the store's twin start (seed-gb10), the target (port 9) is never contacted,
and a target never observed is told so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store import Store
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config
from tests.support.twin_start import twin_scenario, twin_snapshot

VIEWER = "U0VIEW"
CHANNEL = "C0PREDICT"
CONFIG = lab_config('viewers = ["*"]\n')


def posted(bot: RunningBot, needle: str) -> str:
    """Everything the bot said in the channel, to the user alone or to its response_url, joined;
    empty until `needle` is in it."""
    said = [f"{m.text} {m.blocks}" for m in bot.standin.workspace.all_messages(CHANNEL) if m.user != VIEWER]
    said += [str(r.body) for r in bot.standin.responses()]
    said += [str(e) for e in bot.standin.ephemerals(VIEWER)]
    joined = "\n".join(said)
    return joined if needle in joined else ""


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    def prepare(store: Store) -> None:
        store.add(twin_snapshot("lab", twin_scenario("seed-gb10")))

    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "predict"), prepare=prepare) as running:
        yield running


async def test_predict_answers_in_slack_with_the_band_the_steps_and_the_call(bot: RunningBot) -> None:
    await bot.standin.slash(
        "predict add --max-running-requests 64 max_running_requests>=48", user=VIEWER, channel=CHANNEL
    )
    await bot.services.drain()
    answer = await bot.standin.wait_for(lambda: posted(bot, "fail (confident)"))
    assert "_resolve_max_num_reqs" in answer
    assert "handle_max_mamba_cache" in answer
    assert "no history yet" in answer


async def test_a_target_never_observed_is_told_so_in_slack(tmp_path: Path) -> None:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "predict")) as bot:
        await bot.standin.slash("predict set --mem-fraction-static=0.85", user=VIEWER, channel=CHANNEL)
        await bot.services.drain()
        found = await bot.standin.wait_for(lambda: posted(bot, "no start of lab with its memory lines"))
    assert "run `observe target=lab`" in found
