"""`policy.on_regression = "ask"` in Slack, through the real slack-bolt app on the stand-in: a
regressed `try` (the loop's fake target layer, `tests/support/loop_fake_target.py`: its verdict is
always regressed) leaves its change applied and its card asks Keep or Revert (Revert primary) with
the deadline; a Keep click records the decision (kept, an audit row `keep`), the card's thread
says so, and a second Keep (another button, a restarted bot's) is told nothing changed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.decisions import decision_pending
from bot.loop.run_state import RunState
from bot.loop.steps import measure_steps
from bot.slack.card import action_value
from bot.store.experiments import list_experiments
from bot.store.records import audit_events
from flagbot_lab.standin.model import Channel
from tests.component.slack.test_secrets_stay_on_node import PNG
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target
from tests.support.slack_bot import RunningBot, configured_bot

OPERATOR = "U0OPER"
CHANNEL = "C0ASK"
CONFIG = """default_target = "lab"
[database]
sqlite_path = "{db}"
[slack.rbac]
operators = ["U0OPER"]
viewers = ["*"]
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.lab.ssh]
connect_timeout = 1
[targets.lab.policy]
on_regression = "ask"
ask_timeout = "45m"
ask_default = "revert"
"""


def _blank_chart(rows: object, path: Path, **_: object) -> None:
    path.write_bytes(PNG)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "ask")) as running:
        yield running


def buttons_of(message: Any) -> list[dict[str, Any]]:
    return [e for b in message.blocks or [] if b.get("type") == "actions" for e in b["elements"]]


def finished_card(bot: RunningBot) -> Any:
    found = [
        m
        for m in bot.standin.workspace.all_messages(CHANNEL)
        if any(e["action_id"] == "flagbot_keep" for e in buttons_of(m))
    ]
    return found[-1] if found else None


async def test_a_regressed_try_asks_keep_or_revert_and_a_keep_click_records_the_decision(
    bot: RunningBot,
) -> None:
    store = bot.services.store
    with faked_target(store.store) as fake:
        measure_steps.render_chart = _blank_chart  # the fake sets have no measurements to draw
        await bot.standin.slash("try --enable-metrics", user=OPERATOR, channel=CHANNEL)
        await bot.services.drain()
        card = await bot.standin.wait_for(lambda: finished_card(bot))
    assert fake.flags != START_FLAGS  # the change is still applied
    [row] = [e for e in await store.run(list_experiments, store.store, TARGET) if e.playbook == "try"]
    assert row.id is not None and row.verdict == "regressed" and decision_pending(row)
    deadline = RunState.load(row.state).conclusion.ask_deadline
    assert deadline is not None
    said = " ".join(f"{m.text} {m.blocks}" for m in bot.standin.workspace.all_messages(CHANNEL))
    assert f"Keep or revert? If nobody answers by {deadline[11:16]} UTC, flagbot will revert" in said
    shown = {e["action_id"]: e.get("style") for e in buttons_of(card)}
    assert {"flagbot_keep", "flagbot_revert"} <= set(shown) and shown["flagbot_revert"] == "primary"
    assert shown["flagbot_keep"] != "primary"

    await bot.standin.click(CHANNEL, card.ts, "flagbot_keep", user=OPERATOR)
    await bot.services.drain()
    await bot.standin.wait_for(
        lambda: [m for m in bot.standin.workspace.all_messages(CHANNEL) if "kept the change" in m.text]
    )
    [row] = [e for e in await store.run(list_experiments, store.store, TARGET) if e.playbook == "try"]
    conclusion = RunState.load(row.state).conclusion
    assert conclusion.kept is True and conclusion.decided_by == f"slack:{OPERATOR}"
    assert not decision_pending(row)
    events = await store.run(audit_events, store.store, TARGET)
    assert [(e.actor, e.experiment_id) for e in events if e.action == "keep"] == [
        (f"slack:{OPERATOR}", row.id)
    ]

    # a second Keep (another copy of the button: a new nonce) finds the decision taken
    again = bot.standin.workspace.post(
        CHANNEL,
        text="an older copy of the card",
        blocks=[
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "flagbot_keep",
                        "text": {"type": "plain_text", "text": "Keep"},
                        "value": action_value(row.id, "keep", "n-second-keep"),
                    }
                ],
            }
        ],
    )
    await bot.standin.click(CHANNEL, again.ts, "flagbot_keep", user=OPERATOR)
    await bot.services.drain()
    await bot.standin.wait_for(
        lambda: [m for m in bot.standin.workspace.all_messages(CHANNEL) if "nothing changed" in m.text]
    )
    events = await store.run(audit_events, store.store, TARGET)
    assert len([e for e in events if e.action == "keep"]) == 1
