"""Re-run benchmark on a finished try (issue 22, item 2): through the stand-in and the real Bolt
app, the click runs `bench rerun=ID` on the experiment's target: the stored after-set's profile
and levels against the running server (a twin process), no restart, compared with that set."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from bot.app.decisions import next_actions_of
from bot.config import load_settings
from bot.slack.card import CardState, status_card
from bot.store import AsyncStore, Store
from bot.store.bench_repo import latest_sets, save_set
from bot.store.experiments import create_experiment, list_experiments, update_experiment
from bot.store.models import MeasurementSet
from tests.support.slack_bot import RunningBot, running_bot
from tests.support.twin_process import TwinFactory

CHANNEL = "C0FLAGBOT"
PROFILES = (
    "[bench.tiny]\nconcurrency = [1, 2]\nrepeats = 1\ninput_len = 64\noutput_len = 8\n"
    "num_requests = 2\nwarmup_requests = 0\n"
    "[bench.other]\nconcurrency = [4]\nrepeats = 1\ninput_len = 64\noutput_len = 8\n"
    "num_requests = 2\nwarmup_requests = 0\n"
)


def write_config(tmp_path: Path, base_url: str) -> Path:
    config = tmp_path / "flagbot.toml"
    config.write_text(
        'default_target = "lab"\n'
        f'[targets.lab]\nunit = "sglang.service"\nbase_url = "{base_url}"\nbenchmark_profile = "other"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n[targets.lab.ssh]\nconnect_timeout = 1\n'
        f'[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
        '[slack.rbac]\noperators = ["U0OPER"]\nviewers = ["*"]\n' + PROFILES
    )
    return config


async def finished_try(store: AsyncStore) -> tuple[int, int]:
    """A kept try as a run leaves it, its after-set measured with profile tiny at level 2 only."""
    after = await store.run(
        save_set,
        store.store,
        MeasurementSet(
            target="lab", profile="tiny", backend="builtin", params={"profile": "tiny", "concurrency": [2]}
        ),
    )
    set_id = after.set.id
    assert set_id is not None
    row = await store.run(
        create_experiment,
        store.store,
        target="lab",
        playbook="try",
        params={"changes": [{"op": "add", "flag": "--enable-metrics"}]},
        actor="slack:U0OPER",
    )
    assert row.id is not None
    state = {
        "schema_version": 2,
        "after": {"set_id": set_id},
        "restart": {"applied": True},
        "conclusion": {"verdict": "improved", "kept": True},
    }
    await store.run(
        update_experiment, store.store, row.id, status="succeeded", verdict="improved", state=state
    )
    return row.id, set_id


async def post_card(bot: RunningBot, experiment_id: int) -> Any:
    """The finished card with the buttons the application layer chose for it (as the reporter)."""
    card = CardState(
        experiment_id, "try", "lab", "U0OPER", "/flagbot try --enable-metrics", status="succeeded"
    )
    chosen = await next_actions_of(bot.services.store, experiment_id)
    card.next_actions, card.primary_action = chosen.actions, chosen.primary
    blocks, text = status_card(card)
    return bot.standin.workspace.post(CHANNEL, text=text, blocks=blocks)


async def test_rerun_benchmarks_the_stored_profile_and_compares_with_the_after_set(
    tmp_path: Path, twins: TwinFactory
) -> None:
    twin = twins.start()
    await asyncio.to_thread(twin.wait_ready)
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    store = AsyncStore(sync)
    try:
        settings = load_settings(write_config(tmp_path, twin.base), required=True)
        async with running_bot(settings, store) as bot:
            experiment_id, set_id = await finished_try(store)
            card = await post_card(bot, experiment_id)
            shown = [e["action_id"] for b in card.blocks if b["type"] == "actions" for e in b["elements"]]
            assert shown == ["flagbot_revert", "flagbot_rerun"]  # kept, improved, one flag

            answer = await bot.standin.click(CHANNEL, card.ts, "flagbot_rerun", user="U0OPER")
            assert answer.status == 200

            def bench_done() -> Any:
                found = [
                    m
                    for m in bot.standin.workspace.all_messages(CHANNEL)
                    if m.text.startswith("flagbot bench") and ": succeeded" in m.text
                ]
                return found[-1] if found else None

            bench = await bot.standin.wait_for(bench_done, timeout=60)
            await bot.services.drain()
            blocks = str(bench.blocks)
            assert f"/flagbot bench rerun={experiment_id} target=lab" in blocks
            assert "benchmark (profile tiny, builtin)" in blocks  # the stored set's, not the target's
            assert f"compare with set #{set_id} (the after-set of experiment #{experiment_id})" in blocks
            assert f"compared with set #{set_id} (the after-set of experiment #{experiment_id})" in bench.text
            newest = (await store.run(latest_sets, store.store, "lab"))[0]
            assert newest.id != set_id
            assert (newest.profile, newest.params["concurrency"]) == ("tiny", [2])
            assert f"re-run of experiment #{experiment_id}" in newest.label
            # no restart: the bench ran no playbook, the try is the only experiment
            rows = await store.run(list_experiments, store.store, "lab")
            assert [r.id for r in rows] == [experiment_id]
    finally:
        await store.aclose()
