"""`/flagbot status` over every target through the real app and the stand-in: one table, one
line per target; both targets listen nowhere, and each is a line saying so, not a failed answer.
A target whose own viewers leave the user out is not in that user's table."""

from __future__ import annotations

from pathlib import Path

from flagbot_lab.standin.model import Channel, Message
from tests.support.slack_bot import configured_bot, lab_config, unreachable_target

CHANNEL = "C0FLEET"
CONFIG = lab_config(
    'viewers = ["*"]\n',
    after=unreachable_target("other"),
)


async def test_status_without_a_target_posts_one_line_per_target(tmp_path: Path) -> None:
    async with configured_bot(tmp_path, CONFIG, Channel(CHANNEL, "fleet")) as running:
        standin = running.standin
        for text in ("status", "status target=all"):
            answer = await standin.slash(text, user="U0VIEW", channel=CHANNEL)
            assert answer.status == 200, answer.body

        def both_answers() -> list[Message]:  # the two commands answer in their own time: wait for both
            found = [
                m for m in standin.messages(CHANNEL) if "2 targets, 2 not reached" in str(m.blocks) + m.text
            ]
            return found if len(found) >= 2 else []

        posted = await standin.wait_for(both_answers, timeout=30)
        assert len(posted) == 2
        shown = str(posted[0].blocks) + posted[0].text
        assert "lab" in shown and "other" in shown
        assert not [e for e in standin.workspace.ephemerals if "unknown target" in e.text]


async def test_a_target_the_user_may_not_view_is_left_out(tmp_path: Path) -> None:
    config = CONFIG + '[targets.other.rbac]\nviewers = ["U0OPER"]\n'
    async with configured_bot(tmp_path, config, Channel(CHANNEL, "fleet")) as running:
        standin = running.standin
        await standin.slash("status target=all", user="U0VIEW", channel=CHANNEL)
        [posted] = await standin.wait_for(
            lambda: [
                m for m in standin.messages(CHANNEL) if "1 target, 1 not reached" in str(m.blocks) + m.text
            ],
            timeout=30,
        )
        assert "other" not in str(posted.blocks) + posted.text
