"""The drift watch's restart, capacity and throughput findings: the real watch (`watch_drift`), its
real store (SQLite: known-good start, pinned baseline, measurement sets, drift state and events),
with the target layer replaced (what `systemctl show` and an observation of node 0 say), as the
drift watch's unit tests. Each finding: posted once per change of state, stored every watch, with
its evidence; the testbed test restarts a real unit (tests/integration/schedule)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.app.drift import watch_drift
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.store import AsyncStore
from bot.store.baselines import pin_baseline
from bot.store.drift import drift_events, get_drift
from bot.target.evidence import MetricComparison, TextBlock
from bot.target.known_good import set_known_good
from bot.target.nodestate import NodeState
from tests.support.schedule import Clock, DiesBeforePosting, settings
from tests.unit.schedule.seeds import bench_set, snapshot


@dataclass
class Lab:
    """What the target layer reports of `lab`: node 0's invocation and the effective values."""

    invocation: str | None = "inv-1"
    effective: dict[str, Any] = field(default_factory=lambda: {"max_running_requests": 48})
    looks: int = 0


@dataclass
class FakeSession:
    """A session with no node to read a unit from (hand edits are the testbed test's)."""

    name: str = "lab"
    unit: str = "sglang.service"
    nodes: list[Any] = field(default_factory=list)
    node0: Any = None
    ledger: Any = None


@dataclass
class FakeObservation:
    effective: dict[str, Any]


@pytest.fixture
def lab(monkeypatch: pytest.MonkeyPatch) -> Lab:
    seen = Lab()

    async def node_state(node: Any, *, timeout: float | None = None) -> NodeState:
        seen.looks += 1
        return NodeState("active", "running", "success", seen.invocation, 0, None, None)

    async def observe(ts: Any, **options: Any) -> FakeObservation:
        assert options.get("promote") is False and options.get("store") is False  # the watch moves nothing
        return FakeObservation(dict(seen.effective))

    monkeypatch.setattr("bot.app.drift.node_state", node_state)
    monkeypatch.setattr("bot.app.drift.observe", observe)
    return seen


@pytest.fixture
def runtime(astore: AsyncStore, tmp_path: Path) -> ScheduleRuntime:
    @asynccontextmanager
    async def session(target: str) -> AsyncIterator[Any]:
        yield FakeSession(name=target)

    return ScheduleRuntime(
        _settings(tmp_path),
        astore,
        MemoryNotifier(),
        clock=Clock(),
        session_factory=session,
    )


def _settings(tmp_path: Path) -> Any:
    """`lab`, with drift told to the investigation channel."""
    config = settings(tmp_path)
    return config.model_copy(
        update={"slack": config.slack.model_copy(update={"investigation_channel": "C0INV"})}
    )


def notices(rt: ScheduleRuntime) -> list[Any]:
    return rt.notifier.notices  # type: ignore[attr-defined,no-any-return]


async def watch(rt: ScheduleRuntime, minutes: float = 30) -> Any:
    rt.clock.advance(minutes=minutes)  # type: ignore[attr-defined]
    outcome = await watch_drift(rt, "lab")
    assert outcome.skipped is None
    state = await rt.store.run(get_drift, rt.store.store, "lab")
    assert state is not None and state.checked_at == rt.clock()  # stored every watch
    assert [f["key"] for f in state.findings] == [f["key"] for f in outcome.findings]
    return outcome


def good_start(rt: ScheduleRuntime, invocation: str = "inv-1") -> int:
    """A start of `lab` with 48 slots, recorded as known-good (what `flagbot observe` leaves)."""
    good = snapshot(rt.store.store, invocation, 48)
    set_known_good(rt.store.store, "lab", good)
    return good


