"""`wait=DURATION` in Slack (real Bolt on the stand-in, a real SQLite store): a mutating run on a
busy target with `wait=` says in its thread whom it waits for and until when, then starts when
the holder finishes; without `wait=` the refusal says how to wait. The holder is a test playbook
held at a gate (tests/support/loop_actions.py), so "busy" and "finished" are events, not timing."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.store.experiments import list_experiments
from flagbot_lab.standin.model import Channel, Message
from tests.support.loop_actions import Probe, registered_actions
from tests.support.slack_bot import RunningBot, configured_bot

CHANNEL = "C0WAIT"
CONFIG = """default_target = "lab"
playbook_dirs = ["{books}"]
[database]
sqlite_path = "{db}"
[slack.rbac]
operators = ["U0OPER", "U0APPR"]
viewers = ["*"]
[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{{ host = "127.0.0.1", port = 9 }}]
[targets.lab.ssh]
connect_timeout = 1
"""
HOLD = """name: hold
description: hold the target until the test opens the gate
mutating: true
steps:
  - action: t_wait
    with: {gate: g}
  - action: t_note
    with: {label: after}
"""


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as seen:
        yield seen


@pytest.fixture
async def bot(tmp_path: Path, probe: Probe) -> AsyncIterator[RunningBot]:
    books = tmp_path / "books"
    books.mkdir()
    (books / "hold.yaml").write_text(HOLD)
    config = CONFIG.replace("{books}", str(books))
    async with configured_bot(tmp_path, config, Channel(CHANNEL, "wait")) as running:
        try:
            yield running
        finally:  # a run left waiting would keep the bot's shutdown waiting for it
            for gate in probe.gates.values():
                gate.set()


def posts(bot: RunningBot, needle: str) -> list[Message]:
    return [m for m in bot.standin.workspace.all_messages(CHANNEL) if needle in m.text]


async def test_a_run_with_wait_says_whom_it_waits_for_then_starts_when_the_holder_finishes(
    bot: RunningBot, probe: Probe
) -> None:
    standin, store = bot.standin, bot.services.store
    await standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)  # the first run holds the lease
    await standin.slash("run hold wait=30m", user="U0APPR", channel=CHANNEL)
    [waiting] = await standin.wait_for(lambda: posts(bot, "waiting for #"), timeout=30)
    assert "(hold by slack:U0OPER) to finish on lab; will start when it does, at most until" in waiting.text
    first = [r for r in await store.run(list_experiments, store.store, "lab") if r.playbook == "hold"]
    assert len(first) == 1  # the waiting run has written nothing yet
    probe.gate("g").set()
    await standin.wait_for(lambda: len(posts(bot, ": succeeded")) >= 2 or None, timeout=30)
    await bot.services.drain()
    rows = [r for r in await store.run(list_experiments, store.store, "lab") if r.playbook == "hold"]
    assert sorted((r.actor, r.status) for r in rows) == [
        ("slack:U0APPR", "succeeded"),
        ("slack:U0OPER", "succeeded"),
    ]
    second = next(r for r in rows if r.actor == "slack:U0APPR")
    assert second.id is not None and first[0].id is not None and second.id > first[0].id


async def test_a_busy_target_without_wait_is_refused_saying_how_to_wait(
    bot: RunningBot, probe: Probe
) -> None:
    standin = bot.standin
    await standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)
    await standin.slash("run hold", user="U0APPR", channel=CHANNEL)
    refused = await standin.wait_for(lambda: posts(bot, ": refused"), timeout=30)
    assert "add wait=DURATION" in str(refused[-1].blocks) + refused[-1].text


def run_when_free_button(bot: RunningBot) -> Message:
    [offer] = [
        m for m in bot.standin.workspace.all_messages(CHANNEL) if "flagbot_run_when_free" in str(m.blocks)
    ]
    return offer


async def test_run_when_free_resends_the_words_with_wait_for_the_requester_once(
    bot: RunningBot, probe: Probe
) -> None:
    standin, store = bot.standin, bot.services.store
    await standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)
    await standin.slash("run hold", user="U0APPR", channel=CHANNEL)
    await standin.wait_for(lambda: posts(bot, "run when free?"), timeout=30)
    offer = run_when_free_button(bot)
    assert "wait=30m" in str(offer.blocks) and "Run when free" in str(offer.blocks)

    await standin.click(CHANNEL, offer.ts, "flagbot_run_when_free", user="U0OPER")  # not the requester
    refused = await standin.wait_for(
        lambda: [e for e in standin.ephemerals("U0OPER") if "who asked" in e.text]
    )
    assert "only <@U0APPR>" in refused[-1].text

    await asyncio.gather(  # a double click: the nonce is taken once
        standin.click(CHANNEL, offer.ts, "flagbot_run_when_free", user="U0APPR"),
        standin.click(CHANNEL, offer.ts, "flagbot_run_when_free", user="U0APPR"),
    )
    await standin.wait_for(lambda: posts(bot, "waiting for #"), timeout=30)
    assert len(posts(bot, "clicked Run when free")) == 1
    assert "`run hold wait=30m`" in posts(bot, "clicked Run when free")[0].text
    probe.gate("g").set()
    await standin.wait_for(lambda: len(posts(bot, ": succeeded")) >= 2 or None, timeout=30)
    await bot.services.drain()
    rows = [r for r in await store.run(list_experiments, store.store, "lab") if r.playbook == "hold"]
    assert sorted((r.actor, r.status) for r in rows) == [
        ("slack:U0APPR", "succeeded"),
        ("slack:U0OPER", "succeeded"),
    ]


async def test_cancel_waiter_ends_a_waiting_command_that_then_writes_nothing(
    bot: RunningBot, probe: Probe
) -> None:
    standin, store = bot.standin, bot.services.store
    await standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)
    await standin.slash("run hold wait=30m", user="U0APPR", channel=CHANNEL)
    [waiting] = await standin.wait_for(lambda: posts(bot, "waiting for #"), timeout=30)
    found = re.search(r"cancel waiter=(\d+)", waiting.text)
    assert found is not None, waiting.text
    waiter = found[1]

    await standin.slash(f"cancel waiter={waiter}", user="U0APPR", channel=CHANNEL)
    await standin.wait_for(
        lambda: posts(bot, f"waiter {waiter} (hold on lab) was cancelled by slack:U0APPR"), timeout=30
    )
    probe.gate("g").set()
    await standin.wait_for(lambda: posts(bot, ": succeeded"), timeout=30)
    await bot.services.drain()
    rows = [r for r in await store.run(list_experiments, store.store, "lab") if r.playbook == "hold"]
    assert [r.actor for r in rows] == ["slack:U0OPER"]  # the cancelled waiter wrote nothing
