"""The headless demo's text of the channel, and the demo's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagbot_lab.demo.setup import PROFILE, DemoSetupError, demo_config_text, write_demo_config
from flagbot_lab.demo.story import ADMIN, CHANNEL, OPERATOR
from flagbot_lab.demo.thread import Typed, readable, transcript
from flagbot_lab.standin.state import StandinState
from flagbot_lab.testbed.config import twin_config_text
from flagbot_lab.testbed.layout import Layout


def names(state: StandinState) -> dict[str, str]:
    return {u.id: u.name for u in state.workspace.users.values()}


def test_slack_markup_reads_as_a_person_sees_it() -> None:
    text = readable(
        "asked by <@U0ADMIN>: max_running_requests&gt;=48 <http://x/y|the chart>", {ADMIN: "alice"}
    )
    assert text == "asked by @alice: max_running_requests>=48 the chart (http://x/y)"


def test_the_transcript_interleaves_commands_answers_and_threads_in_order() -> None:
    state = StandinState()
    ws = state.workspace
    before = ws.post(CHANNEL, text="an older message")
    typed = Typed(before.ts, OPERATOR, "try --enable-metrics")
    ws.ephemeral(CHANNEL, OPERATOR, text="starting `try`: follow it in the thread")
    card = ws.post(
        CHANNEL, text="card", blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "try on twin"}}]
    )
    ws.post(CHANNEL, text="evidence", thread_ts=card.ts)
    ws.post(CHANNEL, text="verdict", thread_ts=card.ts, reply_broadcast=True)
    ws.update(
        CHANNEL,
        card.ts,
        text=None,
        blocks=[{"type": "header", "text": {"type": "plain_text", "text": "done"}}],
        metadata=None,
    )
    roots = state.messages(CHANNEL)
    replies = {r.ts: state.messages(CHANNEL, thread_ts=r.ts) for r in roots if not r.is_reply}
    text = transcript(roots, replies, ws.ephemerals, [typed], names(state), title="#flagbot-ops")
    lines = text.splitlines()
    assert lines[0] == "#flagbot-ops"
    order = [
        next(i for i, line in enumerate(lines) if needle in line)
        for needle in (
            "an older message",
            "bob typed: /flagbot try --enable-metrics",
            "(only bob sees) starting",
            "flagbot (edited 1x)",
            "done",
            "↳ flagbot",
            "evidence",
            "verdict",
        )
    ]
    assert order == sorted(order)
    assert "try on twin" not in text  # the card's latest version only
    assert text.count("verdict") == 1  # a broadcast reply is shown once, in its thread
    assert "(also sent to the channel)" in text


def test_the_demo_config_adds_the_profile_rbac_and_database(tmp_path: Path) -> None:
    layout = Layout(215, tmp_path, 2)
    twin = twin_config_text(
        layout, key_path=tmp_path / "key", known_hosts=tmp_path / "known", scenario="seed-gb10"
    )
    settings = write_demo_config(tmp_path / "demo" / "flagbot.toml", twin, tmp_path / "demo" / "flagbot.db")
    assert settings.targets["twin"].benchmark_profile == PROFILE
    assert PROFILE in settings.bench
    assert settings.database.sqlite_path == tmp_path / "demo" / "flagbot.db"
    assert ADMIN in settings.slack.rbac.admins
    assert OPERATOR in settings.slack.rbac.operators


def test_a_testbed_config_it_cannot_extend_is_refused() -> None:
    with pytest.raises(DemoSetupError, match="sglang_version"):
        demo_config_text('default_target = "twin"\n', Path("/tmp/x.db"))
