"""The rest of the command set in Slack (issue 7 item 2): `run`, `cancel`, `rollback`, `reconcile`,
`bench`, each through the stand-in over HTTP with real Bolt and a real SQLite store.

The target `lab` points at a closed port (no host is needed): the test playbooks use the t_*
actions (tests/support/loop_actions.py), whose gates decide exactly when a run is busy, and a
command that needs SSH fails fast, as an unreachable host does. The benchmark runs against a
real twin process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.config import load_settings
from bot.store import AsyncStore, Store
from bot.store.experiments import list_experiments
from bot.store.records import audit_events
from tests.support.loop_actions import Probe, registered_actions
from tests.support.slack_bot import RunningBot, running_bot
from tests.support.twin_process import TwinFactory

CHANNEL = "C0FLAGBOT"
GREET = """name: greet
description: say hello (a test playbook)
mutating: false
params:
  who: {kind: text, required: true, help: "whom to greet"}
steps:
  - action: t_note
    with: {label: $who}
"""
HOLD = """name: hold
description: hold the target until the test opens the gate
mutating: true
steps:
  - action: t_wait
    with: {gate: g}
  - action: t_note
    with: {label: after}
on_cancel:
  - action: t_undo
"""


@pytest.fixture
def probe() -> Iterator[Probe]:
    with registered_actions() as seen:
        yield seen


def write_config(tmp_path: Path, base_url: str = "http://127.0.0.1:9", extra: str = "") -> Path:
    books = tmp_path / "playbooks"
    books.mkdir(exist_ok=True)
    (books / "greet.yaml").write_text(GREET)
    (books / "hold.yaml").write_text(HOLD)
    config = tmp_path / "flagbot.toml"
    config.write_text(
        f'default_target = "lab"\nplaybook_dirs = ["{books}"]\n'
        f'[targets.lab]\nunit = "sglang.service"\nbase_url = "{base_url}"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n[targets.lab.ssh]\nconnect_timeout = 1\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER", "U0APPR"]\nviewers = ["*"]\n' + extra
    )
    return config


async def started(config: Path, tmp_path: Path) -> tuple[AsyncStore, Any]:
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    return store, running_bot(load_settings(config, required=True), store, lease_ttl_s=3.0)


@pytest.fixture
async def bot(tmp_path: Path, probe: Probe) -> AsyncIterator[RunningBot]:
    store, context = await started(write_config(tmp_path), tmp_path)
    try:
        async with context as running:
            try:
                yield running
            finally:  # a run left waiting would keep the bot's shutdown waiting for it
                for gate in probe.gates.values():
                    gate.set()
    finally:
        await store.aclose()


def cards(bot: RunningBot, playbook: str) -> list[Any]:
    return [m for m in bot.standin.messages(CHANNEL) if m.text.startswith(f"flagbot {playbook}")]


async def finished_card(bot: RunningBot, playbook: str, status: str) -> Any:
    def done() -> Any:
        found = [m for m in cards(bot, playbook) if f": {status}" in m.text]
        return found[-1] if found else None

    return await bot.standin.wait_for(done, timeout=30)


async def test_run_starts_a_users_playbook_in_a_thread(bot: RunningBot, probe: Probe) -> None:
    answer = await bot.standin.slash("run greet who=alice", user="U0OPER", channel=CHANNEL)
    assert answer.status == 200 and "starting `run`" in answer.json()["text"]
    card = await finished_card(bot, "greet", "succeeded")
    assert "✅ 1. t_note" in str(card.blocks) and "/flagbot run greet who=alice" in str(card.blocks)
    assert probe.calls == [("t_note", {"label": "alice", "value": None})]
    rows = await bot.services.store.run(list_experiments, bot.services.store.store, "lab")
    assert [(r.playbook, r.actor, r.status) for r in rows] == [("greet", "slack:U0OPER", "succeeded")]


async def test_run_names_what_is_wrong_before_anything_starts(bot: RunningBot, probe: Probe) -> None:
    unknown = await bot.standin.slash("run nosuch", user="U0OPER", channel=CHANNEL)
    body = unknown.json()
    assert body["response_type"] == "ephemeral" and "no playbook 'nosuch'" in body["text"]
    assert "greet" in body["text"] and "hold" in body["text"]  # the playbooks there are
    missing = await bot.standin.slash("run greet", user="U0OPER", channel=CHANNEL)
    assert missing.json()["response_type"] == "ephemeral" and "who" in missing.json()["text"]
    await bot.services.drain()
    assert not bot.standin.messages(CHANNEL) and not probe.calls


@pytest.mark.parametrize("text", ["rollback", "reconcile", "bench", "run greet who=bob"])
async def test_a_viewers_mutating_command_is_refused_and_audited(bot: RunningBot, text: str) -> None:
    answer = await bot.standin.slash(text, user="U0VIEW", channel=CHANNEL)
    body = answer.json()
    assert body["response_type"] == "ephemeral" and "operator role" in body["text"], body
    await bot.services.drain()
    events = await bot.services.store.run(audit_events, bot.services.store.store, "lab")
    command = text.split()[0]
    refused = [e for e in events if e.action == f"slack:{command}" and e.actor == "slack:U0VIEW"]
    assert refused and refused[0].detail["allowed"] is False
    assert not bot.standin.messages(CHANNEL)


async def test_a_busy_target_refuses_rollback_and_bench_and_only_an_admin_cancels_others(
    bot: RunningBot, probe: Probe
) -> None:
    standin, store = bot.standin, bot.services.store
    await standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)  # the run holds the lease, waiting

    for text in ("rollback", "bench"):
        await standin.slash(text, user="U0APPR", channel=CHANNEL)
        card = await finished_card(bot, text, "refused")
        assert "slack:U0OPER" in card.text, card.text  # the holder is named
    assert "bench wait=DURATION" in str(cards(bot, "bench")[-1].blocks)

    refused = await standin.slash("cancel", user="U0APPR", channel=CHANNEL)
    assert refused.json()["response_type"] == "ephemeral" and "admin role" in refused.json()["text"]
    assert "U0OPER" in refused.json()["text"]  # whose run it is
    allowed = await standin.slash("cancel", user="U0ADMIN", channel=CHANNEL)
    assert allowed.status == 200
    await standin.wait_for(lambda: [m for m in standin.messages(CHANNEL) if "asked experiment" in m.text])
    probe.gate("g").set()
    await finished_card(bot, "hold", "cancelled")
    await bot.services.drain()
    [row] = [r for r in await store.run(list_experiments, store.store, "lab") if r.playbook == "hold"]
    assert (row.status, row.cancel_requested_by) == ("cancelled", "slack:U0ADMIN")
    assert ("t_undo", {}) in probe.calls and ("t_note", {"label": "after", "value": None}) not in probe.calls
    events = await store.run(audit_events, store.store, "lab")
    decisions = [(e.actor, e.detail["allowed"]) for e in events if e.action == "slack:cancel"]
    assert sorted(decisions) == [("slack:U0ADMIN", True), ("slack:U0APPR", False)]


async def test_an_operator_cancels_their_own_run(bot: RunningBot, probe: Probe) -> None:
    await bot.standin.slash("run hold", user="U0OPER", channel=CHANNEL)
    await asyncio.wait_for(probe.arrived("g").wait(), 10)
    answer = await bot.standin.slash("cancel", user="U0OPER", channel=CHANNEL)
    assert answer.status == 200 and not answer.body  # acknowledged, answered in the channel
    asked = await bot.standin.wait_for(
        lambda: [m for m in bot.standin.messages(CHANNEL) if "asked experiment" in m.text]
    )
    assert "<@U0OPER>" in asked[0].text and "(hold)" in asked[0].text
    probe.gate("g").set()
    await finished_card(bot, "hold", "cancelled")


async def test_reconcile_and_rollback_say_their_outcome_on_the_card(bot: RunningBot) -> None:
    answer = await bot.standin.slash("reconcile", user="U0OPER", channel=CHANNEL)
    assert "starting `reconcile`" in answer.json()["text"]
    card = await finished_card(bot, "reconcile", "succeeded")  # the ledger knows of no divergence
    assert "not diverged" in card.text
    shown = str(card.blocks)
    assert "✅ 1. settle unfinished runs" in shown and "✅ 2. take the target" in shown
    await bot.standin.slash("rollback", user="U0OPER", channel=CHANNEL)
    failed = await finished_card(bot, "rollback", "failed")  # the host does not answer
    assert "❌ 3. rollback" in str(failed.blocks) and "127.0.0.1" in failed.text, failed.text
    await bot.services.drain()
    for finished, name in ((card, "reconcile"), (failed, "rollback")):  # each ends telling who asked
        last = bot.standin.thread(CHANNEL, finished.ts)[-1]
        assert last.text.startswith("<@U0OPER> ") and name in last.text, last.text
        assert not last.reply_broadcast, last  # no verdict: nothing for the channel


async def test_bench_runs_in_a_thread_with_the_rows_and_the_chart(
    tmp_path: Path, probe: Probe, twins: TwinFactory
) -> None:
    twin = twins.start()
    await asyncio.to_thread(twin.wait_ready)
    profile = (
        "[bench.tiny]\nconcurrency = [1, 2]\nrepeats = 1\ninput_len = 64\noutput_len = 8\n"
        "num_requests = 2\nwarmup_requests = 0\n"
    )
    store, context = await started(write_config(tmp_path, twin.base, profile), tmp_path)
    try:
        async with context as bot:
            answer = await bot.standin.slash("bench profile=tiny", user="U0OPER", channel=CHANNEL)
            assert "starting `bench`" in answer.json()["text"]
            card = await finished_card(bot, "bench", "succeeded")
            await bot.services.drain()
            replies = bot.standin.thread(CHANNEL, card.ts)[1:]
            table = [r for r in replies if "Benchmark: set #" in str(r.blocks)]
            assert table, [r.text for r in replies]
            shown = str(table[0].blocks)
            assert "out tok/s" in shown and "TTFT p99" in shown
            assert any(b.get("type") == "image" for r in replies for b in r.blocks)  # the chart
            assert "stored as measurement set #" in card.text
            assert replies[-1].text.startswith("<@U0OPER> ") and "bench" in replies[-1].text, replies[-1]
    finally:
        await store.aclose()


async def proposed(bot: RunningBot) -> tuple[int, str, list[dict[str, Any]]]:
    """A verify that failed and ranked two hypotheses, as the `propose` step leaves it, posted."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.loop.report import RunOutcome
    from bot.slack.proposals import PROPOSALS_TITLE, post_proposals
    from bot.store.experiments import create_experiment, update_experiment
    from bot.store.records import add_evidence
    from bot.target.evidence import TableBlock
    from tests.support.slack_bot import TOKEN

    store = bot.services.store
    row = await store.run(
        create_experiment, store.store, target="lab", playbook="verify", params={}, actor="slack:U0OPER"
    )
    assert row.id is not None
    ranked = [
        {
            "variable": "--enable-metrics",
            "kind": "flag",
            "statement": "adding --enable-metrics lowers max_running_requests (48 -> 26)",
            "why": ["the knowledge base says it costs memory"],
            "score": 1.0,
            "experiment": {"playbook": "try", "changes": ["remove --enable-metrics"]},
        },
        {
            "variable": "memory",
            "kind": "memory",
            "statement": "less memory for the KV pool lowers max_running_requests",
            "why": ["memory moved"],
            "score": 0.5,
            "experiment": {"playbook": "isolate", "flags": ["--enable-metrics"]},
        },
    ]
    await store.run(
        update_experiment,
        store.store,
        row.id,
        status="succeeded",
        verdict="fail",
        state={"proposals": ranked},
    )
    commands = ("try remove --enable-metrics max_running_requests>=48", "isolate max_running_requests>=48")
    rows = tuple(
        (str(k), p["variable"], p["statement"], "why", commands[k - 1]) for k, p in enumerate(ranked, 1)
    )
    table = TableBlock(PROPOSALS_TITLE, ("rank", "variable", "hypothesis", "why", "experiment"), rows)
    await store.run(
        add_evidence, store.store, target="lab", kind="table", title=PROPOSALS_TITLE, data=table.to_json(),
        experiment_id=row.id,
    )  # fmt: skip
    root = bot.standin.workspace.post(CHANNEL, text="a verify's card")
    outcome = RunOutcome(
        row.id,
        "verify",
        "lab",
        "succeeded",
        "fail",
        None,
        [{"action": "propose", "result": {"proposals": 2}}],
    )
    client = AsyncWebClient(token=TOKEN, base_url=bot.standin.api_url)
    assert await post_proposals(bot.services, client, outcome, channel=CHANNEL, thread=root.ts) == 2
    return row.id, root.ts, ranked


