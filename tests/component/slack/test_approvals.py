"""A production restart from Slack waits for a second person: the requester cannot approve it,
an approver can (once), a denial runs nothing; deciding is atomic and expiry is enforced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, load_settings
from bot.store import AsyncStore, Store
from bot.store.approvals import create_request, decide_request, get_request
from bot.store.models import utcnow
from tests.support.host_flags import seed_flag_lists
from tests.support.slack_bot import RunningBot, running_bot

CHANNEL = "C0FLAGBOT"


def _known_flags(settings: Settings) -> Settings:
    """The targets' flag lists in the cache, as on a bot that has read its hosts before: flags
    are judged before the ack (tests/component/slack/test_host_flag_list.py covers a miss)."""
    seed_flag_lists(settings)
    return settings


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "prod"\n[targets.prod]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n'
        "[targets.prod.ssh]\nconnect_timeout = 1\n"
        '[targets.prod.policy]\nrequire_approval = true\napproval_expiry = "1h"\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\noperators = ["U0OPER", "U0APPR"]\napprovers = ["U0APPR"]\nviewers = ["*"]\n'
    )
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(_known_flags(load_settings(config, required=True)), store) as running:
            yield running
    finally:
        await store.aclose()


def approval_card(bot: RunningBot) -> Any:
    cards = [m for m in bot.standin.messages(CHANNEL) if "flagbot_approve" in str(m.blocks)]
    return cards[-1] if cards else None


@pytest.mark.asyncio
async def test_the_requester_cannot_approve_an_approver_can_once(bot: RunningBot) -> None:
    standin = bot.standin
    answer = await standin.slash("try add --enable-metrics", user="U0OPER", channel=CHANNEL)
    assert "needs approval" in answer.json()["text"]
    card = await standin.wait_for(lambda: approval_card(bot))
    await standin.click(CHANNEL, card.ts, "flagbot_approve", user="U0OPER")
    refused = await standin.wait_for(lambda: standin.ephemerals("U0OPER")[1:])
    assert "someone else" in refused[-1].text, refused[-1].text
    assert "awaiting-approval" in standin.message(CHANNEL, card.ts).text

    await asyncio.gather(  # a double click: both reach the bot before the card changes
        standin.click(CHANNEL, card.ts, "flagbot_approve", user="U0APPR"),
        standin.click(CHANNEL, card.ts, "flagbot_approve", user="U0APPR"),
    )
    await standin.wait_for(lambda: "approved" in standin.message(CHANNEL, card.ts).text)
    await bot.services.drain()
    updated = standin.message(CHANNEL, card.ts)
    assert "approved by U0APPR" in str(updated.blocks)
    runs = [m for m in standin.thread(CHANNEL, card.ts) if "flagbot try" in m.text and m.ts != card.ts]
    assert len(runs) == 1, ([m.text[:90] for m in standin.thread(CHANNEL, card.ts)], standin.ephemerals())

    before = len(standin.thread(CHANNEL, card.ts))
    assert "flagbot_approve" not in str(updated.blocks)  # the decided card has no buttons left
    await bot.services.drain()
    await bot.services.drain()
    assert len(standin.thread(CHANNEL, card.ts)) == before  # decided once: no second run


@pytest.mark.asyncio
async def test_a_denied_request_runs_nothing(bot: RunningBot) -> None:
    standin = bot.standin
    await standin.slash("try add --enable-metrics", user="U0OPER", channel=CHANNEL)
    card = await standin.wait_for(lambda: approval_card(bot))
    await standin.click(CHANNEL, card.ts, "flagbot_deny", user="U0APPR")
    await standin.wait_for(lambda: "denied" in standin.message(CHANNEL, card.ts).text)
    await bot.services.drain()
    assert [m.ts for m in standin.thread(CHANNEL, card.ts)] == [card.ts]


def test_deciding_is_once_and_expiry_is_enforced(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'a.db'}")
    store.upgrade()
    try:
        now = utcnow()
        first = create_request(
            store,
            target="prod",
            command="try add --x",
            requester="U1",
            channel="C1",
            needs="approval",
            expires_in=timedelta(minutes=5),
            now=now,
        )
        assert first.id is not None
        assert decide_request(store, first.id, status="approved", by="U2", now=now) is not None
        assert decide_request(store, first.id, status="denied", by="U3", now=now) is None
        late = create_request(
            store,
            target="prod",
            command="try add --x",
            requester="U1",
            channel="C1",
            needs="approval",
            expires_in=timedelta(minutes=5),
            now=now,
        )
        assert late.id is not None
        assert (
            decide_request(store, late.id, status="approved", by="U2", now=now + timedelta(minutes=6)) is None
        )
        expired = get_request(store, late.id)
        assert expired is not None and expired.status == "expired"
        with pytest.raises(ValueError, match="approved or denied"):
            decide_request(store, late.id, status="maybe", by="U2")
    finally:
        store.close()


@pytest.mark.asyncio
async def test_a_rollback_of_a_production_target_waits_for_an_approver_too(bot: RunningBot) -> None:
    standin = bot.standin
    answer = await standin.slash("rollback", user="U0OPER", channel=CHANNEL)
    assert "`rollback` needs approval" in answer.json()["text"]
    card = await standin.wait_for(lambda: approval_card(bot))
    assert "/flagbot rollback" in str(card.blocks)
    await bot.services.drain()
    assert [m.ts for m in standin.messages(CHANNEL)] == [card.ts]  # nothing ran: only the request
