"""The change rules in Slack, through the real slack-bolt app on the stand-in: a protected flag is
an admin's, a start-up variable nobody's, and a refusal names the rule, ephemerally, before the
ack, audited, with nothing posted and nothing run. The targets listen nowhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.store import AsyncStore, Store
from bot.store.records import audit_events
from flagbot_lab.standin.model import Channel, Message
from tests.support.host_flags import seed_flag_lists
from tests.support.slack_bot import RunningBot, lab_config, running_bot

ADMIN, OPERATOR = "U0ADMIN", "U0OPER"
CHANNEL = "C0RULES"
CONFIG = lab_config(
    """admins = ["U0ADMIN"]
operators = ["U0OPER"]
approvers = ["U0ADMIN"]
viewers = ["*"]
""",
    after="""[targets.lab.policy]
env_admin_allow = ["LD_LIBRARY_PATH"]
[targets.prod]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.prod.policy]
require_approval = true
""",
)
CHECKED = "flags checked against the host's list for SGLang 0.5.10"  # the list `_known_flags` cached
PROTECTED = "`--model-path` is a protected flag of target {target} (policy.protected_flags): only an admin may change it"


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
            running.standin.workspace.add_channel(Channel(CHANNEL, "rules"))
            yield running
    finally:
        await store.aclose()


def bot_posts(bot: RunningBot) -> list[Message]:
    return [m for m in bot.standin.workspace.all_messages(CHANNEL) if m.user not in (ADMIN, OPERATOR)]


async def decisions(bot: RunningBot, target: str, user: str) -> list[dict[str, object]]:
    await bot.services.drain()  # audits are written after the ack
    events = await bot.services.store.run(audit_events, bot.services.store.store, target)
    return [e.detail for e in events if e.action == "slack:try" and e.actor == f"slack:{user}"]


@pytest.mark.parametrize(
    "text",
    [
        "try add --model-path /models/other",
        "try dry-run=yes add --model-path /models/other",
        "try add --model-path /models/other target=prod",
        "try dry-run=yes set --api-key=${SGLANG_API_KEY} target=prod",
    ],
)
async def test_an_operator_is_refused_a_protected_flag_by_slash_and_mention(
    bot: RunningBot, text: str
) -> None:
    target = "prod" if "target=prod" in text else "lab"
    flag = "--api-key" if "--api-key" in text else "--model-path"
    expected = PROTECTED.format(target=target).replace("--model-path", flag)
    answer = await bot.standin.slash(text, user=OPERATOR, channel=CHANNEL)
    body = answer.json()
    assert (answer.status, body["response_type"], body["text"]) == (200, "ephemeral", expected)
    await bot.standin.mention(text, user=OPERATOR, channel=CHANNEL)
    await bot.services.drain()
    assert [e.text for e in bot.standin.ephemerals(OPERATOR)] == [expected] * 2  # the ack, the mention
    refused = await decisions(bot, target, OPERATOR)
    assert [(d["allowed"], d["reason"]) for d in refused] == [(False, expected)] * 2
    assert not bot_posts(bot) and not bot.standin.calls("chat.update")  # no card, no approval card


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "try env set LD_PRELOAD=/tmp/x.so",
            "LD_PRELOAD changes how a process starts (sudo's env_delete: LD_*)",
        ),
        ("try dry-run=yes env set PYTHONSTARTUP=/tmp/x.py", "PYTHONSTARTUP changes how a process starts"),
        (
            "try env set NCCL_TUNER_PLUGIN=/tmp/x.so",
            "NCCL_TUNER_PLUGIN is on flagbot's environment deny-list",
        ),
        ("try env set HF_ENDPOINT=http://evil", "HF_ENDPOINT is not in policy.env_allow of target lab"),
        ('run try "changes=env set BASH_ENV=/tmp/x"', "BASH_ENV changes how a process starts"),
    ],
)
async def test_a_refused_variable_is_refused_to_admins_too(bot: RunningBot, text: str, says: str) -> None:
    for user in (OPERATOR, ADMIN):
        answer = await bot.standin.slash(text, user=user, channel=CHANNEL)
        body = answer.json()
        assert body["response_type"] == "ephemeral" and says in body["text"], (user, body)
    assert not bot_posts(bot)


async def test_an_admin_entry_is_an_admin_s_and_an_operator_s_tuning_variable_goes_ahead(
    bot: RunningBot,
) -> None:
    text = "try dry-run=yes env set LD_LIBRARY_PATH=/opt/lib"
    body = (await bot.standin.slash(text, user=OPERATOR, channel=CHANNEL)).json()
    assert (
        body["text"]
        == "LD_LIBRARY_PATH may be changed on target lab by an admin only (policy.env_admin_allow)"
    )
    assert not bot_posts(bot)
    for user, words in ((ADMIN, text), (OPERATOR, "try dry-run=yes env set NCCL_DEBUG=INFO")):
        body = (await bot.standin.slash(words, user=user, channel=CHANNEL)).json()
        assert body["text"] == "starting `try`: follow it in the thread", (user, body)
    await bot.standin.wait_for(lambda: len(bot_posts(bot)) >= 2)  # two status cards: the runs started


async def test_an_admin_may_change_a_protected_flag_and_production_still_needs_an_approval(
    bot: RunningBot,
) -> None:
    body = (
        await bot.standin.slash("try dry-run=yes add --model-path /m", user=ADMIN, channel=CHANNEL)
    ).json()
    assert body["text"] == "starting `try`: follow it in the thread\n" + CHECKED, body
    body = (
        await bot.standin.slash("try add --model-path /m target=prod", user=ADMIN, channel=CHANNEL)
    ).json()
    assert body["text"] == "`try` needs approval: see the card\n" + CHECKED, body
    allowed = await decisions(bot, "prod", ADMIN)
    assert [d["allowed"] for d in allowed] == [True]
