"""A check whose benchmark regressed against what the experiment concluded: the real check run
(`run_check`: the store's concluded set, the check's set, `bot.bench.verdict`, the recorded run
and the state per experiment), with the target's look replaced by a probe that "benchmarked" a
seeded measurement set. Posted once on pass -> fail, never on fail -> fail, once on fail -> pass."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from bot.app.checks import Probe, post_owed_check_runs, run_check
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.store import AsyncStore, Measurement, Store
from bot.store.bench_repo import save_set
from bot.store.checks import add_check, check_runs
from bot.store.experiments import create_experiment
from bot.store.models import MeasurementSet
from bot.store.schedule_models import VerificationCheck
from bot.target.evidence import MetricComparison
from tests.support.schedule import T0, Clock, DiesBeforePosting, settings
from tests.unit.schedule.seeds import FLAGS, bench_set, snapshot


@dataclass
class Benchmarked:
    """The running start as concluded (flags, capacity), its benchmark the next seeded set."""

    snapshot_id: int
    sets: list[int]

    async def __call__(self, rt: ScheduleRuntime, check: VerificationCheck) -> Probe:
        return Probe(
            healthy=True,
            health=200,
            invocation="inv-1",
            flags=[dict(item) for item in FLAGS],
            effective={"max_running_requests": 48},
            snapshot_id=self.snapshot_id,
            set_id=self.sets.pop(0),
        )


def checks_of_one_experiment(store: Store, concluded_set: int, snapshot_id: int) -> list[VerificationCheck]:
    experiment = create_experiment(store, target="lab", playbook="try", params={}, actor="cli:test")
    expected = {
        "snapshot_id": snapshot_id,
        "flags": FLAGS,
        "max_running_requests": 48,
        "set_id": concluded_set,
        "profile": "quick",
        "verdict": "improved",
        "summary": "kept --tp-size 2",
    }
    return [
        add_check(
            store,
            target="lab",
            experiment_id=experiment.id,
            after=after,
            due_at=T0 + after,
            expected=expected,
            created_by="cli:test",
            channel="C1",
            thread_ts="1700000000.000100",
        )
        for after in (timedelta(minutes=10), timedelta(hours=24), timedelta(hours=48))
    ]


async def test_a_regressed_benchmark_fails_the_check_and_only_state_changes_are_posted(
    astore: AsyncStore, tmp_path: Path
) -> None:
    store = astore.store
    snap = snapshot(store)
    concluded = bench_set(store, snap, 1.0, "try: kept")
    slow, slower, back = (bench_set(store, snap, s, "check") for s in (0.80, 0.78, 1.003))
    ten, day, two_days = checks_of_one_experiment(store, concluded, snap)
    notifier = MemoryNotifier()
    rt = ScheduleRuntime(
        settings(tmp_path, targets=False),
        astore,
        notifier,
        clock=Clock(T0 + timedelta(minutes=10)),
        probe=Benchmarked(snap, [slow, slower, back]),
    )

    first = await run_check(rt, ten.id or 0)
    assert first is not None
    run = first.recorded.run
    assert (run.result, run.previous_state, run.set_id) == ("fail", "pass", slow)
    assert run.summary.startswith("throughput or latency regressed beyond the noise")
    benchmark_row = next(r for r in run.detail["rows"] if r["metric"] == "benchmark vs the concluded one")
    assert (benchmark_row["after"], benchmark_row["verdict"]) == ("regressed", "fail")
    assert len(notifier.notices) == 1 and first.posted == "memory-1"
    notice = notifier.notices[0]
    assert (notice.channel, notice.thread_ts) == ("C1", "1700000000.000100")
    assert notice.text.startswith(f"check #{ten.id} of experiment #{ten.experiment_id} on lab: pass -> fail:")
    table = notice.blocks[1]
    assert isinstance(table, MetricComparison)
    assert [r.verdict for r in table.rows] == ["pass", "pass", "pass", "fail"]  # health, flags, slots, bench

    second = await run_check(rt, day.id or 0)
    assert second is not None and second.recorded.run.result == "fail"
    assert second.recorded.previous == "fail" and not second.recorded.changed
    assert second.posted is None and len(notifier.notices) == 1  # fail -> fail: recorded, not posted

    third = await run_check(rt, two_days.id or 0)
    assert third is not None and third.recorded.run.result == "pass"
    assert len(notifier.notices) == 2 and third.posted == "memory-2"
    assert "fail -> pass: what the experiment concluded still holds" in notifier.notices[1].text

    runs = [(await astore.run(check_runs, store, c.id or 0))[0] for c in (ten, day, two_days)]
    assert [(r.result, r.posted_ts) for r in runs] == [
        ("fail", "memory-1"),
        ("fail", None),
        ("pass", "memory-2"),
    ]


async def test_a_benchmark_of_another_profile_is_not_compared(astore: AsyncStore, tmp_path: Path) -> None:
    """Sets of different profiles measure different things: no verdict, so no benchmark fail."""
    store = astore.store
    snap = snapshot(store)
    concluded = bench_set(store, snap, 1.0, "try: kept")
    other = save_set(
        store,
        MeasurementSet(target="lab", profile="probe", label="check", snapshot_id=snap),
        [Measurement(target="lab", concurrency=1, repeat=0, metrics={"output_throughput": 1.0})],
    ).set.id
    assert other is not None
    (check, *_) = checks_of_one_experiment(store, concluded, snap)
    rt = ScheduleRuntime(
        settings(tmp_path, targets=False), astore, MemoryNotifier(), probe=Benchmarked(snap, [other])
    )
    outcome = await run_check(rt, check.id or 0)
    assert outcome is not None and outcome.recorded.run.result == "pass"
    # not compared is said, never assumed: the row and the summary name it "not measured"
    [row] = [
        r for r in outcome.recorded.run.detail["rows"] if r["metric"] == "benchmark vs the concluded one"
    ]
    assert row["verdict"] == "not measured"
    assert "not measured: throughput (no measurement set of the same profile" in outcome.recorded.run.summary


async def test_a_check_result_recorded_by_a_replica_that_died_before_posting_is_posted_late_once(
    astore: AsyncStore, tmp_path: Path
) -> None:
    store = astore.store
    snap = snapshot(store)
    concluded = bench_set(store, snap, 1.0, "try: kept")
    slow = bench_set(store, snap, 0.80, "check")
    ten, _, _ = checks_of_one_experiment(store, concluded, snap)
    clock = Clock(T0 + timedelta(minutes=10))
    dying = ScheduleRuntime(
        settings(tmp_path, targets=False),
        astore,
        DiesBeforePosting(),
        clock=clock,
        probe=Benchmarked(snap, [slow]),
        replica="a",
    )
    with pytest.raises(RuntimeError, match="died here"):
        await run_check(dying, ten.id or 0)
    [run] = await astore.run(check_runs, store, ten.id or 0)
    assert (run.result, run.previous_state, run.posted_ts) == ("fail", "pass", None)  # recorded, untold

    notifier = MemoryNotifier()
    leader = ScheduleRuntime(settings(tmp_path, targets=False), astore, notifier, clock=clock, replica="b")
    assert await post_owed_check_runs(leader) == []  # within the grace: "a" may still be posting it
    clock.advance(minutes=5)
    assert await post_owed_check_runs(leader) == [run.id]
    [told] = notifier.notices
    assert (told.channel, told.thread_ts) == ("C1", "1700000000.000100")  # the experiment's thread
    assert told.text.startswith(f"check #{ten.id} of experiment #{ten.experiment_id} on lab (seen at ")
    assert "posted late" in told.text and "pass -> fail: throughput or latency regressed" in told.text
    table = told.blocks[1]
    assert isinstance(table, MetricComparison) and [r.verdict for r in table.rows] == [
        "pass",
        "pass",
        "pass",
        "fail",
    ]
    assert await post_owed_check_runs(leader) == [] and len(notifier.notices) == 1  # once
    [run] = await astore.run(check_runs, store, ten.id or 0)
    assert run.posted_ts == "memory-1"
    clock.advance(days=2)
    assert await post_owed_check_runs(leader) == []
