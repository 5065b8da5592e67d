"""The seeds' story through the CLI on the two-node testbed (issue 6, item 13).

baseline (effective 48) -> try both flags (preflight warns the allreduce fusion is a probable
no-op on 12.1) -> regression 48 -> 26 with parsed vs effective side by side, called by the capacity
guard -> hypotheses ranked -> isolate names --enable-fused-moe-sum-all-reduce within 2 probe
restarts -> revert the no-op flag -> verify back at 48 -> `flagbot log` tells the chain, and the
next preflight cites what was learned.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.store.records import evidence_of
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, store_of, write_config
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
FUSION = "--enable-flashinfer-allreduce-fusion"
FUSED_MOE = "--enable-fused-moe-sum-all-reduce"


def blocks(config: Path, experiment_id: int) -> list[dict]:
    store = store_of(config)
    try:
        return [row.data for row in evidence_of(store, experiment_id)]
    finally:
        store.close()


def texts(items: list[dict]) -> str:
    return "\n".join(str(item) for item in items)


@pytest.mark.usefixtures("on_baseline")
async def test_the_seeds_story(testbed: Testbed, tmp_path: Path) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0

    code, pinned, _ = await flagbot_json(config, "baseline", "pin")
    assert code == 0 and pinned["verdict"] == "pinned" and "max_running_requests 48" in pinned["summary"]

    code, dry, _ = await flagbot_json(config, "try", FUSION, FUSED_MOE, "--dry-run")
    assert code == 0 and dry["verdict"] == "dry-run"
    preflight = texts(blocks(config, dry["experiment_id"]))
    assert "probably a no-op" in preflight and FUSION in preflight and "Drop-in change" in preflight

    code, tried, err = await flagbot_json(config, "try", FUSION, FUSED_MOE)
    assert code == 0 and tried["verdict"] == "regressed", (tried, err)
    evidence = blocks(config, tried["experiment_id"])
    capacity = next(b for b in evidence if b.get("title", "").startswith("Capacity: before vs after"))
    rows = {row["metric"]: row for row in capacity["rows"]}
    assert rows["max_running_requests (effective)"]["before"] == "48"
    assert rows["max_running_requests (effective)"]["after"] == "26"
    assert rows["max_running_requests (parsed, server_args)"]["after"] == "48"
    verdict = next(b for b in evidence if b["kind"] == "verdict" and b["verdict"] == "regressed")
    # The regression is called by the capacity guard, not by throughput: what the twin's throughput
    # does on a loaded 2-core machine is the machine's business, so only its row is held: an
    # interval, or (a busy machine: the load generator was the limit) an honest "undecided" naming
    # why, never a direction (issue 18: a loaded `make test` failed on the interval alone).
    assert verdict["details"][0].startswith("verdict: regressed (guarded by max_running_requests)")
    throughput = [line for line in verdict["details"] if line.startswith("output_throughput@c=32")]
    assert throughput, verdict["details"]
    measured = re.search(r"\[[-+]\d", throughput[0])
    client_bound = "undecided (client-bound: the load generator, not the server, was the limit)"
    assert measured or client_bound in throughput[0], throughput
    chart = next(b for b in evidence if b["kind"] == "chart")
    assert Path(chart["path"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ranked = next(b for b in evidence if b.get("title") == "Hypotheses, most likely first")
    assert ranked["rows"][0][1] == FUSED_MOE, ranked["rows"]
    assert any("reverted the change" in b.get("headline", "") for b in evidence)

    code, isolated, err = await flagbot_json(config, "isolate", "max_running_requests>=48")
    assert code == 0 and isolated["verdict"] == "found", (isolated, err)
    probes = [
        b for b in blocks(config, isolated["experiment_id"]) if b.get("title", "").startswith("Isolate probe")
    ]
    assert 1 <= len(probes) <= 2
    assert f"culprit(s): {FUSED_MOE}" in isolated["summary"]

    code, reverted, err = await flagbot_json(config, "revert", f"flags={FUSION}")
    assert code == 0 and reverted["verdict"] == "pass", (reverted, err)
    assert "max_running_requests 48 (baseline 48)" in reverted["summary"]

    code, verified, _ = await flagbot_json(config, "verify", "max_running_requests>=48")
    assert code == 0 and verified["verdict"] == "pass"

    code, log, _ = await flagbot_json(config, "log")
    kinds = [entry["kind"] for entry in log["entries"]]
    story = "\n".join(entry["text"] for entry in log["entries"])
    assert kinds.count("experiment") >= 6 and "learned" in kinds
    assert "verdict regressed" in story and f"culprit(s): {FUSED_MOE}" in story and "verdict pass" in story

    code, again, _ = await flagbot_json(config, "try", FUSED_MOE, "--dry-run")
    cited = texts(blocks(config, again["experiment_id"]))
    assert "isolate:" in cited and FUSED_MOE in cited  # the observation from isolate is cited
