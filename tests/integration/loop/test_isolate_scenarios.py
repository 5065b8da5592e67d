"""Isolate's scenarios through the CLI on the two-node testbed (issue 6, item 13).

Each test pins the baseline (effective max_running_requests 48), writes six changed flags into
both nodes' units, then runs `flagbot isolate max_running_requests>=48` as a user would, and
checks what it says against what the twin really did: every probe restart is a new twin start
in node 0's ground truth with exactly the probe's flags, and a probe fails exactly when it holds
the culprit(s).

* one culprit among six (`--max-running-requests 20`), named within ⌈log2 6⌉ + 1 = 4 probes
  although the knowledge base ranks four harmless flags as likely as it and ahead of it;
* a culprit pair among six (twin scenario `seed-gb10-pair`: `--enable-metrics` and
  `--enable-cache-report` are harmless alone and drop capacity to 26 together), both named
  within 2⌈log2 6⌉ + 2 = 8 probes;
* ranking saves probes: `--enable-fused-moe-sum-all-reduce` among six, which the knowledge base
  cannot tell from the harmless flags; the first isolate learns it is the culprit, and the same
  case again is probed in that order, with fewer restarts than the first run and than the
  search without a ranking.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from bot.loop.isolate import isolate, probe_bound
from bot.loop.run_state import RunState
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore
from bot.store.experiments import get_experiment
from bot.store.observations import list_observations
from bot.store.records import evidence_of
from bot.target.readiness import wait_ready
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.session import TargetSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.loop.scenario_switch import running_scenario, twin_scenario
from tests.integration.loop.support import start, store_of, wait_for, write_config
from tests.integration.target.support import target_of, truth_records
from tests.integration.target.support_control import on_baseline  # noqa: F401
from tests.support.processes import communicate

pytestmark = pytest.mark.asyncio(loop_scope="session")
EXPECT = "max_running_requests>=48"
N = 6
ONE_BOUND = probe_bound(N)  # ⌈log2 6⌉ + 1 = 4
PAIR_BOUND = 2 * (N - 1).bit_length() + 2  # 2⌈log2 6⌉ + 2 = 8

# The knowledge base says "capacity depends" of the first five (score 1.5 each, kept in the order
# changed), so --max-running-requests comes fifth in isolate's probe order: a misleading ranking.
ONE_CULPRIT = [
    ("--chunked-prefill-size", "4096"),
    ("--context-length", "131072"),
    ("--cuda-graph-max-bs", "16"),
    ("--kv-cache-dtype", "fp8_e4m3"),
    ("--max-running-requests", "20"),
    ("--enable-metrics", None),
]
# --enable-metrics and --enable-cache-report interact in seed-gb10-pair; the others are harmless
# there (the allreduce fusion is a no-op on the GB10)
PAIR = [
    ("--watchdog-timeout", "600"),
    ("--enable-metrics", None),
    ("--decode-log-interval", "10"),
    ("--enable-cache-report", None),
    ("--enable-request-time-stats-logging", None),
    ("--enable-flashinfer-allreduce-fusion", None),
]
# unknown capacity for all but the first ("depends") and the last (a no-op on the GB10): the
# fused MoE sum comes fifth in the knowledge base's order
RANKED = [
    ("--context-length", "131072"),
    ("--enable-cache-report", None),
    ("--enable-metrics", None),
    ("--watchdog-timeout", "600"),
    ("--enable-fused-moe-sum-all-reduce", None),
    ("--enable-flashinfer-allreduce-fusion", None),
]
FUSED_MOE = "--enable-fused-moe-sum-all-reduce"


async def run(config: Path, *args: str, timeout: float = 600) -> tuple[int, str, str]:
    """`flagbot --config CONFIG ARGS`; killed (and reaped) if it outlives `timeout`, and then the
    failure says how far the experiment got."""
    process = await start(config, *args)
    try:
        out, err = await communicate(process, timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(
            f"flagbot {' '.join(args)} still ran after {timeout} s:\n{progress(config)}"
        ) from None
    return process.returncode or 0, out.decode(), err.decode()


def progress(config: Path) -> str:
    """The newest experiment's steps and last evidence, for a failure message."""
    from bot.store.experiments import list_experiments, list_steps

    store = store_of(config)
    try:
        latest = next(iter(list_experiments(store, "twin", limit=1)), None)
        if latest is None or latest.id is None:
            return "no experiment"
        steps = [f"{s.name}: {s.status}" for s in list_steps(store, latest.id)]
        blocks = [str(row.data)[:300] for row in evidence_of(store, latest.id)][-6:]
        return "\n".join([f"#{latest.id} {latest.playbook} {latest.status}", *steps, *blocks])
    finally:
        store.close()


