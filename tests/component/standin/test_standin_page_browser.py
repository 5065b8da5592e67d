"""The stand-in's page in headless Chromium (Debian's), with flagbot's real Slack app behind it.

A real `try` needs the testbed, so the thread is posted by flagbot's own reporter and renderer
(tests/support/sample_thread.py); everything after that is live: what is typed in the page's
command box and the buttons clicked in it reach the bot as signed requests, and the bot's
answers appear on the page without a reload. Assertions are on the DOM, not on pixels; the
screenshot is kept as an artefact (state/artifacts/standin-thread.png).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from PIL import Image

from bot.loop.playbook import load_playbooks, playbook_dirs
from bot.store.experiments import create_experiment
from flagbot_lab.standin import BotRequest, signature
from flagbot_lab.standin.browser import Browser, chromium, missing, naming
from tests.support.sample_thread import EXPERIMENT as SAMPLE_EXPERIMENT
from tests.support.sample_thread import SampleThread, bot_without_hosts, post_sample_thread
from tests.support.slack_bot import SIGNING_SECRET, TOKEN, RunningBot

pytestmark = pytest.mark.skipif(missing() is not None, reason=f"no headless Chromium here: {missing()}")
CHANNEL = "C0FLAGBOT"
ROOT = Path(__file__).resolve().parents[3]
ARTEFACT = ROOT / "state" / "artifacts" / "standin-thread.png"
WIDTH = 1600


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[RunningBot]:
    async with bot_without_hosts(tmp_path) as running:
        yield running


@pytest.fixture(scope="module")
def chart_png(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the sample's benchmark chart is drawn once for the module."""
    return tmp_path_factory.mktemp("chart") / "experiment-7-bench.png"


@pytest.fixture
async def thread(bot: RunningBot, chart_png: Path) -> SampleThread:
    """The sample thread, and its experiment in the bot's store: a button acts on the experiment's
    own target, so a click on a card whose experiment the store does not know is refused."""
    store = bot.services.store
    while (
        row := await store.run(
            create_experiment, store.store, target="lab", playbook="try", params={}, actor="cli:sample"
        )
    ).id < SAMPLE_EXPERIMENT:
        pass
    assert row.id == SAMPLE_EXPERIMENT
    return await post_sample_thread(bot.standin, TOKEN, chart_png)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium(width=WIDTH) as opened:
        yield opened
    assert not naming(str(opened.profile)), "a Chromium process outlived its test"


def page(bot: RunningBot, user: str, thread_ts: str | None = None) -> str:
    url = f"{bot.standin.base_url}/?channel={CHANNEL}&user={user}"
    return url + (f"&thread={thread_ts}" if thread_ts else "")


def texts(selector: str) -> str:
    """A script returning the visible text of every element matching `selector`, joined."""
    return f"return [...document.querySelectorAll({json.dumps(selector)})].map(e => e.innerText).join('\\n')"


def contains(selector: str, needle: str) -> str:
    return f"return [...document.querySelectorAll({json.dumps(selector)})].some(e => e.innerText.includes({json.dumps(needle)}))"


def button(pane: str, label: str) -> str:
    return (
        f"return [...document.querySelectorAll('{pane} button.bk-btn')]"
        f".find(b => b.innerText.trim() === {json.dumps(label)}) || null"
    )


def requests(bot: RunningBot) -> list[BotRequest]:
    """The HTTP requests the stand-in sent to the bot (HTTP mode: all it sent)."""
    return [r for r in bot.standin.sent() if isinstance(r, BotRequest)]


def last_click(bot: RunningBot) -> tuple[BotRequest, dict[str, object]]:
    """The latest block_actions request sent to the bot, and its payload."""
    for request in reversed(requests(bot)):
        payload = parse_qs(request.body.decode()).get("payload")
        if payload:
            return request, json.loads(payload[0])
    raise AssertionError("no block_actions was sent to the bot")


