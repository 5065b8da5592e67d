"""Slack judges flags by the target host's own list (issue 19 item 1), through the real Bolt app
on the stand-in.

The target `lab` is a fake systemd node behind an in-process SSH server
(`tests/support/fake_node.py`) whose SGLang says 0.5.23 and whose `--help` is the twin's own
(`tests/support/host_flags.py`) with 0.5.23's `--enable-hicache`, which the packaged 0.5.10 list
lacks. The `try` runs the real engine with the target layer's functions swapped
(`tests/support/loop_fake_target.py`); only the flag list is read from the node.

- a miss: the ack says it is checking against the host's SGLang (no SSH before the ack), then the
  thread opens with the list named, or the refusal names the host's version;
- a hit: with the node gone, the cached list still answers in the ack;
- an unreachable host: the packaged list, named with the reason;
- a flag the unit carries and no list knows is removed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bot.config import Settings, load_settings
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore, Store
from bot.target.flaglist import forget_cache
from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target
from tests.support.slack_bot import RunningBot, running_bot

CHANNEL = "C0FLAGBOT"
OPERATOR = "U0OPER"
RBAC = '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'
HOST_LIST = "host's list for SGLang 0.5.23"
DROPPED = "--disable-hicache-numa-detect"


def _config(tmp_path: Path, port: int, keys: Keys | None) -> Path:
    ssh = "connect_timeout = 2\ncommand_timeout = 5\n"
    if keys is not None:
        ssh += f'key_path = "{keys.client_key}"\nknown_hosts = "{keys.known_hosts([port])}"\n'
    path = tmp_path / "flagbot.toml"
    path.write_text(
        f'default_target = "{TARGET}"\n'
        f'[database]\nsqlite_path = "{tmp_path / "state" / "flagbot.db"}"\n'
        + RBAC
        + f'[targets.{TARGET}]\nunit = "sglang-qwen.service"\nbase_url = "http://127.0.0.1:9"\n'
        f'nodes = [{{ host = "127.0.0.1", port = {port}, user = "ops" }}]\n'
        f"[targets.{TARGET}.ssh]\n" + ssh
    )
    return path


@asynccontextmanager
async def _bot(
    tmp_path: Path, *, reachable: bool = True
) -> AsyncIterator[tuple[RunningBot, FakeNode, Store]]:
    forget_cache()
    keys = Keys.make(tmp_path, 1)
    node = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    await node.start(keys.host_keys[0], keys.client_public)
    config = _config(tmp_path, node.port, keys) if reachable else _config(tmp_path, 9, keys)
    settings: Settings = load_settings(config, required=True)
    sync = Store.open(None, sqlite_path=settings.database.sqlite_path)
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        async with running_bot(settings, store) as bot:
            yield bot, node, sync
    finally:
        await store.aclose()
        await node.stop()
        forget_cache()


def _ephemerals(bot: RunningBot) -> list[str]:
    return [e.text for e in bot.standin.ephemerals(OPERATOR)]


def _said_in_threads(bot: RunningBot) -> list[str]:
    return [
        reply.text + json.dumps(reply.blocks)
        for root in bot.standin.messages(CHANNEL)
        for reply in bot.standin.messages(CHANNEL, root.ts)
    ]


async def test_a_miss_acks_checking_then_runs_by_the_hosts_list_and_a_hit_needs_no_host(
    tmp_path: Path,
) -> None:
    async with _bot(tmp_path) as (bot, node, store):
        with faked_target(store) as fake:
            answer = await bot.standin.slash("try add --enable-hicache", user=OPERATOR, channel=CHANNEL)
            assert answer.status == 200
            ack = answer.json()["text"]
            assert ack.startswith("checking `try` against the SGLang that lab runs"), ack
            await bot.services.drain()
        assert any("launch_server --help" in text for text in node.received)  # read after the ack
        # the answer followed: the run started (its thread names the list), and the user was told
        assert fake.restarts[0].argv() == [*START_FLAGS.argv(), "--enable-hierarchical-cache"]
        assert any(f"flags checked against the {HOST_LIST}" in text for text in _said_in_threads(bot))
        assert any(text.startswith("starting `try`") and HOST_LIST in text for text in _ephemerals(bot))

        # a hit: the node is gone, and the cached list answers in the ack all the same
        await node.stop()
        seen = len(node.received)
        with faked_target(store):
            again = await bot.standin.slash("try add --enable-hicache", user=OPERATOR, channel=CHANNEL)
            body = again.json()["text"]
            assert body.startswith("starting `try`: follow it in the thread"), body
            assert f"flags checked against the {HOST_LIST}" in body
            refused = await bot.standin.slash("try add --no-such-flag", user=OPERATOR, channel=CHANNEL)
            text = refused.json()["text"]
            assert text.startswith("error: unknown flag --no-such-flag for SGLang 0.5.23"), text
            assert f"flags checked against the {HOST_LIST}" in text
            await bot.services.drain()
        assert len(node.received) == seen


async def test_a_miss_that_the_hosts_list_refuses_is_answered_naming_the_hosts_version(
    tmp_path: Path,
) -> None:
    async with _bot(tmp_path) as (bot, _node, _store):
        answer = await bot.standin.slash("try add --enable-metricz", user=OPERATOR, channel=CHANNEL)
        assert answer.json()["text"].startswith("checking `try`")
        await bot.services.drain()
        refusal = _ephemerals(bot)[-1]
        assert refusal.startswith("error: unknown flag --enable-metricz for SGLang 0.5.23"), refusal
        assert f"flags checked against the {HOST_LIST}" in refusal
        assert bot.standin.messages(CHANNEL) == []  # nothing started


async def test_what_no_list_could_take_is_refused_in_the_ack_without_the_host(tmp_path: Path) -> None:
    async with _bot(tmp_path) as (bot, node, _store):
        answer = await bot.standin.slash("try add --enable-metrics;id", user=OPERATOR, channel=CHANNEL)
        assert answer.json()["text"].startswith("error: unknown flag --enable-metrics;id")
        other = await bot.standin.slash("try add --enable-metrics frob=1", user=OPERATOR, channel=CHANNEL)
        assert "unknown option 'frob'" in other.json()["text"]
        await bot.services.drain()
        assert node.received == []


async def test_a_mention_on_a_miss_says_it_is_checking_then_answers(tmp_path: Path) -> None:
    async with _bot(tmp_path) as (bot, _node, _store):
        answer = await bot.standin.mention("try add --no-such-flag", user=OPERATOR, channel=CHANNEL)
        assert answer.status == 200
        await bot.services.drain()
        said = _ephemerals(bot)
        assert said[0].startswith("checking `try` against the SGLang that lab runs"), said
        assert said[-1].startswith("error: unknown flag --no-such-flag for SGLang 0.5.23"), said


async def test_an_unreachable_host_is_judged_by_the_packaged_list_and_the_reply_says_so(
    tmp_path: Path,
) -> None:
    async with _bot(tmp_path, reachable=False) as (bot, _node, _store):
        answer = await bot.standin.slash("try add --enable-hicache", user=OPERATOR, channel=CHANNEL)
        assert answer.json()["text"].startswith("checking `try`")
        await bot.services.drain()
        refusal = _ephemerals(bot)[-1]
        assert refusal.startswith("error: unknown flag --enable-hicache for SGLang 0.5.10"), refusal
        assert "packaged list for SGLang 0.5.10 (lab's node 0 cannot be reached)" in refusal


async def test_a_flag_the_unit_carries_and_no_list_knows_is_removed(tmp_path: Path) -> None:
    async with _bot(tmp_path) as (bot, _node, store):
        with faked_target(store) as fake:
            fake.flags = FlagSet((*START_FLAGS.items, FlagItem(DROPPED)))
            answer = await bot.standin.slash(f"try remove {DROPPED}", user=OPERATOR, channel=CHANNEL)
            assert answer.json()["text"].startswith("checking `try`")
            await bot.services.drain()
        assert fake.restarts and fake.restarts[0].argv() == START_FLAGS.argv()
        notes = " ".join(_said_in_threads(bot))
        assert f"remove {DROPPED}: not a flag of SGLang 0.5.23's list" in notes
