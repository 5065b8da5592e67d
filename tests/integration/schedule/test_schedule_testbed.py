"""The scheduler's jobs against the two-node testbed: a hand edit of a unit is reported by the
drift watch once (and its undoing once more), and a verification check looks at the running
start and benchmarks it under the target's lease (the small `probe` profile)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.app.checks import run_check
from bot.app.drift import watch_drift
from bot.app.notify import MemoryNotifier
from bot.app.runtime import ScheduleRuntime
from bot.config import Settings, load_settings
from bot.store import AsyncStore, Store
from bot.store.checks import add_check, check_runs
from bot.store.drift import drift_events
from bot.store.leases import current
from bot.store.models import utcnow
from bot.target.evidence import JournalExcerpt
from bot.target.observe import observe
from bot.target.session import TargetSession
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import write_config
from tests.integration.target.support_control import on_baseline  # noqa: F401  (fixture)

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest_asyncio.fixture(loop_scope="session")
async def runtime(testbed: Testbed, tmp_path: Path) -> AsyncIterator[ScheduleRuntime]:
    config: Settings = load_settings(write_config(testbed, tmp_path), required=True)
    sync = Store.open(f"sqlite:///{tmp_path / 'flagbot.db'}")
    sync.upgrade()
    astore = AsyncStore(sync)
    try:
        yield ScheduleRuntime(config, astore, MemoryNotifier(), lease_ttl_s=5.0, lease_wait_s=0.0)
    finally:
        await astore.aclose()


@pytest.mark.usefixtures("on_baseline")
async def test_a_hand_edit_is_reported_once(testbed: Testbed, runtime: ScheduleRuntime) -> None:
    notices = runtime.notifier.notices  # type: ignore[attr-defined]
    vendor = testbed.layout.root(1) / "etc/systemd/system/sglang-qwen.service"
    original = vendor.read_text()
    first = await watch_drift(runtime, "twin")
    assert first.skipped is None and first.findings == [] and notices == []
    vendor.write_text(original.replace("RestartSec=2", "RestartSec=7"))  # an operator's `vi`
    try:
        async with TargetSession.open("twin", runtime.settings.targets["twin"]) as ts:
            await ts.nodes[1].run("daemon-reload")
            node = ts.nodes[1].name
        seen = await watch_drift(runtime, "twin")
        assert [f["key"] for f in seen.findings] == [f"hand-edit:{node}"]
        again = await watch_drift(runtime, "twin")
        assert again.findings == seen.findings and again.change is not None and not again.change.changed
        assert len(notices) == 1 and "changed outside flagbot" in notices[0].text
        excerpt = notices[0].blocks[0]
        assert isinstance(excerpt, JournalExcerpt) and "+RestartSec=7" in excerpt.lines
    finally:
        vendor.write_text(original)
        async with TargetSession.open("twin", runtime.settings.targets["twin"]) as ts:
            await ts.nodes[1].run("daemon-reload")
    back = await watch_drift(runtime, "twin")
    assert back.findings == [] and len(notices) == 2 and "resolved" in notices[1].text
    events = await runtime.store.run(drift_events, runtime.store.store, "twin")
    assert [len(e.findings) for e in events] == [0, 1] and events[0].resolved == [f"hand-edit:{node}"]


async def test_a_check_observes_and_benchmarks_under_the_lease(runtime: ScheduleRuntime) -> None:
    async with TargetSession.open("twin", runtime.settings.targets["twin"], store=runtime.store) as ts:
        obs = await observe(ts, cache_dir=runtime.cache())
    expected = {
        "flags": obs.requested,
        "max_running_requests": obs.effective["max_running_requests"],
        "summary": "the running start",
    }
    from datetime import timedelta

    check = await runtime.store.run(
        add_check,
        runtime.store.store,
        target="twin",
        experiment_id=None,
        after=timedelta(0),
        due_at=utcnow(),
        expected=expected,
        created_by="test",
        profile="probe",
    )
    outcome = await run_check(runtime, check.id or 0)
    assert outcome is not None
    run = outcome.recorded.run
    assert run.result == "pass", run.summary
    assert run.set_id is not None and run.snapshot_id not in (None, obs.snapshot_id)
    assert run.detail["effective"]["max_running_requests"] == obs.effective["max_running_requests"]
    assert runtime.notifier.notices == []  # type: ignore[attr-defined]  (pass, as concluded: not posted)
    assert await runtime.store.run(current, runtime.store.store, "twin") is None  # the lease is given back
    assert [r.result for r in await runtime.store.run(check_runs, runtime.store.store, check.id or 0)] == [
        "pass"
    ]
