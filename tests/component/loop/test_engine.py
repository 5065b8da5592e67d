"""The engine on a real store (SQLite, and PostgreSQL for the lease and boundary tests).

Test actions (tests/support/loop_actions.py) wait on events the test opens, so every step
boundary is reached when the test says, never after a sleep.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import Settings
from bot.loop.engine import Engine, LeaseHeld
from bot.loop.playbook import Playbook, load_playbook
from bot.loop.report import MemoryReporter
from bot.loop.run_state import RUN_STATE_SCHEMA_VERSION, RunState
from bot.store import AsyncStore, Store
from bot.store.experiments import get_experiment, list_experiments
from bot.store.leases import acquire, current
from bot.store.models import utcnow
from bot.store.records import audit_events, evidence_of
from bot.target.evidence import TextBlock
from tests.support.loop_actions import CRASHY, Probe

REPO = Path(__file__).resolve().parents[3]
TARGET = "t1"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(database={"sqlite_path": tmp_path / "state" / "flagbot.db"})


def book(tmp_path: Path, body: str, name: str = "b") -> Playbook:
    path = tmp_path / "books" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"name: {name}\n" + textwrap.dedent(body), encoding="utf-8")
    return load_playbook(path)


def engine(
    settings: Settings, store: AsyncStore, reporter: MemoryReporter | None = None, **kw: object
) -> Engine:
    return Engine(settings, store, reporter or MemoryReporter(), **kw)  # type: ignore[arg-type]


async def started(probe: Probe, gate: str) -> None:
    await asyncio.wait_for(probe.arrived(gate).wait(), timeout=30)


async def test_each_step_is_recorded_before_the_next_starts(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    playbook = book(
        tmp_path,
        """
        steps:
          - {action: t_note, with: {label: a}}
          - {action: t_steps_so_far}
          - {action: t_note, name: judge, with: {label: b, value: improved}}
        """,
    )
    reporter = MemoryReporter()
    outcome = await engine(settings, store, reporter).run(playbook, {}, target=TARGET, actor="alice")
    assert probe.seen_steps == [[(0, "t_note", "ok"), (1, "t_steps_so_far", "running")]]
    assert (outcome.status, outcome.verdict) == ("succeeded", "improved")
    assert [(s["name"], s["status"]) for s in outcome.steps] == [
        ("t_note", "ok"),
        ("t_steps_so_far", "ok"),
        ("judge", "ok"),
    ]
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None and row.cursor == 3 and row.finished_at
    assert row.state["schema_version"] == RUN_STATE_SCHEMA_VERSION
    assert RunState.load(row.state).custom["notes"] == ["a", "b"]
    actions = [event.action for event in await store.run(audit_events, store.store, TARGET)]
    assert actions == ["finish", "start"]
    assert [kind for kind, _ in reporter.events] == ["started", *["step"] * 6, "finished"]


async def test_a_second_engine_is_refused_naming_holder_and_experiment(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    playbook = book(tmp_path, "mutating: true\nsteps:\n  - {action: t_wait, with: {gate: g}}\n")
    first = engine(settings, store, holder="alice:one")
    run = asyncio.create_task(first.run(playbook, {}, target=TARGET, actor="alice"))
    await started(probe, "g")
    [row] = await store.run(list_experiments, store.store, TARGET)
    with pytest.raises(LeaseHeld) as refused:
        await engine(settings, store).run(playbook, {}, target=TARGET, actor="bob")
    assert "held by alice:one" in str(refused.value) and f"experiment #{row.id} (b)" in str(refused.value)
    assert len(await store.run(list_experiments, store.store, TARGET)) == 1  # the refused run wrote nothing
    probe.gate("g").set()
    assert (await run).status == "succeeded"
    assert await store.run(current, store.store, TARGET) is None


async def test_cancel_is_seen_at_the_next_boundary_and_runs_on_cancel(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    playbook = book(
        tmp_path,
        """
        mutating: true
        steps:
          - {action: t_wait, with: {gate: g}}
          - {action: t_note, with: {label: never}}
        on_cancel:
          - {action: t_undo}
        """,
    )
    eng = engine(settings, store)
    run = asyncio.create_task(eng.run(playbook, {}, target=TARGET, actor="alice"))
    await started(probe, "g")
    [row] = await store.run(list_experiments, store.store, TARGET)
    assert row.id is not None
    assert await eng.cancel(row.id, "bob")
    probe.gate("g").set()
    outcome = await run
    assert outcome.status == "cancelled"
    assert outcome.summary == "cancelled by bob before step 2; rolled back"
    assert [(s["action"], s["index"]) for s in outcome.steps] == [("t_wait", 0), ("t_undo", 2)]
    assert "t_note" not in [name for name, _ in probe.calls]
    assert not await eng.cancel(row.id, "carol")  # finished: nothing to cancel


@pytest.mark.parametrize(("rolled_back", "status"), [(True, "rolled-back"), (False, "failed")])
async def test_a_failing_step_runs_on_failure(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe, rolled_back: bool, status: str
) -> None:
    playbook = book(
        tmp_path,
        f"""
        mutating: true
        steps:
          - {{action: t_note, with: {{label: a}}}}
          - {{action: t_fail, name: restart, with: {{message: no GPU left}}}}
          - {{action: t_note, with: {{label: never}}}}
        on_failure:
          - {{action: t_undo, with: {{rolled_back: {str(rolled_back).lower()}}}}}
        """,
    )
    outcome = await engine(settings, store).run(playbook, {}, target=TARGET, actor="alice")
    assert outcome.status == status
    assert outcome.summary is not None and outcome.summary.startswith("step 2 (restart) failed: no GPU left")
    failed = outcome.steps[1]
    assert (failed["status"], failed["error"]) == ("failed", "no GPU left")
    assert [s["action"] for s in outcome.steps] == ["t_note", "t_fail", "t_undo"]
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None and row.cursor == 1  # the failed step did not advance


@pytest.mark.parametrize("applied", [False, True])
async def test_a_run_that_could_not_connect_before_any_change_is_marked_not_started(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe, applied: bool
) -> None:
    """A key, known_hosts, host key or login failure before anything was applied: the run never
    reached a node (the digest lists it apart); after an applied change it is a real failure."""
    from bot.loop.actions import StepContext, action, unregister
    from bot.target.errors import LocalFileError

    @action("t_no_key", summary="connect with a key file that does not exist")
    async def t_no_key(ctx: StepContext, *, applied: bool = False) -> dict[str, object]:
        ctx.state.restart.applied = applied
        raise LocalFileError("10.0.0.1", "ssh.key_path", "/k", "does not exist")

    try:
        playbook = book(
            tmp_path,
            f"""
            mutating: true
            steps:
              - {{action: t_note, with: {{label: a}}}}
              - {{action: t_no_key, with: {{applied: {str(applied).lower()}}}}}
            """,
        )
        outcome = await engine(settings, store).run(playbook, {}, target=TARGET, actor="alice")
    finally:
        unregister("t_no_key")
    assert outcome.status == "failed"
    row = await store.run(get_experiment, store.store, outcome.experiment_id)
    assert row is not None
    marked = RunState.load(row.state).conclusion.not_started
    if applied:
        assert marked is None
    else:
        assert marked == (
            "could not connect: 10.0.0.1: not connected: ssh.key_path /k does not exist "
            "(a file on the bot host; nothing was sent)"
        )


async def test_stop_playbook_ends_early_and_successfully(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    playbook = book(
        tmp_path,
        """
        params: {why: {kind: text, default: already at the known-good flags}}
        steps:
          - {action: t_stop, with: {reason: $why}}
          - {action: t_note, with: {label: never}}
        """,
    )
    outcome = await engine(settings, store).run(playbook, {}, target=TARGET, actor="alice")
    assert (outcome.status, outcome.summary) == ("succeeded", "already at the known-good flags")
    assert [(s["action"], s["status"]) for s in outcome.steps] == [("t_stop", "stopped")]


async def test_evidence_is_stored_and_reported(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    from bot.loop.actions import StepContext, action, unregister

    @action("t_emit", summary="emit one block")
    async def t_emit(ctx: StepContext) -> dict[str, object]:
        await ctx.emit(TextBlock("48 -> 26", title="capacity"))
        return {}

    try:
        playbook = book(tmp_path, "steps: [{action: t_note}, {action: t_emit}]\n")
        reporter = MemoryReporter()
        outcome = await engine(settings, store, reporter).run(playbook, {}, target=TARGET, actor="alice")
    finally:
        unregister("t_emit")
    [record] = await store.run(evidence_of, store.store, outcome.experiment_id)
    assert (record.kind, record.title, record.step_index, record.data["text"]) == (
        "text",
        "capacity",
        1,
        "48 -> 26",
    )
    assert outcome.evidence == 1 and reporter.blocks == [
        (TextBlock("48 -> 26", title="capacity"), outcome.experiment_id)
    ]


async def test_a_lost_lease_stops_the_run_at_the_next_boundary(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe
) -> None:
    playbook = book(
        tmp_path,
        "mutating: true\nsteps:\n  - {action: t_until_lost}\n  - {action: t_note, with: {label: never}}\n",
    )
    alice = engine(settings, store, holder="alice:one", lease_ttl_s=0.3)  # heartbeats every 0.1 s
    run = asyncio.create_task(alice.run(playbook, {}, target=TARGET, actor="alice"))
    await started(probe, "lost")
    later = utcnow() + timedelta(seconds=30)  # alice's lease looks stale to bob's clock
    await store.run(acquire, store.store, TARGET, holder="bob:two", host="h", pid=1, purpose="x", now=later)
    outcome = await asyncio.wait_for(run, timeout=30)
    assert outcome.status == "interrupted"
    assert outcome.summary is not None
    assert "stopped before step 2" in outcome.summary and "held by bob:two" in outcome.summary
    assert "t_note" not in [name for name, _ in probe.calls]
    lease = await store.run(current, store.store, TARGET)
    assert lease is not None and lease.holder == "bob:two"  # alice's release did not free bob's lease


@pytest.mark.parametrize("resume", [True, False])
async def test_a_stopped_engine_task_is_reconciled(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe, resume: bool
) -> None:
    playbook = book(tmp_path, CRASHY, "crashy")
    run = asyncio.create_task(engine(settings, store).run(playbook, {}, target=TARGET, actor="alice"))
    await started(probe, "g")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    [row] = await store.run(list_experiments, store.store, TARGET)
    assert (row.status, row.cursor, row.state) == ("interrupted", 1, RunState(custom={"notes": ["a"]}).dump())
    probe.resume_answer = {"resume": resume, "why": "flags as intended" if resume else "flags differ"}
    probe.gate("g").set()
    reporter = MemoryReporter()
    [outcome] = await engine(settings, store, reporter, playbooks={"crashy": playbook}).reconcile(TARGET)
    await check_reconciled(store, probe, reporter, outcome, resume=resume)


async def check_reconciled(
    store: AsyncStore, probe: Probe, reporter: MemoryReporter, outcome: object, *, resume: bool
) -> None:
    from bot.loop.report import RunOutcome

    assert isinstance(outcome, RunOutcome)
    assert reporter.outcomes == [outcome]
    checks = [args for name, args in probe.calls if name == "t_check"]
    assert checks == [{"state": RunState(custom={"notes": ["a"]})}]  # the check saw the checkpointed state
    steps = [(s["index"], s["action"], s["status"]) for s in outcome.steps]
    interrupted = (1, "t_wait", "failed")
    if resume:
        assert (outcome.status, outcome.verdict) == ("succeeded", "improved")
        assert (outcome.summary or "").startswith("interrupted at step 2 and resumed (")  # the story says so
        assert steps == [(0, "t_note", "ok"), interrupted, (1, "t_wait", "ok"), (2, "t_note", "ok")]
        row = await store.run(get_experiment, store.store, outcome.experiment_id)
        assert row is not None and RunState.load(row.state).custom["notes"] == ["a", "b"]
    else:
        assert outcome.status == "rolled-back"
        assert outcome.summary == "interrupted and not resumed: flags differ; rolled back"
        assert steps == [(0, "t_note", "ok"), interrupted, (3, "t_undo", "ok")]
    assert outcome.steps[1]["error"] == "interrupted: the engine stopped during this step"
    assert await store.run(current, store.store, TARGET) is None
    actions = [event.action for event in await store.run(audit_events, store.store, TARGET)]
    assert {"interrupt", "reconcile", "finish"} <= set(actions)


async def test_a_killed_process_is_reconciled_once_its_lease_is_stale(
    tmp_path: Path, probe: Probe, request: pytest.FixtureRequest
) -> None:
    db = tmp_path / "state" / "flagbot.db"
    sync = Store.open(None, sqlite_path=db)
    sync.upgrade()
    store = AsyncStore(sync)
    request.addfinalizer(sync.close)
    settings = Settings(database={"sqlite_path": db})
    playbook = book(tmp_path, CRASHY, "crashy")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.loop_crash",
        str(db),
        str(tmp_path / "books"),
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)  # type: ignore[union-attr]
        assert line.strip() == b"arrived"
    finally:
        proc.kill()
        await proc.wait()
    now = engine(settings, store, playbooks={"crashy": playbook})
    assert await now.reconcile(TARGET) == []  # the lease still looks alive: maybe it is
    probe.gate("g").set()
    reporter = MemoryReporter()
    later = engine(
        settings,
        store,
        reporter,
        playbooks={"crashy": playbook},
        clock=lambda: utcnow() + timedelta(minutes=5),
    )
    [outcome] = await later.reconcile(TARGET)
    await check_reconciled(store, probe, reporter, outcome, resume=True)
    actions = [event.action for event in await store.run(audit_events, store.store, TARGET)]
    assert "takeover" in actions
    store._executor.shutdown(wait=True)


async def test_without_an_interrupt_check_an_interrupted_run_is_rolled_back(
    tmp_path: Path, settings: Settings, store: AsyncStore, probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.loop import engine as engine_module

    monkeypatch.setattr(engine_module, "DEFAULT_INTERRUPT_CHECK", "t_no_such_check")
    playbook = book(tmp_path, CRASHY.replace("on_interrupt: t_check\n", ""), "crashy")
    run = asyncio.create_task(engine(settings, store).run(playbook, {}, target=TARGET, actor="alice"))
    await started(probe, "g")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    [outcome] = await engine(settings, store, playbooks={"crashy": playbook}).reconcile(TARGET)
    assert outcome.status == "rolled-back"
    assert outcome.summary == "interrupted and not resumed: the playbook has no interrupt check; rolled back"
    assert "t_check" not in [name for name, _ in probe.calls]
