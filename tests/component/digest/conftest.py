"""Fixtures of the digest's component tests: the seeded week on both backends, the Slack stand-in."""

from __future__ import annotations

import pytest

from bot.config import Settings
from bot.store import Store
from tests.component.digest.digest_seed import TZ, Seeded, seed_week
from tests.component.loop import conftest as loop_fixtures
from tests.component.slack import conftest as slack_fixtures

# one definition each, shared with the loop's and Slack's component tests
sync_store = loop_fixtures.sync_store
"""A migrated store, once on SQLite and once on PostgreSQL."""
standin = slack_fixtures.standin
"""The local Slack stand-in (Web API, the files_upload_v2 flow), stopped when the test ends."""
client = slack_fixtures.client
"""The real slack_sdk async client, pointed at the stand-in."""


@pytest.fixture
def digest_settings() -> Settings:
    return Settings(schedules={"timezone": TZ, "digest_channel": "#flagbot-ops"})


@pytest.fixture
def seeded(sync_store: Store, digest_settings: Settings) -> Seeded:
    return Seeded(sync_store, digest_settings, seed_week(sync_store))