async def test_a_restart_outside_flagbot_is_posted_once_and_observe_acknowledges_it(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    good_start(runtime)
    assert (await watch(runtime)).findings == [] and notices(runtime) == []

    lab.invocation = "inv-2"  # `systemctl restart` by someone else
    seen = await watch(runtime)
    assert [f["key"] for f in seen.findings] == ["restart"]
    assert len(notices(runtime)) == 1
    notice = notices(runtime)[0]
    assert notice.channel == "C0INV" and notice.thread_ts is None
    assert "restarted outside flagbot" in notice.text and "inv-2" in notice.text and "inv-1" in notice.text
    evidence = notice.blocks[0]
    assert isinstance(evidence, TextBlock) and "inv-1 (recorded) -> inv-2 (running)" in evidence.text

    again = await watch(runtime)
    assert again.findings == seen.findings and again.change is not None and not again.change.changed
    assert len(notices(runtime)) == 1  # the same restart, seen again: stored, not posted

    good_start(runtime, "inv-2")  # what `flagbot observe` records
    back = await watch(runtime)
    assert back.findings == [] and len(notices(runtime)) == 2
    assert "resolved" in notices(runtime)[1].text and "restart" in notices(runtime)[1].text
    events = await runtime.store.run(drift_events, runtime.store.store, "lab")
    assert [(e.state, e.resolved) for e in events] == [("ok", ["restart"]), ("drift", [])]
    assert events[1].posted_ts == "memory-1" and events[0].posted_ts == "memory-2"


async def test_capacity_away_from_the_pinned_baseline_is_posted_once_with_both_values(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    good_start(runtime)
    store = runtime.store.store
    pinned = snapshot(store, "inv-0", 64)  # the baseline was pinned on a start with 64 slots
    pin_baseline(store, target="lab", snapshot_id=pinned, pinned_by="cli:test")

    first = await watch(runtime)
    assert [f["key"] for f in first.findings] == ["capacity"]
    assert len(notices(runtime)) == 1
    notice = notices(runtime)[0]
    assert f"moved from snapshot #{pinned}" in notice.text and "max_running_requests 64 -> 48" in notice.text
    table = notice.blocks[0]
    assert isinstance(table, MetricComparison)
    row = next(r for r in table.rows if r.metric == "max_running_requests")
    assert (row.before, row.after, row.verdict) == ("64", "48", "regressed")

    for _ in range(2):
        assert [f["key"] for f in (await watch(runtime)).findings] == ["capacity"]
    assert len(notices(runtime)) == 1

    lab.effective = {"max_running_requests": 64}  # back where the baseline was
    assert (await watch(runtime)).findings == []
    assert len(notices(runtime)) == 2 and "resolved" in notices(runtime)[1].text


async def test_capacity_within_tolerance_and_no_reference_are_not_drift(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    assert (await watch(runtime)).findings == []  # no baseline, no known-good start: nothing to compare
    store = runtime.store.store
    pin_baseline(store, target="lab", snapshot_id=snapshot(store, "inv-1", 48), pinned_by="cli:test")
    assert (await watch(runtime)).findings == [] and notices(runtime) == []


async def test_throughput_regressed_against_the_baseline_is_posted_once_and_noise_is_not(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    store = runtime.store.store
    base = snapshot(store, "inv-0", 48)
    base_set = bench_set(store, base, 1.0, "baseline")
    pin_baseline(store, target="lab", snapshot_id=base, set_id=base_set, pinned_by="cli:test")
    running = good_start(runtime)

    bench_set(store, running, 1.004, "check #1")  # within the noise
    assert (await watch(runtime)).findings == [] and notices(runtime) == []

    slow = bench_set(store, running, 0.80, "flagbot bench")  # the newest set of the running start
    seen = await watch(runtime)
    assert [f["key"] for f in seen.findings] == ["throughput"]
    assert len(notices(runtime)) == 1
    notice = notices(runtime)[0]
    assert f"set #{slow} of the running start regressed against the baseline's set #{base_set}" in notice.text
    evidence = notice.blocks[0]
    assert isinstance(evidence, TextBlock) and "regressed" in evidence.text

    await watch(runtime, minutes=60)
    assert len(notices(runtime)) == 1  # stored again, not posted again

    other = snapshot(store, "inv-9", 48)  # a set of another start says nothing about the running one
    bench_set(store, other, 0.5, "elsewhere")
    assert [f["key"] for f in (await watch(runtime)).findings] == ["throughput"]

    bench_set(store, running, 0.998, "check #2")  # a newer set of the running start, back within noise
    assert (await watch(runtime)).findings == []
    assert len(notices(runtime)) == 2 and "resolved" in notices(runtime)[1].text
    events = await runtime.store.run(drift_events, store, "lab")
    assert len(events) == 2


async def test_several_findings_move_independently(runtime: ScheduleRuntime, lab: Lab) -> None:
    good_start(runtime)
    lab.invocation, lab.effective = "inv-2", {"max_running_requests": 26}
    first = await watch(runtime)
    assert sorted(f["key"] for f in first.findings) == ["capacity", "restart"]
    assert len(notices(runtime)) == 1 and len(notices(runtime)[0].blocks) == 2

    lab.effective = {"max_running_requests": 48}  # the capacity came back, the restart is still there
    later = await watch(runtime, minutes=60)
    assert [f["key"] for f in later.findings] == ["restart"]
    assert len(notices(runtime)) == 2
    assert "no longer seen: capacity" in notices(runtime)[1].text
    assert "resolved" not in notices(runtime)[1].text  # the target still drifts


async def test_a_target_first_watched_while_stopped_takes_its_next_invocation_as_the_reference(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    """No known-good start: the first invocation the watch sees is the reference, also when the
    first watch found the unit stopped (no invocation at all)."""
    lab.invocation = None
    assert (await watch(runtime)).findings == []
    lab.invocation = "inv-1"  # started: the first invocation seen
    assert (await watch(runtime)).findings == []
    state = await runtime.store.run(get_drift, runtime.store.store, "lab")
    assert state is not None and state.reference["invocation"] == "inv-1"
    lab.invocation = "inv-2"  # restarted outside flagbot
    assert [f["key"] for f in (await watch(runtime)).findings] == ["restart"]
    assert len(notices(runtime)) == 1


def replica(rt: ScheduleRuntime, name: str, notifier: MemoryNotifier) -> ScheduleRuntime:
    """Another replica on the same store and clock (what the next leader is)."""
    return ScheduleRuntime(
        rt.settings, rt.store, notifier, clock=rt.clock, session_factory=rt.session_factory, replica=name
    )


async def died_before_posting(runtime: ScheduleRuntime, lab: Lab) -> None:
    """Replica `a` watches `lab` (nothing to tell), then sees a restart outside flagbot, records
    it and dies before posting it."""
    good_start(runtime)
    dying = replica(runtime, "a", DiesBeforePosting())
    await watch(dying)
    lab.invocation = "inv-2"
    with pytest.raises(RuntimeError, match="died here"):
        await watch(dying)


async def test_an_event_recorded_by_a_replica_that_died_before_posting_is_posted_once_by_the_next(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    await died_before_posting(runtime, lab)
    [event] = await runtime.store.run(drift_events, runtime.store.store, "lab")
    assert event.state == "drift" and event.posted_ts is None  # recorded, nobody told

    survivor = replica(runtime, "b", MemoryNotifier())
    seen = await watch(survivor)  # 30 minutes later: no change of state, but an event is owed
    assert seen.change is not None and not seen.change.changed and seen.posted == "memory-1"
    [told] = notices(survivor)
    assert "drift on lab (seen at" in told.text and "posted late" in told.text
    assert "restarted outside flagbot" in told.text and told.channel == "C0INV"
    [event] = await runtime.store.run(drift_events, runtime.store.store, "lab")
    assert event.posted_ts == "memory-1"

    await watch(survivor)
    assert len(notices(survivor)) == 1  # owed once, posted once


async def test_an_event_just_recorded_is_left_to_the_watch_still_posting_it(
    runtime: ScheduleRuntime, lab: Lab
) -> None:
    """A handover runs two watches at once: the one that recorded the event may still be posting it."""
    await died_before_posting(runtime, lab)
    survivor = replica(runtime, "b", MemoryNotifier())
    await watch(survivor, minutes=1)  # within the grace: not owed yet
    assert notices(survivor) == []
    await watch(survivor, minutes=5)
    assert len(notices(survivor)) == 1


async def test_an_unposted_event_older_than_a_day_stays_history(runtime: ScheduleRuntime, lab: Lab) -> None:
    await died_before_posting(runtime, lab)
    survivor = replica(runtime, "b", MemoryNotifier())
    await watch(survivor, minutes=25 * 60)
    assert notices(survivor) == []
