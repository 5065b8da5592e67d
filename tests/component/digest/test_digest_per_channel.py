"""The Monday digest, one part per channel: a target with its own `channel` gets its lines there,
titled with its name; `schedules.digest_channel` gets every other target's; the week is built
once for all channels (counted), not once per channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import digest as digests
from bot.config import Settings
from bot.digest.build import build_digest
from bot.slack.digest import post_weekly_digest
from bot.slack.services import SlackServices
from bot.store import AsyncStore
from flagbot_lab.standin import Standin
from flagbot_lab.standin.model import Channel
from tests.component.digest.digest_seed import TARGET, Seeded

MONDAY_0900_BERLIN = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
TEAM = Channel("C0QWENTEAM", "qwen-team")


@pytest.fixture
def digest_settings() -> Settings:
    """The seeded week's target posts to its team's channel; `other` has none of its own."""
    node: dict[str, Any] = {"unit": "sglang.service", "nodes": [{"host": "10.0.0.1"}]}
    return Settings.model_validate(
        {
            "schedules": {"timezone": "Europe/Berlin", "digest_channel": "#flagbot-ops"},
            "targets": {TARGET: {**node, "channel": TEAM.id}, "other": node},
        }
    )


@pytest.fixture
async def services(seeded: Seeded) -> AsyncIterator[SlackServices]:
    astore = AsyncStore(seeded.store)
    yield SlackServices(seeded.settings, astore)
    astore._executor.shutdown(wait=True)  # the store itself is closed by its fixture


def _posted(standin: Standin, channel: str) -> list[str]:
    return [m.text for m in standin.messages(channel) if "Weekly post-mortem 2026-W48" in m.text]


@pytest.mark.parametrize("sync_store", ["sqlite"], indirect=True)
async def test_each_channel_gets_its_targets_part_from_one_build(
    services: SlackServices, standin: Standin, client: AsyncWebClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.workspace.add_channel(TEAM)
    builds: list[str | None] = []
    real = build_digest

    def counted(*args: Any) -> Any:
        builds.append(args[-1])
        return real(*args)

    monkeypatch.setattr(digests, "build_digest", counted)  # the name bot.app.digest calls
    await post_weekly_digest(services, client, MONDAY_0900_BERLIN)

    assert builds == [None]  # one build of every target for both channels
    [team] = _posted(standin, TEAM.id)
    assert f"on {TARGET}" in team and "4 experiments" in team
    [general] = _posted(standin, "C0FLAGBOT")  # digest_channel is "#flagbot-ops"
    assert f"on {TARGET}" not in general and "4 experiments" not in general
    charts = {f.channel for f in standin.files()}
    assert TEAM.id in charts  # the team's part has its own chart


def test_the_weekly_channels_are_the_digest_channel_and_each_targets_own(digest_settings: Settings) -> None:
    assert digests.weekly_channels(digest_settings) == ["#flagbot-ops", TEAM.id]
    assert digests.digest_channel_of(digest_settings, TARGET) == TEAM.id
    assert digests.digest_channel_of(digest_settings, "other") == "#flagbot-ops"
    assert digests.digest_channel_of(digest_settings, "removed-since") == "#flagbot-ops"
    alone = Settings.model_validate(
        {"targets": {TARGET: {"unit": "sglang.service", "nodes": [{"host": "10.0.0.1"}], "channel": TEAM.id}}}
    )
    assert digests.weekly_channels(alone) == [TEAM.id]  # no digest_channel: the team's digest all the same
