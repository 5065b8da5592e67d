"""The seeds' story on another SGLang release, shortened (issue 19, item 3).

`test_story.py` tells the whole story on 0.5.10, the session's release. Here the booted nodes are
switched to the twin as SGLang 0.5.23 (`seed-gb10-0.5.23`: the same deployment; the startup lines
are 0.5.23's: `server_args={...}`, nested graph settings, the KV line with its dtype, the new
capture lines; the benchmark client is `sglang.benchmark.serving`) for one pin, one `try` and one
bench_serving level, then switched back: about two twin restarts more than a plain try.

On 0.5.23 the hybrid state cache already caps the effective max_running_requests at 34 (EAGLE
keeps the overlap scheduler, so the extra buffer needs 5 state slots per request), and the fused
MoE all-reduce's workspace cuts it to 24 while the parsed value stays 48
(tests/unit/twin/test_hybrid_0_5_23.py pins both numbers on the engine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records import evidence_of
from flagbot_lab.testbed import Testbed
from flagbot_lab.twin.install import NODE_SITE
from tests.integration.loop.scenario_switch import running_scenario, twin_scenario
from tests.integration.loop.support import flagbot, flagbot_json, store_of, write_config
from tests.integration.target.support import truth_start

pytestmark = pytest.mark.asyncio(loop_scope="session")
FUSED_MOE = "--enable-fused-moe-sum-all-reduce"
SCENARIO = "seed-gb10-0.5.23"


def _config(bed: Testbed, tmp_path: Path) -> Path:
    """The loop tests' config, with the target saying the release the twin now is."""
    path = write_config(bed, tmp_path)
    path.write_text(path.read_text().replace('sglang_version = "0.5.10"', 'sglang_version = "0.5.23"', 1))
    return path


async def test_the_seed_story_on_sglang_0_5_23(testbed: Testbed, tmp_path: Path) -> None:
    async with twin_scenario(testbed, SCENARIO):
        start = truth_start(testbed)
        assert start is not None and start["scenario"] == SCENARIO
        config = _config(testbed, tmp_path)
        assert (await flagbot(config, "db", "upgrade"))[0] == 0

        code, pinned, err = await flagbot_json(config, "baseline", "pin")
        assert code == 0 and pinned["verdict"] == "pinned", (pinned, err)
        assert "max_running_requests 34" in pinned["summary"]

        code, tried, err = await flagbot_json(config, "try", FUSED_MOE)
        assert code == 0 and tried["verdict"] == "regressed", (tried, err)
        store = store_of(config)
        try:
            evidence = [row.data for row in evidence_of(store, tried["experiment_id"])]
        finally:
            store.close()
        capacity = next(b for b in evidence if b.get("title", "").startswith("Capacity: before vs after"))
        rows = {row["metric"]: row for row in capacity["rows"]}
        assert rows["max_running_requests (effective)"]["before"] == "34"
        assert rows["max_running_requests (effective)"]["after"] == "24"
        assert rows["max_running_requests (parsed, server_args)"]["after"] == "48"
        verdict = next(b for b in evidence if b["kind"] == "verdict" and b["verdict"] == "regressed")
        assert verdict["details"][0].startswith("verdict: regressed (guarded by max_running_requests)")

        # SGLang's own client on node 0: the module the host's 0.5.23 has (sglang.benchmark.serving)
        code, benched, err = await flagbot_json(
            config, "bench", "backend=bench_serving", "concurrency=8", "repeats=1"
        )
        assert code == 0, (benched, err)
        [measurement] = benched["measurements"]
        assert measurement["source"] == "bench_serving"
        assert measurement["metrics"]["completed"] == 16
        newest = truth_start(testbed)
        assert newest is not None and newest["scenario"] == SCENARIO
    assert {running_scenario(testbed, k) for k in range(len(testbed.addresses))} == {"seed-gb10"}
    shim = testbed.layout.root(0) / NODE_SITE / "sglang" / "_version.py"
    assert '__version__ = "0.5.10"' in shim.read_text()  # the session's release is back
