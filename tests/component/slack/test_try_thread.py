"""A try's thread, read as an on-call engineer reads it (issue 22, "ten seconds to read"):
through the stand-in's Web API, the card opens with one line, the evidence fits in at most six
replies, long excerpts are files linked (not replies of their own), the broadcast is the verdict
and the cells that decided it, and the requester is mentioned when the run ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from flagbot_lab.standin.model import Message
from tests.support.sample_thread import (
    FLAGS,
    UNDECIDED,
    SampleThread,
    bot_without_hosts,
    post_sample_thread,
)
from tests.support.slack_bot import TOKEN, RunningBot

CHANNEL = "C0FLAGBOT"
MAX_REPLIES = 6


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with bot_without_hosts(tmp_path) as running:
        yield running


@pytest.fixture
async def sample(bot: RunningBot, tmp_path: Path) -> SampleThread:
    return await post_sample_thread(bot.standin, TOKEN, tmp_path / "chart.png", user="U0OPER")


def text_of(message: Message) -> str:
    return "\n".join(
        str(block.get("text", {}).get("text", "")) if isinstance(block.get("text"), dict) else str(block)
        for block in message.blocks or []
    )


async def test_the_card_opens_with_one_line_and_states_the_outcome_once(
    bot: RunningBot, sample: SampleThread
) -> None:
    root = bot.standin.message(sample.channel, sample.card_ts)
    first = root.blocks[0]["text"]["text"]
    flags = ", ".join(FLAGS.split())
    assert first == (
        f"🔻 `{flags}` → *regressed*: max_running_requests 48 → 26 (-45.8%); "
        "change still applied: Keep or Revert?"
    )
    shown = text_of(root)
    assert "Status" not in shown and "succeeded" not in shown
    assert "wait for the new start" in shown and "await_start" not in shown  # steps in words


async def test_a_try_is_at_most_six_replies_with_files_linked_not_posted(
    bot: RunningBot, sample: SampleThread
) -> None:
    replies = bot.standin.thread(sample.channel, sample.card_ts)[1:]
    assert 0 < len(replies) <= MAX_REPLIES, [r.text for r in replies]
    titles = [text_of(r).split("\n", 1)[0] for r in replies]
    assert titles[:4] == [
        "*Preflight*",
        "*Start and capacity*",
        "*Benchmark and chart*",
        "*Verdict and hypotheses*",
    ]
    assert all(not r.files for r in replies)  # an upload is linked from its part, never a reply
    start = text_of(replies[1])
    uploaded = bot.standin.files()
    journal = [f for f in uploaded if "capture cuda graph bs 70" in f.text]
    assert journal and journal[0].permalink in start  # the long excerpt: whole, as a file, linked
    benchmark = replies[2].blocks
    images = [b for b in benchmark if b.get("type") == "image"]
    assert len(images) == 1 and images[0]["slack_file"]["url"].endswith(".png")
    assert UNDECIDED in text_of(replies[3])  # every cell stays in the thread


async def test_the_end_is_broadcast_with_the_mention_and_only_decisive_cells(
    bot: RunningBot, sample: SampleThread
) -> None:
    replies = bot.standin.thread(sample.channel, sample.card_ts)[1:]
    broadcast = [r for r in replies if r.reply_broadcast]
    assert len(broadcast) == 1 and broadcast[0] is replies[-1]  # the last reply, once
    said = text_of(broadcast[0])
    assert said.startswith("<@U0OPER> 🔻 `")  # the requester is told the run ended
    cells = [line for line in said.split("\n") if line.startswith("• ")]
    assert cells == ["• max_running_requests 48 → 26 (-45.8%)"]
    assert "undecided" not in said and "median_ttft_ms" not in said and "no effect" not in said
    assert broadcast[0].text.startswith("<@U0OPER> ")


async def test_a_run_that_fails_mentions_its_requester_without_a_broadcast(bot: RunningBot) -> None:
    """The real path: `/flagbot try` on a target whose host does not answer fails at its first
    remote step; the thread still ends with the requester mentioned, and no verdict is broadcast."""
    answer = await bot.standin.slash("try --enable-metrics target=lab", user="U0OPER", channel=CHANNEL)
    assert answer.status == 200

    def ended() -> list[Message] | None:
        found = [m for m in bot.standin.workspace.all_messages(CHANNEL) if m.text.startswith("<@U0OPER> ")]
        return found or None

    said = (await bot.standin.wait_for(ended, timeout=30))[-1]
    card = bot.standin.message(CHANNEL, str(said.thread_ts))
    replies = bot.standin.thread(CHANNEL, card.ts)[1:]
    assert len(replies) <= MAX_REPLIES, [r.text for r in replies]
    assert not said.reply_broadcast and "failed" in text_of(said)
    assert card.blocks[0]["text"]["text"].startswith("❌ `--enable-metrics` → *failed*")
