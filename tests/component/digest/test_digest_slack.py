"""The digest in Slack, against the local stand-in with the real slack_sdk client: the Monday post
with its chart, `/flagbot digest` in a thread, and the thread each run records for its link."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app.digest import week_ended_before
from bot.commands import parse_command
from bot.config import Settings
from bot.digest.threads import threads_of
from bot.digest.week import WeekFormatError
from bot.loop.report import RunStart
from bot.slack.digest import digest_answer, post_weekly_digest
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter
from bot.slack.services import SlackServices
from bot.store import AsyncStore
from flagbot_lab.standin import Standin
from flagbot_lab.standin.blocks import block_errors
from tests.component.digest.digest_seed import TARGET, Seeded

pytestmark = pytest.mark.parametrize("sync_store", ["sqlite"], indirect=True)
PNG = b"\x89PNG\r\n\x1a\n"
MONDAY_0900_BERLIN = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
async def services(seeded: Seeded) -> AsyncIterator[SlackServices]:
    astore = AsyncStore(seeded.store)
    yield SlackServices(seeded.settings, astore)
    astore._executor.shutdown(wait=True)  # the store itself is closed by its fixture


def _texts(message: object) -> str:
    blocks = getattr(message, "blocks", [])
    return "\n".join(
        str((b.get("text") or {}).get("text", "")) if isinstance(b.get("text"), dict) else "" for b in blocks
    )


async def test_the_weekly_digest_goes_to_the_configured_channel_with_its_chart(
    services: SlackServices, standin: Standin, client: AsyncWebClient
) -> None:
    assert str(week_ended_before(MONDAY_0900_BERLIN, "Europe/Berlin")) == "2026-W48"
    await post_weekly_digest(services, client, MONDAY_0900_BERLIN)

    roots = standin.messages("C0FLAGBOT")  # digest_channel is "#flagbot-ops"
    digest = [m for m in roots if "Weekly post-mortem 2026-W48" in _texts(m)]
    assert len(digest) == 1
    assert block_errors(digest[0].blocks) == []
    assert "4 experiments" in digest[0].text
    assert "RuntimeError: CUDA out of memory" in _texts(digest[0])
    (chart,) = standin.files()
    assert chart.content is not None and chart.content.startswith(PNG) and len(chart.content) > 10_000
    assert (chart.channel, chart.thread_ts) == ("C0FLAGBOT", None)
    assert chart.name == "flagbot-digest-2026-W48.png"
    shared = [m for m in roots if m.files]
    assert [f.id for m in shared for f in m.files] == [chart.id]


async def test_no_digest_channel_posts_nothing(
    seeded: Seeded, standin: Standin, client: AsyncWebClient
) -> None:
    astore = AsyncStore(seeded.store)
    try:
        quiet = SlackServices(Settings(schedules={"timezone": "Europe/Berlin"}), astore)
        await post_weekly_digest(quiet, client, MONDAY_0900_BERLIN)
    finally:
        astore._executor.shutdown(wait=True)
    assert standin.calls("chat.postMessage") == []
    assert standin.files() == []


async def test_flagbot_digest_answers_in_the_thread_it_was_asked_in(
    services: SlackServices, standin: Standin, client: AsyncWebClient
) -> None:
    root = await client.chat_postMessage(channel="C0FLAGBOT", text="how did last week go?")
    invocation = parse_command(["digest", "week=2026-W48"])
    answer = await digest_answer(
        services, client, invocation, user="U0VIEW", channel="C0FLAGBOT", thread_ts=str(root["ts"])
    )
    assert answer is None  # posted here, blocks and chart
    replies = standin.messages("C0FLAGBOT", str(root["ts"]))
    assert any("Weekly post-mortem 2026-W48" in _texts(m) for m in replies)
    (chart,) = standin.files()
    assert chart.thread_ts == str(root["ts"])


async def test_a_malformed_week_is_refused_and_nothing_is_posted(
    services: SlackServices, standin: Standin, client: AsyncWebClient
) -> None:
    invocation = dataclasses.replace(parse_command(["digest"]), options={"week": "2026-48"})
    with pytest.raises(WeekFormatError, match="2026-W48"):
        await digest_answer(services, client, invocation, user="U0VIEW", channel="C0FLAGBOT", thread_ts=None)
    assert standin.calls("chat.postMessage") == []


async def test_a_run_records_its_thread_for_the_digest(
    services: SlackServices, seeded: Seeded, standin: Standin, client: AsyncWebClient
) -> None:
    card = CardState(
        experiment_id=None, playbook="try", target=TARGET, actor="U0OPER", command="/flagbot try"
    )
    root = await client.chat_postMessage(channel="C0FLAGBOT", text="card")
    reporter = SlackThreadReporter(client, "C0FLAGBOT", str(root["ts"]), card, store=services.store)
    experiment = seeded.ids["e_kept"]
    await reporter.started(RunStart(experiment, "try", TARGET, "slack:U0OPER", {}))

    link = threads_of(seeded.store, [experiment])[experiment]
    assert (link.channel, link.ts) == ("C0FLAGBOT", str(root["ts"]))
    assert link.permalink == f"{standin.base_url}/archives/C0FLAGBOT/p{str(root['ts']).replace('.', '')}"
