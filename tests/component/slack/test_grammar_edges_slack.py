"""Chat's grammar edges through the real slack-bolt app on the stand-in (issue 22 item 5): a
backticked flag and the CLI's `--dry-run` are read as on the CLI (a dry run of `add
--enable-metrics`, not an SGLang flag `--dry-run`), and a spaced expectation is one expectation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.store.experiments import list_experiments
from flagbot_lab.standin.model import Channel
from tests.support.slack_bot import RunningBot, configured_bot, lab_config

OPERATOR = "U0OPER"
CHANNEL = "C0EDGES"
CONFIG = lab_config("""operators = ["U0OPER"]
viewers = ["*"]
""")


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "edges")) as running:
        yield running


async def test_a_backticked_flag_and_dash_dash_dry_run_are_read_as_on_the_cli(bot: RunningBot) -> None:
    text = "try add `--enable-metrics` --dry-run `max_running_requests >= 48`"
    body = (await bot.standin.slash(text, user=OPERATOR, channel=CHANNEL)).json()
    assert body["text"].startswith("starting `try`: follow it in the thread"), body
    await bot.services.drain()
    [experiment] = await bot.services.store.run(list_experiments, bot.services.store.store, "lab")
    assert experiment.params["dry_run"] is True
    assert [c["flag"] for c in experiment.params["changes"]] == ["--enable-metrics"]
    assert experiment.params["expect"] == ["max_running_requests>=48"]
