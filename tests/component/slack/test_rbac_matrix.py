"""A viewer is refused every mutating command and every button, ephemerally, audited, and nothing runs.

The matrix is generated: the commands and subcommands are the registry's mutating ones (a new
command is covered by being added there), the buttons are `bot.slack.card.ACTION_IDS`. Each goes
through the real slack-bolt app on the stand-in, as a signed slash command, an `@flagbot`
mention and a click; the targets listen nowhere, so nothing could have run quietly either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.commands import CommandError
from bot.commands.registry import COMMANDS, CommandSpec, Sub
from bot.config import Settings, load_settings
from bot.slack.card import ACTION_IDS, ITEM_ACTIONS, action_value
from bot.slack.dispatch import check, parse
from bot.slack.rbac import command_label
from bot.store import AsyncStore, Store
from bot.store.approvals import get_request
from bot.store.records import audit_events
from flagbot_lab.standin.model import Channel, Message
from tests.support.host_flags import seed_flag_lists
from tests.support.slack_bot import RunningBot, lab_config, running_bot

VIEWER, OPERATOR = "U0VIEW", "U0OPER"
CONFIG = lab_config(
    """admins = ["U0ADMIN"]
operators = ["U0OPER"]
approvers = ["U0ADMIN"]
viewers = ["*"]
""",
    after="""[targets.prod]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.prod.policy]
require_approval = true
""",
)


def _mutating() -> list[tuple[CommandSpec, Sub | None]]:
    found: list[tuple[CommandSpec, Sub | None]] = []
    for spec in COMMANDS:
        if spec.tier == "mutating":
            found.append((spec, None))
        found += [(spec, sub) for sub in spec.subs if sub.tier == "mutating"]
    return found


MUTATING = _mutating()


def _label(spec: CommandSpec, sub: Sub | None) -> str:
    return f"{spec.name} {sub.name}" if sub else spec.name


def _constructed(spec: CommandSpec, sub: Sub | None) -> str:
    """A text for a command with no usable example: each positional filled with a valid word."""
    words = [spec.name] + ([sub.name] if sub else [])
    for positional in sub.positionals if sub else spec.positionals:
        if positional.required:
            words.append(
                positional.choices[0] if positional.choices else "1" if positional.kind == "id" else "x"
            )
    return " ".join(words)


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


def valid_text(bot: RunningBot, spec: CommandSpec, sub: Sub | None) -> str:
    """The first of the command's own examples (then a constructed text) that the grammar and
    the pre-ack checks accept as this very command: a refusal must be RBAC's, not a usage error."""
    settings = bot.services.settings
    for text in (*spec.examples, _constructed(spec, sub)):
        try:
            invocation = parse(settings, text)
            check(settings, invocation)
        except CommandError:
            continue
        same = invocation.name == spec.name and invocation.sub == (sub.name if sub else invocation.sub)
        if same and (sub is not None or invocation.tier == "mutating"):
            return text
    raise AssertionError(f"no valid text for `{_label(spec, sub)}`: give it an example in the registry")


def test_the_matrix_covers_the_registry() -> None:
    labels = {_label(spec, sub) for spec, sub in MUTATING}
    assert {"try", "revert", "rollback", "cancel", "baseline pin", "checks delete"} <= labels
    assert set(ACTION_IDS) == {
        "revert",
        "keep",
        "rerun",
        "isolate",
        "force",
        "cancel",
        "approve",
        "deny",
        "test_hypothesis",
    }


async def _refusals(bot: RunningBot, target: str, action: str) -> list[dict[str, object]]:
    await bot.services.drain()  # audits are written after the ack
    events = await bot.services.store.run(audit_events, bot.services.store.store, target)
    return [e.detail for e in events if e.action == f"slack:{action}" and e.actor == f"slack:{VIEWER}"]


def _bot_posts(bot: RunningBot, channel: str) -> list[Message]:
    return [m for m in bot.standin.workspace.all_messages(channel) if m.user not in (VIEWER, OPERATOR)]