async def run_json(config: Path, *args: str) -> tuple[int, Any, str]:
    code, out, err = await run(config, *args, "--json")
    assert "Traceback" not in err, err
    assert out.strip(), f"no output; stderr: {err}"
    return code, json.loads(out), err


async def pinned_config(bed: Testbed, tmp_path: Path) -> Path:
    """A fresh database with the running start (vendor flags, effective 48) pinned as baseline."""
    config = write_config(bed, tmp_path)
    code, out, err = await run(config, "db", "upgrade")
    assert code == 0, (out, err)
    code, pinned, err = await run_json(config, "baseline", "pin")
    assert code == 0 and pinned["verdict"] == "pinned", (pinned, err)
    assert "max_running_requests 48" in pinned["summary"], pinned["summary"]
    return config


def starts_since(bed: Testbed, since: float) -> list[dict[str, Any]]:
    """Node 0's twin starts since `since` (unix time), oldest first, from its ground truth."""
    return [r for r in truth_records(bed, 0) if r.get("kind") == "start" and r["t"] >= since]


def changed_in(record: dict[str, Any], flags: list[tuple[str, str | None]]) -> set[str]:
    """Which of the six changed flags a twin start really had on its command line."""
    names = {flag for flag, _ in flags}
    return {word for word in record["argv"] if word in names}


async def apply_six(bed: Testbed, config: Path, flags: list[tuple[str, str | None]]) -> float:
    """The vendor flags plus `flags` on both nodes, restarted together and ready, through the
    test's store (so flagbot's ledger knows the unit as left); returns the moment before."""
    since = time.time()
    astore = AsyncStore(store_of(config))
    try:
        async with TargetSession.open("twin", target_of(bed), store=astore) as ts:
            view = await read_unit(ts.node0)
            assert not any(item.flag in dict(flags) for item in view.flags.items), view.flags
            wanted = FlagSet((*view.flags.items, *(FlagItem(flag, value) for flag, value in flags)))
            report = await apply_and_restart(
                ts, flags_for_nodes(wanted, len(ts.nodes)), None, force=True, reason="test: six flags"
            )
            previous = {node.node: node.old_invocation for node in report.nodes}
            ready = await wait_ready(ts.nodes, base_url=ts.target.http_base(), timeout=120, previous=previous)
            assert ready.ready, ready.to_json()
    finally:
        await astore.aclose()
    return since


async def effective_now(bed: Testbed, since: float) -> int:
    """Effective max_running_requests of node 0's newest start since `since` (ground truth)."""
    starts = await wait_for(lambda: starts_since(bed, since), timeout=10, what="the twin's start record")
    return int(starts[-1]["effective"]["max_running_requests"])


def isolate_outcome(config: Path, experiment_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the isolate state of the experiment, its evidence blocks)."""
    store = store_of(config)
    try:
        experiment = get_experiment(store, experiment_id)
        assert experiment is not None
        found = RunState.load(experiment.state).isolate
        assert found is not None
        return found.model_dump(mode="json"), [row.data for row in evidence_of(store, experiment_id)]
    finally:
        store.close()


def probe_order(evidence: list[dict[str, Any]]) -> list[str]:
    line = next(str(b.get("text")) for b in evidence if str(b.get("text", "")).startswith("probe order"))
    return line.split(": ", 1)[1].split(", ")


def learned(config: Path, kind: str) -> set[str]:
    store = store_of(config)
    try:
        return {row.flag for row in list_observations(store) if row.kind == kind}
    finally:
        store.close()


async def isolate_and_check(
    bed: Testbed,
    config: Path,
    flags: list[tuple[str, str | None]],
    culprits: set[str],
    *words: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `flagbot isolate EXPECT WORDS`; check the culprits, every probe against the twin's
    truth (one new start per probe, with exactly the probe's flags, failing exactly when it holds
    the culprits) and the settle restart. Returns (isolate state, evidence)."""
    since = time.time()
    code, outcome, err = await run_json(config, "isolate", EXPECT, *words)
    assert code == 0 and outcome["verdict"] == "found", (outcome, err)
    found, evidence = isolate_outcome(config, outcome["experiment_id"])
    assert set(found["culprits"]) == culprits, found
    probes = found["probes"]
    assert f"after {len(probes)} probe restart(s)" in outcome["summary"], outcome["summary"]
    assert f"culprit(s): {', '.join(found['culprits'])}" in outcome["summary"]
    blocks = [b for b in evidence if str(b.get("title", "")).startswith("Isolate probe")]
    assert len(blocks) == len(probes)
    settles = 1 if "restart to settle" in outcome["summary"] else 0
    starts = await wait_for(
        lambda: (s := starts_since(bed, since)) and len(s) >= len(probes) + settles and s,
        timeout=10,
        what="the twin's start records of the probes",
    )
    assert len(starts) == len(probes) + settles, [changed_in(s, flags) for s in starts]
    for probe, block, begun in zip(probes, blocks, starts[: len(probes)], strict=True):
        applied = set(probe["applied"])
        assert changed_in(begun, flags) == applied, (probe, begun["argv"])
        holds_culprits = culprits <= applied
        assert probe["passed"] is not holds_culprits, probe
        held = begun["effective"]["max_running_requests"] >= 48  # what the twin really started with
        assert held is not holds_culprits, (probe, begun["effective"])
        assert ("FAILS" if holds_culprits else "passes") in block["text"], block
    return found, evidence


