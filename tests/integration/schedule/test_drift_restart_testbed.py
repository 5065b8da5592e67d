"""A restart outside flagbot on the two-node testbed: an operator runs `systemctl restart` on the
nodes as root (not through flagbot's sudo grant, which has no restart); the drift watch reports node 0's new
InvocationID once, keeps storing it, and `observe` (recording the new start as known-good)
acknowledges it, which the next watch posts as resolved."""

from __future__ import annotations

import asyncio

import pytest

from bot.app.drift import watch_drift
from bot.app.runtime import ScheduleRuntime
from bot.store.drift import drift_events, get_drift
from bot.target.evidence import TextBlock
from bot.target.known_good import known_good
from bot.target.nodestate import node_state
from bot.target.observe import observe
from bot.target.session import TargetSession
from flagbot_lab.testbed import UNIT, Testbed
from tests.integration.schedule.test_schedule_testbed import runtime  # noqa: F401  (fixture)

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def invocation0(rt: ScheduleRuntime) -> str | None:
    async with TargetSession.open("twin", rt.settings.targets["twin"]) as ts:
        return (await node_state(ts.node0)).invocation


async def test_a_restart_outside_flagbot_is_reported_once_until_observed(
    testbed: Testbed,
    runtime: ScheduleRuntime,  # noqa: F811
) -> None:
    notices = runtime.notifier.notices  # type: ignore[attr-defined]
    first = await watch_drift(runtime, "twin")
    assert first.skipped is None and first.findings == [] and notices == []
    before = await invocation0(runtime)
    state = await runtime.store.run(get_drift, runtime.store.store, "twin")
    assert (
        state is not None and state.reference["invocation"] == before
    )  # no known-good start: the first seen

    try:
        restarted = await asyncio.gather(
            *(testbed.run_as_root_async(k, ["systemctl", "restart", UNIT], timeout=60) for k in (1, 0))
        )
        assert [r.returncode for r in restarted] == [0, 0], [r.stderr for r in restarted]
    finally:
        await testbed.wait_healthy_async(timeout=180)  # the nodes are left serving, on their own flags
    after = await invocation0(runtime)
    assert after is not None and after != before

    seen = await watch_drift(runtime, "twin")
    assert [f["key"] for f in seen.findings] == ["restart"]
    assert len(notices) == 1 and "restarted outside flagbot" in notices[0].text
    evidence = notices[0].blocks[0]
    assert isinstance(evidence, TextBlock) and f"{before} (recorded) -> {after} (running)" in evidence.text
    again = await watch_drift(runtime, "twin")
    assert again.findings == seen.findings and len(notices) == 1  # stored again, not posted again
    stored = await runtime.store.run(get_drift, runtime.store.store, "twin")
    assert stored is not None and stored.state == "drift" and stored.checked_at >= seen.change.event.at  # type: ignore[union-attr]

    async with TargetSession.open("twin", runtime.settings.targets["twin"], store=runtime.store) as ts:
        obs = await observe(ts, cache_dir=runtime.cache())  # what `flagbot observe` does
    good = await runtime.store.run(known_good, runtime.store.store, "twin")
    assert obs.healthy and good is not None and good.invocation_id == after
    back = await watch_drift(runtime, "twin")
    assert back.findings == [] and len(notices) == 2 and "resolved" in notices[1].text
    events = await runtime.store.run(drift_events, runtime.store.store, "twin")
    assert [e.resolved for e in events] == [["restart"], []]