async def test_a_proposed_hypothesis_runs_from_its_button_once_and_only_for_an_operator(
    bot: RunningBot,
) -> None:
    from bot.store.hypotheses import list_hypotheses

    standin, store = bot.standin, bot.services.store
    experiment_id, thread, ranked = await proposed(bot)
    offered = [m for m in standin.thread(CHANNEL, thread) if "flagbot_test_hypothesis" in str(m.blocks)]
    assert len(offered) == 1 and "try remove --enable-metrics" in str(offered[0].blocks)  # one message
    assert str(offered[0].blocks).count("flagbot_test_hypothesis") == 2  # a button per hypothesis
    first = offered[0]

    await standin.click(CHANNEL, first.ts, "flagbot_test_hypothesis", user="U0VIEW")
    refused = await standin.wait_for(lambda: standin.ephemerals("U0VIEW"))
    assert "operator role" in refused[-1].text  # authorised like the try it stands for
    assert "flagbot_test_hypothesis" in str(standin.message(CHANNEL, first.ts).blocks)  # still usable

    await asyncio.gather(  # a double click: both reach the bot before the message changes
        standin.click(CHANNEL, first.ts, "flagbot_test_hypothesis", user="U0OPER"),
        standin.click(CHANNEL, first.ts, "flagbot_test_hypothesis", user="U0OPER"),
    )
    await standin.wait_for(
        lambda: [m for m in standin.thread(CHANNEL, thread) if m.text.startswith("flagbot try")]
    )
    await bot.services.drain()
    [hypothesis] = await store.run(list_hypotheses, store.store, "lab")
    assert hypothesis.statement == ranked[0]["statement"] and hypothesis.variable == "--enable-metrics"
    assert hypothesis.expectations == ["max_running_requests>=48"] and f"#{experiment_id}" in str(
        hypothesis.because
    )
    tries = [e for e in await store.run(list_experiments, store.store, "lab") if e.playbook == "try"]
    assert [(e.hypothesis_id, e.actor) for e in tries] == [(hypothesis.id, "slack:U0OPER")]
    assert tries[0].params["hypothesis"] == hypothesis.id  # the words name it too: `hypothesis=N`
    clicked = [m for m in standin.thread(CHANNEL, thread) if "clicked Run this experiment" in m.text]
    assert len(clicked) == 1 and f"hypothesis #{hypothesis.id}" in clicked[0].text
    updated = str(standin.message(CHANNEL, first.ts).blocks)
    # who ran it, in place of its button; the other proposal keeps its own
    assert updated.count("flagbot_test_hypothesis") == 1 and "U0OPER" in updated
