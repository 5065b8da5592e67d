"""isolate's premises and learning through the built-in playbook on the fake target layer (issue
18 items 2 and 3): a configuration that does not fail stops before any restart, says so with the
measured value and leaves the knowledge base unchanged; a real culprit is learned citing the
probe that measured it; after a regressed try the try's stored after-start is the free evidence."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.loop.engine import Engine
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RunState
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore, Store
from bot.store.baselines import pin_baseline
from bot.store.experiments import get_experiment
from bot.store.observations import list_observations
from bot.store.snapshots import get_snapshot
from tests.support.loop_fake_target import START_FLAGS, TARGET, FakeTarget, faked_target, settings

HARMLESS = ("--enable-cudagraph-gc", "--enable-mixed-chunk", "--enable-two-batch-overlap")


def with_flags(*names: str) -> FlagSet:
    return FlagSet((*START_FLAGS.items, *(FlagItem(name, None) for name in names)))


def pinned(fake: FakeTarget, store: Store) -> None:
    """The start on START_FLAGS (effective 48), pinned as the baseline."""
    fake.flags = START_FLAGS
    snapshot_id = fake.observation().snapshot_id
    pin_baseline(store, target=TARGET, snapshot_id=snapshot_id, pinned_by="test")


async def isolate(tmp_path: Path, store: AsyncStore, *expect: str) -> Any:
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    return await engine.run("isolate", {"expect": list(expect)}, target=TARGET, actor="cli:alice")


def state_of(store: Store, experiment_id: int) -> RunState:
    row = get_experiment(store, experiment_id)
    assert row is not None
    return RunState.load(row.state)


async def test_a_configuration_that_does_not_fail_stops_before_any_restart_and_learns_nothing(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as fake:
        pinned(fake, store.store)
        fake.flags = with_flags(*HARMLESS)  # three flags changed, capacity still 48
        before = list_observations(store.store, retracted=True)
        outcome = await isolate(tmp_path, store, "max_running_requests>=48")

    assert (outcome.status, outcome.verdict) == ("succeeded", "not-reproduced")
    assert fake.restarts == []  # not one probe, no settle
    assert "max_running_requests 48, which meets max_running_requests>=48" in outcome.summary
    assert outcome.summary.startswith("not reproduced: the running start (snapshot #")
    assert "after 0 probe restart(s)" in outcome.summary and "no restart" in outcome.summary
    found = state_of(store.store, outcome.experiment_id).isolate
    assert found is not None and found.culprits == [] and found.probes == []
    assert list_observations(store.store, retracted=True) == before == []  # the knowledge base is unchanged


async def test_a_throughput_premise_is_a_benchmark_on_the_running_server_not_a_restart(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as fake:
        pinned(fake, store.store)
        fake.flags = with_flags(*HARMLESS)
        outcome = await isolate(tmp_path, store, "output_throughput>=400")

    assert outcome.verdict == "not-reproduced" and fake.restarts == []
    assert "output_throughput 480, which meets output_throughput>=400" in outcome.summary
    assert ", set #" in outcome.summary  # the benchmark it measured, cited
    assert list_observations(store.store, retracted=True) == []


async def test_a_real_culprit_is_learned_citing_the_probe_that_measured_it(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as fake:
        pinned(fake, store.store)
        fake.flags = with_flags(*HARMLESS, "--enable-metrics")  # effective 26: the running start fails
        outcome = await isolate(tmp_path, store, "max_running_requests>=48")

    assert outcome.verdict == "found", outcome.summary
    found = state_of(store.store, outcome.experiment_id).isolate
    assert found is not None and found.culprits == ["--enable-metrics"]
    assert "does not meet max_running_requests>=48" in found.failing_evidence
    facts = list_observations(store.store)
    culprit = next(f for f in facts if f.kind == "culprit")
    assert culprit.flag == "--enable-metrics" and "measured by probe #" in culprit.text
    probe = next(p for p in found.probes if not p.passed and p.applied == ["--enable-metrics"])
    assert culprit.detail["evidence"]["snapshot_ids"] == [probe.snapshot_id]
    snapshot = get_snapshot(store.store, probe.snapshot_id)
    assert snapshot is not None and snapshot.effective["max_running_requests"] == 26
    for fact in facts:  # every fact cites a stored start that a probe measured
        assert fact.detail["evidence"]["snapshot_ids"], fact.text
        assert all(get_snapshot(store.store, s) is not None for s in fact.detail["evidence"]["snapshot_ids"])


async def test_after_a_regressed_try_the_tries_stored_after_start_is_the_free_evidence(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as fake:
        pinned(fake, store.store)
        engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
        change = {"op": "add", "flag": "--enable-metrics", "value": None}
        tried = await engine.run("try", {"changes": [change]}, target=TARGET, actor="cli:alice")
        assert tried.verdict == "regressed" and fake.flags == START_FLAGS  # reverted by policy
        after_id = state_of(store.store, tried.experiment_id).after.snapshot_id
        restarts = len(fake.restarts)
        outcome = await isolate(tmp_path, store, "max_running_requests>=48")

    assert outcome.verdict == "found" and len(fake.restarts) == restarts  # one change: no probe needed
    found = state_of(store.store, outcome.experiment_id).isolate
    assert found is not None and found.culprits == ["--enable-metrics"]
    assert found.failing_snapshot_id == after_id
    assert f"experiment #{tried.experiment_id}'s after-start (snapshot #{after_id})" in found.failing_evidence
    culprit = next(f for f in list_observations(store.store) if f.kind == "culprit")
    assert culprit.detail["evidence"]["snapshot_ids"] == [after_id]


async def test_a_relative_throughput_premise_is_judged_against_the_references_stored_set(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as fake:
        fake.flags = START_FLAGS
        snapshot_id = fake.observation().snapshot_id
        plan = SimpleNamespace(snapshot_id=snapshot_id, profile_name="quick", label="baseline")
        reference_set = (await fake.run_plan(plan)).set
        pin_baseline(
            store.store, target=TARGET, snapshot_id=snapshot_id, set_id=reference_set.id, pinned_by="t"
        )
        fake.flags = with_flags(*HARMLESS)
        outcome = await isolate(tmp_path, store, "output_throughput>=-5%")

    assert outcome.verdict == "not-reproduced" and fake.restarts == []
    assert "output_throughput 480, which meets output_throughput>=-5%" in outcome.summary
    assert list_observations(store.store, retracted=True) == []


async def test_a_relative_expectation_without_a_reference_value_is_refused_before_any_restart(
    tmp_path: Path, store: AsyncStore
) -> None:
    """No probe could tell pass from fail (a probe that cannot tell is not a failure): refused."""
    with faked_target(store.store) as fake:
        pinned(fake, store.store)  # a baseline without a measurement set
        fake.flags = with_flags(*HARMLESS)
        outcome = await isolate(tmp_path, store, "output_throughput>=-5%")

    assert outcome.status == "failed" and fake.restarts == []
    failed = next(s for s in outcome.steps if s["action"] == "isolate")
    assert "the reference has no stored measurement of output_throughput" in str(failed), failed
    assert list_observations(store.store, retracted=True) == []