async def test_the_thread_reads_as_in_slack_and_a_screenshot_is_kept(
    bot: RunningBot, thread: SampleThread, browser: Browser
) -> None:
    await browser.open(page(bot, "U0OPER", thread.card_ts))
    await browser.wait(
        "return [...document.images].length >= 1 && [...document.images].every(i => i.complete)",
        what="the chart loaded",
    )
    channel = await browser.js(texts("#channel-log"))
    assert "try on lab · #7" in channel and "(edited)" in channel  # the card, its latest version
    assert "5 replies" in channel  # replies folded under the root: one per part, then the end
    assert "replied to a thread" in channel and "@bob" in channel  # the end, broadcast, mentioning
    assert "max_running_requests 48 → 26" in channel and "undecided" not in channel
    assert "Capacity: parsed vs effective" not in channel  # evidence stays in the thread
    in_thread = await browser.js(texts("#thread-log"))
    steps = len(load_playbooks(playbook_dirs())["try"].steps)
    assert "asked by @bob" in in_thread and f"✅ {steps}." in in_thread and "⏳" not in in_thread
    assert "→ regressed: max_running_requests 48 → 26 (-45.8%); change still applied" in in_thread
    assert "Status" not in in_thread and "succeeded" not in in_thread  # the outcome, stated once
    assert "Also sent to the channel" in in_thread
    table = await browser.js(texts("#thread-log pre.code"))
    assert "max_running_requests (effective)" in table and "-45.8%" in table
    assert ">> [2025-11-29 21:05:09] max_total_num_tokens=1830912" in table  # the highlighted line
    labels = await browser.js(
        "return [...document.querySelectorAll('#thread-log button.bk-btn')].map(b => b.innerText)"
    )
    assert labels == ["Revert", "Keep", "Re-run benchmark", "Isolate"]
    widths = await browser.js(
        "return [...document.querySelectorAll('#thread-log img.bk-img')].map(i => i.naturalWidth)"
    )
    assert len(widths) == 1 and widths[0] > 500  # the chart, an image of a file served by the stand-in
    file_text = await browser.js(
        "const a = [...document.querySelectorAll('#thread-log a')].find(a => a.href.includes('/files/'));"
        " return fetch(a.href).then(r => r.text())"
    )
    assert "capture cuda graph bs 70" in file_text  # the long excerpt, uploaded whole
    png = await browser.screenshot(ARTEFACT, width=WIDTH)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(ARTEFACT) as image:
        assert image.width == WIDTH and image.height > 1500  # the whole thread, not one screen
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 100  # drawn, not blank


async def test_the_command_box_sends_slash_commands_and_mentions(bot: RunningBot, browser: Browser) -> None:
    await browser.open(page(bot, "U0OPER"))
    await browser.type_line(".chan-pane input[name=text]", "/flagbot help")
    await browser.wait(contains("#channel-log .msg.bot", "flagbot commands"), what="the bot's help")
    slash = parse_qs(requests(bot)[-1].body.decode())
    assert slash["command"] == ["/flagbot"] and slash["text"] == ["help"] and slash["user_id"] == ["U0OPER"]

    answer_ts = await browser.js("return document.querySelector('#channel-log .msg.bot').dataset.ts")
    await browser.open(page(bot, "U0OPER", answer_ts))
    sent = len(requests(bot))
    await browser.type_line(".thread-pane input[name=text]", "/flagbot status")
    await browser.wait(
        contains(".thread-pane .notice.err", "/flagbot is not supported in threads. Sorry!"),
        what="Slack's refusal of a slash command in a thread",
    )
    assert len(requests(bot)) == sent  # nothing reached the bot

    await browser.type_line(".thread-pane input[name=text]", "@flagbot verify max_running_requests>=48")
    event = (
        await bot.standin.wait_for(lambda: [r for r in requests(bot)[sent:] if b"app_mention" in r.body])
    )[0]
    assert json.loads(event.body)["event"]["thread_ts"] == answer_ts
    # the run's card is posted in the thread and edited in place until the run ends (no host here)
    await browser.wait(contains("#thread-log .msg.bot", "→ failed"), what="the verify card, finished")
    in_thread = await browser.js(texts("#thread-log"))
    assert "verify on lab · #1" in in_thread and "/flagbot verify max_running_requests>=48" in in_thread
    assert "@flagbot verify max_running_requests>=48" in in_thread  # the mention itself, as typed
    assert "verify on lab" not in await browser.js(texts("#channel-log"))  # answered in the thread only


async def test_buttons_send_signed_clicks_and_show_the_bots_effect(
    bot: RunningBot, thread: SampleThread, browser: Browser
) -> None:
    await browser.open(page(bot, "U0VIEW", thread.card_ts))
    await browser.click(await browser.wait(button("#thread-log", "Revert"), what="the Revert button"))
    dialog = await browser.wait(
        "const d = document.getElementById('confirm'); return d.open && d.innerText",
        what="the confirm dialog",
    )
    assert "Revert the change of experiment #7" in dialog
    await browser.click(await browser.js("return document.querySelector('#confirm .ok')"))
    note = await browser.wait(
        "const e = document.querySelector('#thread-log .msg.eph'); return e && e.innerText",
        what="the refusal only the viewer sees",
    )
    assert "Only visible to you" in note and "operator" in note
    request, payload = last_click(bot)
    assert payload["type"] == "block_actions" and payload["user"] == {
        "id": "U0VIEW",
        "username": "carol",
        "name": "carol",
        "team_id": "T0STANDIN",
    }
    assert request.signature == signature(SIGNING_SECRET, request.timestamp, request.body)

    await browser.js(
        "const s = document.getElementById('user'); s.value = 'U0OPER'; s.dispatchEvent(new Event('change'))"
    )
    await browser.wait("return document.body.dataset.user === 'U0OPER'", what="the page as bob")
    assert not await browser.js("return document.querySelector('.msg.eph')")  # carol's, not bob's
    await browser.click(await browser.wait(button("#thread-log", "Keep"), what="the Keep button"))
    await browser.wait(contains("#thread-log .msg.bot", "@bob clicked Keep at"), what="who clicked what")
    _, payload = last_click(bot)
    assert payload["actions"][0]["action_id"] == "flagbot_keep"  # type: ignore[index]