@pytest.mark.parametrize(("spec", "sub"), MUTATING, ids=[_label(spec, sub) for spec, sub in MUTATING])
async def test_a_viewer_is_refused_every_mutating_command(
    bot: RunningBot, spec: CommandSpec, sub: Sub | None
) -> None:
    text = valid_text(bot, spec, sub)
    label = command_label(parse(bot.services.settings, text))
    slash_channel, mention_channel = "C0RBACS", "C0RBACM"
    for channel in (slash_channel, mention_channel):
        bot.standin.workspace.add_channel(Channel(channel, channel.lower()))

    answer = await bot.standin.slash(text, user=VIEWER, channel=slash_channel)
    body = answer.json()
    assert answer.status == 200 and body["response_type"] == "ephemeral", body
    assert "role" in body["text"] and VIEWER in body["text"], body
    mentioned = await bot.standin.mention(text, user=VIEWER, channel=mention_channel)
    assert mentioned.status == 200
    await bot.services.drain()
    [shown] = [e for e in bot.standin.ephemerals(VIEWER) if e.channel == mention_channel]
    assert "role" in shown.text, shown.text

    refused = await _refusals(bot, "lab", label)
    assert [d["allowed"] for d in refused] == [False, False], (label, refused)
    assert {d["channel"] for d in refused} == {slash_channel, mention_channel}
    for channel in (slash_channel, mention_channel):
        assert not _bot_posts(bot, channel), f"`{text}` posted something for a viewer"
    assert not bot.standin.calls("chat.update")


async def test_a_viewer_is_refused_every_card_button(bot: RunningBot) -> None:
    channel = "C0FLAGBOT"
    buttons = [
        {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": action},
            "value": action_value(7, action, f"n{action}", item=1 if action in ITEM_ACTIONS else None),
        }
        for action, action_id in ACTION_IDS.items()
        if action not in ("approve", "deny")  # the approval card's own, below
    ]
    card = bot.standin.workspace.post(
        channel, text="a finished card", blocks=[{"type": "actions", "block_id": "b7", "elements": buttons}]
    )
    for button in buttons:
        await bot.standin.click(channel, card.ts, str(button["action_id"]), user=VIEWER)
    await bot.services.drain()

    shown = [e.text for e in bot.standin.ephemerals(VIEWER)]
    assert len(shown) == len(buttons) and all("operator role" in text for text in shown), shown
    for button in buttons:
        action = str(button["action_id"]).removeprefix("flagbot_")
        refused = await _refusals(bot, "", action)  # experiment #7 does not exist: no target, not the default
        assert [d["allowed"] for d in refused] == [False], (action, refused)
    assert [m.ts for m in _bot_posts(bot, channel)] == [card.ts], "a viewer's click posted in the channel"
    assert not bot.standin.calls("chat.update")


@pytest.mark.parametrize("action", ["approve", "deny"])
async def test_a_viewer_may_not_decide_an_approval(bot: RunningBot, action: str) -> None:
    channel = "C0FLAGBOT"
    answer = await bot.standin.slash("try add --enable-metrics target=prod", user=OPERATOR, channel=channel)
    assert "needs approval" in answer.json()["text"], answer.body
    [card] = await bot.standin.wait_for(lambda: _bot_posts(bot, channel))
    await bot.services.drain()
    posted, updated = len(bot.standin.calls("chat.postMessage")), len(bot.standin.calls("chat.update"))

    await bot.standin.click(channel, card.ts, ACTION_IDS[action], user=VIEWER)
    await bot.services.drain()

    [shown] = bot.standin.ephemerals(VIEWER)
    assert "approver role" in shown.text, shown.text
    refused = await _refusals(bot, "prod", action)
    assert [d["allowed"] for d in refused] == [False], refused
    request_id = refused[0]["approval_request"]
    assert isinstance(request_id, int)
    request = await bot.services.store.run(get_request, bot.services.store.store, request_id)
    assert request is not None and request.status == "pending"
    assert len(bot.standin.calls("chat.postMessage")) == posted  # no thread, no run
    assert len(bot.standin.calls("chat.update")) == updated
