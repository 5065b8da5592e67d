"""Follow-ups act on their experiment's target: with a dev target (the default) and a production
one (`require_approval`), the Revert button and `@flagbot revert` in a production thread ask an
approval for production and never touch dev; `revert ID target=dev` of a production experiment
is refused before anything runs. Through the real Bolt app on the Slack stand-in; the targets'
hosts listen nowhere (loopback port 9), so nothing could have run quietly either."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings, load_settings
from bot.digest.threads import record_thread
from bot.slack.card import action_value
from bot.store import AsyncStore, Store
from bot.store.approvals import get_request
from bot.store.experiments import create_experiment, list_experiments, update_experiment
from bot.store.leases import current
from bot.store.records import audit_events
from bot.target.ledger import Ledger
from flagbot_lab.standin.model import Message
from tests.support.host_flags import seed_flag_lists
from tests.support.pending_decision import pending_try
from tests.support.slack_bot import RunningBot, running_bot

CHANNEL = "C0FLAGBOT"
OPERATOR, APPROVER = "U0OPER", "U0APPR"
CONFIG = """default_target = "dev"
[database]
sqlite_path = "{db}"
[slack.rbac]
operators = ["U0OPER", "U0APPR"]
approvers = ["U0APPR"]
viewers = ["*"]
[targets.dev]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.dev.ssh]
connect_timeout = 1
[targets.prod]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.prod.ssh]
connect_timeout = 1
[targets.prod.policy]
require_approval = true
approval_expiry = "1h"
"""


def _known_flags(settings: Settings) -> Settings:
    """The targets' flag lists in the cache, as on a bot that has read its hosts before: flags
    are judged before the ack (tests/component/slack/test_host_flag_list.py covers a miss)."""
    seed_flag_lists(settings)
    return settings


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    db = tmp_path / "flagbot.db"
    config = tmp_path / "flagbot.toml"
    config.write_text(CONFIG.format(db=db))
    sync = Store.open(f"sqlite:///{db}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(_known_flags(load_settings(config, required=True)), store) as running:
            yield running
    finally:
        await store.aclose()


async def production_try(bot: RunningBot) -> int:
    """A finished, kept try on production, as a run leaves it."""
    store = bot.services.store
    row = await store.run(
        create_experiment,
        store.store,
        target="prod",
        playbook="try",
        params={"changes": [{"op": "add", "flag": "--enable-metrics"}]},
        actor=f"slack:{OPERATOR}",
    )
    assert row.id is not None
    state = {
        "schema_version": 2,
        "restart": {"applied": True},
        "conclusion": {"kept": True, "verdict": "improved"},
    }
    await store.run(update_experiment, store.store, row.id, status="succeeded", state=state)
    return int(row.id)


def card_with_buttons(bot: RunningBot, experiment_id: int) -> Message:
    """The finished card of the experiment (what the reporter posts), its thread recorded as the
    reporter records it when the run starts."""
    buttons: list[dict[str, Any]] = [
        {
            "type": "button",
            "action_id": f"flagbot_{action}",
            "text": {"type": "plain_text", "text": action.title()},
            "value": action_value(experiment_id, action, f"n{experiment_id}{action}"),
        }
        for action in ("revert", "keep", "cancel")
    ]
    return bot.standin.workspace.post(
        CHANNEL,
        text=f"try #{experiment_id} on prod: improved",
        blocks=[{"type": "actions", "elements": buttons}],
    )


async def record_the_thread(bot: RunningBot, experiment_id: int, card: Message) -> None:
    store = bot.services.store
    await store.run(
        record_thread,
        store.store,
        experiment_id=experiment_id,
        target="prod",
        channel=CHANNEL,
        thread_ts=card.ts,
    )


def approval_cards(bot: RunningBot) -> list[Message]:
    return [m for m in bot.standin.workspace.all_messages(CHANNEL) if "flagbot_approve" in str(m.blocks)]


async def dev_untouched(bot: RunningBot) -> None:
    await bot.services.drain()
    store = bot.services.store
    assert await store.run(list_experiments, store.store, "dev") == []
    assert await store.run(current, store.store, "dev") is None
    assert [e.action for e in await store.run(audit_events, store.store, "dev")] == []


async def the_request(bot: RunningBot, card: Message) -> Any:
    value = next(
        e["value"] for b in card.blocks for e in b.get("elements", []) if "approve" in str(e.get("action_id"))
    )
    request_id = int(json.loads(value)["experiment_id"])
    return await bot.services.store.run(get_request, bot.services.store.store, request_id)


async def test_the_revert_button_of_a_production_experiment_asks_approval_for_production(
    bot: RunningBot,
) -> None:
    experiment_id = await production_try(bot)
    card = card_with_buttons(bot, experiment_id)
    await bot.standin.click(CHANNEL, card.ts, "flagbot_revert", user=OPERATOR)
    [approval] = await bot.standin.wait_for(lambda: approval_cards(bot))
    request = await the_request(bot, approval)
    assert request.target == "prod" and request.needs == "approval"
    assert request.command == f"revert {experiment_id} target=prod"
    assert "this restarts prod" in approval.text, approval.text
    await dev_untouched(bot)

    await bot.standin.click(CHANNEL, approval.ts, "flagbot_approve", user=APPROVER)
    await bot.standin.wait_for(lambda: "approved" in bot.standin.message(CHANNEL, approval.ts).text)
    await bot.services.drain()
    store = bot.services.store
    reverts = [e for e in await store.run(list_experiments, store.store, "prod") if e.playbook == "revert"]
    assert len(reverts) == 1 and reverts[0].params["what"] == str(
        experiment_id
    )  # ran on prod (its host is down)
    await dev_untouched(bot)


async def test_keep_and_cancel_buttons_are_recorded_on_the_experiments_target(bot: RunningBot) -> None:
    experiment_id = await pending_try(bot.services.store, "prod")
    card = card_with_buttons(bot, experiment_id)
    await bot.standin.click(CHANNEL, card.ts, "flagbot_keep", user=OPERATOR)
    await bot.standin.click(CHANNEL, card.ts, "flagbot_cancel", user=OPERATOR)
    await bot.services.drain()
    events = await bot.services.store.run(audit_events, bot.services.store.store, "prod")
    assert {"keep", "slack:cancel"} <= {e.action for e in events}, [e.action for e in events]
    said = [m.text for m in bot.standin.workspace.all_messages(CHANNEL) if "nothing to cancel" in m.text]
    assert said == [f"experiment #{experiment_id} is succeeded: not running, nothing to cancel"]
    await dev_untouched(bot)


async def test_a_mention_in_a_production_thread_acts_on_production(bot: RunningBot) -> None:
    experiment_id = await production_try(bot)
    card = card_with_buttons(bot, experiment_id)
    await record_the_thread(bot, experiment_id, card)
    await bot.standin.mention(f"revert {experiment_id}", user=OPERATOR, channel=CHANNEL, thread_ts=card.ts)
    [approval] = await bot.standin.wait_for(lambda: approval_cards(bot))
    request = await the_request(bot, approval)
    assert (request.target, request.command) == ("prod", f"revert {experiment_id} target=prod")
    await bot.standin.mention("revert", user=OPERATOR, channel=CHANNEL, thread_ts=card.ts)
    await bot.standin.wait_for(lambda: len(approval_cards(bot)) == 2)
    latest = await the_request(bot, approval_cards(bot)[-1])
    assert (latest.target, latest.command) == ("prod", "revert target=prod")
    await dev_untouched(bot)


async def test_revert_of_a_production_experiment_on_dev_is_refused_before_anything_runs(
    bot: RunningBot,
) -> None:
    experiment_id = await production_try(bot)
    for text in (
        f"revert {experiment_id} target=dev",
        f"revert {experiment_id}",
        f"run revert what={experiment_id}",
    ):
        answer = await bot.standin.slash(text, user=OPERATOR, channel=CHANNEL)
        body = answer.json()
        assert body["response_type"] == "ephemeral", body
        assert f"experiment #{experiment_id} ran on target prod, not dev" in body["text"], body["text"]
        assert f"`revert {experiment_id} target=prod`" in body["text"]
    card = card_with_buttons(bot, experiment_id)
    await record_the_thread(bot, experiment_id, card)
    await bot.standin.mention(
        f"revert {experiment_id} target=dev", user=OPERATOR, channel=CHANNEL, thread_ts=card.ts
    )
    shown = await bot.standin.wait_for(lambda: bot.standin.ephemerals(OPERATOR)[3:])
    assert "ran on target prod, not dev" in shown[-1].text, shown[-1].text
    assert not approval_cards(bot)
    await dev_untouched(bot)


async def test_a_diverged_production_target_is_not_healed_by_a_command_nobody_approved(
    bot: RunningBot,
) -> None:
    store = bot.services.store
    await Ledger("prod", store).mark_diverged(["127.0.0.1"], "a node missed the last restart")
    answer = await bot.standin.slash(
        "verify max_running_requests>=48 target=prod", user=OPERATOR, channel=CHANNEL
    )
    assert "starting `verify`" in answer.json()["text"], answer.json()
    await bot.services.drain()
    [verify] = [e for e in await store.run(list_experiments, store.store, "prod") if e.playbook == "verify"]
    assert verify.status == "failed"
    assert "healing it restarts every rank, and prod's policy has require_approval" in (verify.summary or "")
    assert "`reconcile target=prod`" in (verify.summary or "")
    assert await Ledger("prod", store).divergence() is not None  # still diverged: nothing restarted
    events = [e.action for e in await store.run(audit_events, store.store, "prod")]
    assert "reconcile" not in " ".join(events)


async def test_an_approved_restart_may_heal_the_diverged_production_target(bot: RunningBot) -> None:
    store = bot.services.store
    await Ledger("prod", store).mark_diverged(["127.0.0.1"], "a node missed the last restart")
    await bot.standin.slash("try add --enable-metrics target=prod", user=OPERATOR, channel=CHANNEL)
    [approval] = await bot.standin.wait_for(lambda: approval_cards(bot))
    await bot.standin.click(CHANNEL, approval.ts, "flagbot_approve", user=APPROVER)
    await bot.standin.wait_for(lambda: "approved" in bot.standin.message(CHANNEL, approval.ts).text)
    await bot.services.drain()
    [tried] = [e for e in await store.run(list_experiments, store.store, "prod") if e.playbook == "try"]
    assert tried.status == "failed"  # the reconcile was tried: the host listens nowhere
    assert "require_approval" not in (tried.summary or ""), tried.summary
    assert "127.0.0.1" in (tried.summary or ""), tried.summary
