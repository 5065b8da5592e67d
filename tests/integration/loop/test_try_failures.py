"""A try the server will not start with: failed to start, the fatal line in the evidence, rolled back."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.experiments import list_steps
from bot.store.observations import list_observations
from bot.store.records import evidence_of
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, store_of, write_config
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
FATAL = "Not enough memory"


@pytest.mark.usefixtures("on_baseline")
async def test_a_change_that_does_not_start_is_rolled_back_with_its_fatal_line(
    testbed: Testbed, tmp_path: Path
) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    _, status_before, _ = await flagbot_json(config, "status")
    _, tried, err = await flagbot_json(config, "try", "add", "--mem-fraction-static", "0.2")
    assert tried["verdict"] == "failed-to-start", (tried, err)
    assert FATAL in tried["summary"] and "rolled back, healthy again" in tried["summary"]
    store = store_of(config)
    try:
        evidence = [row.data for row in evidence_of(store, tried["experiment_id"])]
        learned = list_observations(store, flag="--mem-fraction-static")
    finally:
        store.close()
    excerpts = [b for b in evidence if b["kind"] == "journal"]
    assert excerpts and any(FATAL in (b.get("highlight") or "") for b in excerpts)
    assert [o.kind for o in learned] == ["failure"] and FATAL in learned[0].text
    _, status, _ = await flagbot_json(config, "status")
    assert status["health"] == 200 and status["flags"] == status_before["flags"]


WARMUP_BOUND_S = 8


@pytest.mark.usefixtures("on_baseline")
async def test_a_change_whose_warmup_hangs_is_caught_at_the_warmup_bound_and_rolled_back(
    testbed: Testbed, tmp_path: Path
) -> None:
    """seed-gb10's twin hangs its warmup with `--enable-nccl-nvls`: uvicorn is up, /health stays 503."""
    config = write_config(testbed, tmp_path)
    config.write_text(config.read_text() + f'\n[targets.twin.timeouts]\nwarmup = "{WARMUP_BOUND_S}s"\n')
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    _, status_before, _ = await flagbot_json(config, "status")
    _, tried, err = await flagbot_json(config, "try", "add", "--enable-nccl-nvls")
    assert tried["verdict"] == "failed-to-start", (tried, err)
    assert "the warmup request hung" in tried["summary"] and "rolled back, healthy again" in tried["summary"]
    store = store_of(config)
    try:
        evidence = [row.data for row in evidence_of(store, tried["experiment_id"])]
        steps = {step.action: step for step in list_steps(store, tried["experiment_id"])}
        learned = list_observations(store, flag="--enable-nccl-nvls")
    finally:
        store.close()
    happened = [b for b in evidence if b.get("title") == "What happened"]
    assert happened and f"503 (warming up) for {WARMUP_BOUND_S} s" in happened[0]["text"]
    assert any(b["kind"] == "journal" for b in evidence)  # the hung start's own lines
    timings = steps["await_start"].result["timings"]
    # caught at the warmup bound after the first 503, not at the 30 min `ready` bound
    assert WARMUP_BOUND_S <= timings["total_s"] - timings["loading_s"] < WARMUP_BOUND_S + 10
    assert [o.kind for o in learned] == ["failure"] and "warmup request hung" in learned[0].text
    _, status, _ = await flagbot_json(config, "status")
    assert status["health"] == 200 and status["flags"] == status_before["flags"]