@pytest.mark.usefixtures("on_baseline")
async def test_one_culprit_among_six_within_the_bound(testbed: Testbed, tmp_path: Path) -> None:
    culprit = "--max-running-requests"
    config = await pinned_config(testbed, tmp_path)
    since = await apply_six(testbed, config, ONE_CULPRIT)
    assert await effective_now(testbed, since) == 20  # the current configuration fails

    found, evidence = await isolate_and_check(testbed, config, ONE_CULPRIT, {culprit})
    assert 1 <= found["probe_count"] <= ONE_BOUND, found
    assert probe_order(evidence).index(culprit) > 0  # the knowledge base did not point at it
    # left on the reference + the five harmless flags, which hold 48 again
    final = starts_since(testbed, since)[-1]
    assert changed_in(final, ONE_CULPRIT) == {flag for flag, _ in ONE_CULPRIT} - {culprit}
    assert final["effective"]["max_running_requests"] == 48
    assert culprit in learned(config, "culprit")
    assert culprit not in learned(config, "not-culprit")


async def test_a_culprit_pair_among_six_both_named(testbed: Testbed, tmp_path: Path) -> None:
    pair = {"--enable-metrics", "--enable-cache-report"}
    async with twin_scenario(testbed, "seed-gb10-pair"):
        config = await pinned_config(testbed, tmp_path)
        since = await apply_six(testbed, config, PAIR)
        assert await effective_now(testbed, since) == 26

        found, _ = await isolate_and_check(testbed, config, PAIR, pair)
        assert found["probe_count"] <= PAIR_BOUND, found
        # neither alone fails: some probe held each one without the other and passed
        for flag in pair:
            alone = [p for p in found["probes"] if flag in p["applied"] and not pair <= set(p["applied"])]
            assert alone and all(p["passed"] for p in alone), (flag, found["probes"])
        starts = starts_since(testbed, since)
        assert {s["scenario"] for s in starts} == {"seed-gb10-pair"}
        assert starts[-1]["effective"]["max_running_requests"] == 48
        assert learned(config, "culprit") == pair
    assert {running_scenario(testbed, k) for k in range(len(testbed.addresses))} == {"seed-gb10"}


@pytest.mark.usefixtures("on_baseline")
async def test_a_correct_ranking_saves_probes(testbed: Testbed, tmp_path: Path) -> None:
    config = await pinned_config(testbed, tmp_path)
    since = await apply_six(testbed, config, RANKED)
    assert await effective_now(testbed, since) == 26

    # without knowledge of the fused MoE sum, it is not the top suspect; end=current puts the
    # six flags back for the second run
    first, evidence = await isolate_and_check(testbed, config, RANKED, {FUSED_MOE}, "end=current")
    assert probe_order(evidence)[0] != FUSED_MOE
    assert first["probe_count"] <= ONE_BOUND, first
    assert FUSED_MOE in learned(config, "culprit")
    final = starts_since(testbed, since)[-1]
    assert changed_in(final, RANKED) == {flag for flag, _ in RANKED}

    # the same case again: what isolate learned makes the ranking right
    second, evidence = await isolate_and_check(testbed, config, RANKED, {FUSED_MOE})
    assert probe_order(evidence)[0] == FUSED_MOE
    assert second["probe_count"] < first["probe_count"], (first, second)

    # and fewer than the search without any ranking, in the order the flags were changed
    async def truth(subset: frozenset[str]) -> bool:
        return FUSED_MOE not in subset

    unranked = await isolate([flag for flag, _ in RANKED], truth)
    assert unranked.culprits == (FUSED_MOE,)
    assert second["probe_count"] < len(unranked.probes), (second, unranked.to_json())
