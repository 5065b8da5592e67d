"""Hundreds of generated command texts through signed requests on the Slack path (issue 10 item 5).

Each text goes, as a signed slash command or an `@flagbot` mention, through the real slack-bolt
app into flagbot's dispatcher; the target (`lab`) listens nowhere, so anything that reached a
host says so by naming it (`127.0.0.1:9`). Every request is acknowledged (200, in Slack's 3 s),
every text gets a specific answer (a usage error, a refusal, an answer or a thread that fails
naming the host), none gets the "something went wrong (error id …)" of an unexpected exception,
and a text the grammar refuses leaves no trace of a host: nothing was run for it. The target's
flag list is not cached, so a text with flags is acknowledged as being checked against the host's
SGLang and answered after the host (which cannot answer) was asked: by the packaged list.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.commands import CommandError
from bot.commands.registry import COMMANDS
from bot.slack.dispatch import check, parse
from flagbot_lab.standin.model import Channel
from tests.support.sample_thread import bot_without_hosts
from tests.support.slack_bot import RunningBot

SEED = 10
SLASH, MENTIONS = 200, 100
BATCH = 10
HOST = "127.0.0.1:9"  # every error about the unreachable target names it (SSH node and base_url)
UNEXPECTED = "something went wrong"

INJECTIONS = (
    "; rm -rf /",
    ";id",
    "&& reboot",
    "|| true",
    "| sh",
    "$(id)",
    "`id`",
    "${HOME}",
    "$HOME",
    "%h",
    "%n%s",
    "\nrm -rf /",
    "\r\nExecStartPre=/bin/sh",
    "'",
    '"',
    '"\'"',
    "\x00",
    "a\x00b",
    "<@U0ADMIN>",
    "<!channel>",
    ">",
    "<",
    "&",
    "&amp;",
    "&lt;script&gt;",
    "\\",
    "*",
    "~/.ssh/id_ed25519",
    "../../etc/passwd",
)
DASHES = ("\u2013", "\u2014", "\u2212", "\u2010", "\u2011", "\ufe63", "\uff0d")  # look-alikes of -
FLAGS = (
    "--enable-metrics",
    "--mem-fraction-static=0.85",
    "--cuda-graph-bs 4 8",
    "--chunked-prefill-size -1",
    "--enable-fused-moe-sum-all-reduce",
    "--no-such-flag",
)
WORDS = (
    "add",
    "set",
    "remove",
    "env set NCCL_DEBUG=INFO",
    "max_running_requests>=48",
    "output_throughput>=-2%",
    "target=lab",
    "target=nope",
    "target=lab;id",
    'because="why not"',
    "keep=always",
    "dry-run=yes",
    "force=yes",
    "profile=quick",
    "since=2h",
    "since=abc",
    "limit=5",
    "lines=-1",
    "scope=previous",
    "week=2026-W48",
    "12",
    "99999999999999999999999",
    "baseline",
    "-1",
    "open",
)


def _verbs() -> list[str]:
    """Every command and subcommand of the registry (a new one is fuzzed too), and near misses."""
    verbs = [spec.name for spec in COMMANDS]
    verbs += [f"{spec.name} {sub.name}" for spec in COMMANDS for sub in spec.subs]
    return [*verbs, "", "TRY", "tryy", "help help", "try--enable-metrics", "\u2014help"]


def _dash(word: str, rng: random.Random) -> str:
    return word.replace("-", rng.choice(DASHES), rng.randint(1, 2)) if "-" in word else word


def _word(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:
        return rng.choice(INJECTIONS)
    if kind < 0.5:  # glued to a flag or an option: `--enable-metrics;id`, `target=lab$(id)`
        return rng.choice(FLAGS + WORDS).split(" ")[0] + rng.choice(INJECTIONS)
    if kind < 0.6:
        return _dash(rng.choice(FLAGS), rng)
    if kind < 0.8:
        return rng.choice(FLAGS)
    return rng.choice(WORDS)


def generated_texts(count: int, rng: random.Random) -> list[str]:
    """`count` command texts: a verb, then 0-6 words mixing valid arguments and injections;
    a few are very long."""
    verbs = _verbs()
    texts = []
    for index in range(count):
        words = [rng.choice(verbs)] + [_word(rng) for _ in range(rng.randint(0, 6))]
        joiner = rng.choice((" ", " ", " ", "  ", "\t", "\n"))
        text = joiner.join(words)
        if index % 40 == 7:
            text += " " + rng.choice(("x", "--enable-metrics ", "$(id)")) * rng.randint(500, 1500)
        texts.append(text)
    return texts


@dataclass
class Sent:
    text: str
    channel: str
    user: str
    kind: str  # slash | mention
    status: int
    elapsed_s: float
    ack: str  # the slash command's ack, as shown


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with bot_without_hosts(tmp_path, known_flags=False) as running:  # the ack before the host's list
        yield running


def refused_by_grammar(bot: RunningBot, text: str) -> bool:
    """What the grammar and the pre-ack checks say of the text, asked directly."""
    try:
        check(bot.services.settings, parse(bot.services.settings, text))
    except CommandError:
        return True
    return False


async def _send(bot: RunningBot, index: int, text: str, kind: str, user: str) -> Sent:
    channel = f"C0BAD{index:04d}"
    bot.standin.workspace.add_channel(Channel(channel, f"bad-input-{index}"))
    if kind == "slash":
        answer = await bot.standin.slash(text, user=user, channel=channel)
        shown = answer.json().get("text", "") if answer.body else ""
    else:
        answer = await bot.standin.mention(text, user=user, channel=channel)
        shown = ""
    return Sent(text, channel, user, kind, answer.status, answer.elapsed_s, shown)


def _said(bot: RunningBot, sent: Sent) -> list[str]:
    """Everything the bot said about one text: its ack, its ephemerals, its messages and edits."""
    said = [sent.ack] if sent.ack else []
    said += [e.text for e in bot.standin.ephemerals(sent.user) if e.channel == sent.channel]
    for message in bot.standin.workspace.all_messages(sent.channel):
        if message.user != sent.user:
            said.append(message.text + " " + str(message.blocks))
    return said


async def test_generated_texts_get_a_specific_answer_and_refused_ones_reach_no_host(bot: RunningBot) -> None:
    rng = random.Random(SEED)
    texts = generated_texts(SLASH + MENTIONS, rng)
    plan = [
        (index, text, "slash" if index < SLASH else "mention", "U0VIEW" if index % 5 == 0 else "U0OPER")
        for index, text in enumerate(texts)
    ]
    sent: list[Sent] = []
    for start in range(0, len(plan), BATCH):
        sent += await asyncio.gather(*(_send(bot, *item) for item in plan[start : start + BATCH]))
        await bot.services.drain()  # the runs of this batch end before the next one starts
    await bot.services.drain()

    assert [s.status for s in sent] == [200] * len(sent)
    refused = accepted = 0
    for item in sent:
        said = _said(bot, item)
        everything = " ".join(said)
        assert said, f"no answer at all to {item.kind} {item.text!r}"
        assert UNEXPECTED not in everything and "error id" not in everything, (item.text, said)
        if refused_by_grammar(bot, item.text):
            refused += 1
            assert any(line.startswith("error:") for line in said), (item.text, said)
            assert HOST not in everything, f"a refused text reached the host: {item.text!r}: {said}"
            cards = [m for m in bot.standin.workspace.all_messages(item.channel) if m.user != item.user]
            assert not cards, (item.text, said)
        else:
            accepted += 1
    # the generator must exercise both sides, mostly refusals (injections are not flag names)
    assert refused > len(sent) // 2 and accepted >= 20, (refused, accepted)


async def test_injections_glued_to_a_valid_command_are_refused_before_any_host(bot: RunningBot) -> None:
    """The plain cases, one per injection: an operator's try whose flag carries the injection."""
    for index, injection in enumerate(INJECTIONS + DASHES):
        text = f"try add --enable-metrics{injection}" if injection not in DASHES else f"try add {injection}-x"
        item = await _send(bot, 9000 + index, text, "slash", "U0OPER")
        assert item.status == 200 and item.ack.startswith("error:"), (text, item.ack)
    await bot.services.drain()
    assert not bot.standin.calls("chat.postMessage")  # no run started, no answer posted: only the acks
