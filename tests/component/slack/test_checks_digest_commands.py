"""`/flagbot digest` and `/flagbot checks` through the real app and the stand-in."""

from __future__ import annotations

from pathlib import Path

from tests.support.sample_thread import bot_without_hosts

CHANNEL = "C0FLAGBOT"


async def test_digest_posts_the_weeks_post_mortem_and_a_bad_week_is_explained(tmp_path: Path) -> None:
    async with bot_without_hosts(tmp_path) as running:
        standin = running.standin
        answer = await standin.slash("digest week=2026-W48", user="U0VIEW", channel=CHANNEL)
        assert answer.status == 200
        posted = await standin.wait_for(
            lambda: [m for m in standin.messages(CHANNEL) if "Weekly post-mortem 2026-W48" in str(m.blocks)],
            timeout=30,
        )
        assert "Nothing happened" in str(posted[0].blocks) or "Experiments" in str(posted[0].blocks)
        await standin.slash("digest week=2026-W99", user="U0VIEW", channel=CHANNEL)
        refused = await standin.wait_for(
            lambda: [e for e in standin.workspace.ephemerals if "2026-W99" in e.text], timeout=30
        )
        assert "YYYY-Www" in refused[0].text or "does not exist" in refused[0].text
        await running.services.drain()
        assert not [m for m in standin.messages(CHANNEL) if "2026-W99" in str(m.blocks)]


async def test_checks_lists_for_a_viewer_and_pausing_needs_an_operator(tmp_path: Path) -> None:
    async with bot_without_hosts(tmp_path) as running:
        standin = running.standin
        await standin.slash("checks", user="U0VIEW", channel=CHANNEL)
        listed = await standin.wait_for(
            lambda: [m for m in standin.messages(CHANNEL) if "verification checks" in m.text], timeout=30
        )
        assert listed[0].text == "no verification checks yet: a try or a revert schedules them"
        answer = await standin.slash("checks pause 1", user="U0VIEW", channel=CHANNEL)
        assert answer.status == 200 and "operator" in answer.body
        await running.services.drain()
