"""Crash safety of a try: flagbot SIGKILLed at each step, then the next command settles what it left.

The kill points are watched from outside, with no hook in flagbot: the experiment's step rows
in the SQLite store (polled with a 2-50 ms backoff), and node 0's unit as systemd has it. Once
the store shows `measure before` finished (a state that lasts, so a slow poll cannot miss it, as
it once missed a short `apply running`), a shell loop on node 0 itself waits for the drop-in to
name the new flag, for the loaded `ExecStart=` to name it, or for a new `InvocationID` with the
flag in the drop-in, and prints one line: the kill follows ~1-2 ms after the change, where a poll
over SSH lagged ~10 ms, more than the gap between flagbot's write and its daemon-reload. The state
is read again just after the kill and printed, so each row says where the kill really landed.

After the kill the lease (ttl 2 s) expires, and `flagbot verify` (a mutating command: it
reconciles first) resumes the try or rolls it back. Then: nothing recorded is lost (experiment,
steps, evidence, hypothesis), both nodes run one known configuration (the try's flags, kept, or
the flags from before), the experiment's summary says it was interrupted, the lease is free.
Run with `-s` to see the rows of docs/crash-safety.md.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.store.experiments import get_experiment, latest_experiment, list_steps
from bot.store.hypotheses import get_hypothesis
from bot.store.records import evidence_of
from bot.target.privileged import dropin_path
from bot.target.readiness import Backoff
from flagbot_lab.testbed import Testbed
from flagbot_lab.testbed.layout import UNIT
from tests.integration.conftest import NodeShells
from tests.integration.loop.support import flagbot, flagbot_json, start, store_of, write_config
from tests.integration.loop.test_concurrency import lease
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
METRICS = "--enable-metrics"
TTL = {"FLAGBOT_LEASE_TTL_S": "2"}
PROBE = f"cat {dropin_path(UNIT)} 2>/dev/null; systemctl show -p NeedDaemonReload,InvocationID,ActiveState,ExecStart {UNIT}"


@dataclass(frozen=True)
class Node:
    """A node's unit as seen from outside."""

    written: bool  # the drop-in file names the try's flag
    loaded: bool  # systemd's loaded ExecStart= names it
    reload_pending: bool
    invocation: str
    active: str

    def brief(self) -> str:
        return (
            f"drop-in {'new' if self.written else 'old'}, loaded {'new' if self.loaded else 'old'}"
            f"{' (reload pending)' if self.reload_pending else ''}, {self.active}, inv {self.invocation[:6]}"
        )


async def node_state(shells: NodeShells, k: int = 0) -> Node:
    out = (await shells.run(k, PROBE)).stdout
    props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and line[:1].isupper())
    dropin = out.split("NeedDaemonReload=")[0]
    return Node(
        METRICS in dropin and "ExecStart=" in dropin,
        METRICS in props.get("ExecStart", ""),
        props.get("NeedDaemonReload") == "yes",
        props.get("InvocationID", ""),
        props.get("ActiveState", ""),
    )


def steps_of(config: Path) -> tuple[Any, list[Any]]:
    """The newest try and its steps (None, [] before it exists)."""
    store = store_of(config)
    try:
        row = latest_experiment(store, "twin", playbook="try")
        return row, ([] if row is None or row.id is None else list_steps(store, row.id))
    finally:
        store.close()


def step(config: Path, name: str, status: str) -> bool:
    return any(s.name == name and s.status == status for s in steps_of(config)[1])


async def on_node(shells: NodeShells, condition: str) -> None:
    """Busy-wait on node 0 itself until `condition` holds: ~1 ms from the change to our kill,
    where a poll over SSH lags ~10 ms (more than the gap between flagbot's write and its reload)."""
    result = await shells.run(0, f"until {condition}; do :; done; echo reached", timeout=300)
    assert "reached" in result.stdout, result


def store_point(name: str, status: str) -> Callable[[Path, NodeShells, str], Awaitable[None]]:
    async def reach(config: Path, shells: NodeShells, original: str) -> None:
        await until(lambda: _async(step(config, name, status)), 300, f"{name} {status}")

    return reach


async def _async(value: bool) -> bool:
    return value


async def lease_taken(config: Path, shells: NodeShells, original: str) -> None:
    await until(lambda: _async(lease(config) is not None), 120, "the lease")


async def before_apply(config: Path, shells: NodeShells, original: str) -> None:
    """The step before `apply` has finished: from here on only apply touches the unit. Waiting
    for `apply running` instead lost the race once (CI, stop 28): apply ended between two polls."""
    await until(
        lambda: _async(any(step(config, "measure before", status) for status in ("ok", "skipped"))),
        300,
        "measure before finished",
    )


async def dropin_written(config: Path, shells: NodeShells, original: str) -> None:
    await before_apply(config, shells, original)
    await on_node(shells, f"grep -qs -- {METRICS} {dropin_path(UNIT)}")


async def reloaded(config: Path, shells: NodeShells, original: str) -> None:
    await before_apply(config, shells, original)
    await on_node(shells, f"systemctl show -p ExecStart {UNIT} | grep -q -- {METRICS}")


async def restarting(config: Path, shells: NodeShells, original: str) -> None:
    await before_apply(config, shells, original)
    await on_node(
        shells,
        f"grep -qs -- {METRICS} {dropin_path(UNIT)}"
        f" && ! systemctl show -p InvocationID {UNIT} | grep -q {original or 'none'}",
    )


POINTS: dict[str, Callable[[Path, NodeShells, str], Awaitable[None]]] = {
    "after the lease is taken": lease_taken,
    "after the drop-in write": dropin_written,
    "after daemon-reload": reloaded,
    "mid-restart": restarting,
    "mid-benchmark": store_point("measure after", "running"),
    "before the verdict": store_point("measure after", "ok"),
}


async def until(reached: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    backoff = Backoff(0.002, 1.5, 0.05)
    deadline = time.monotonic() + timeout
    while not await reached():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await backoff.sleep()


def recorded(config: Path, experiment_id: int) -> dict[str, Any]:
    store = store_of(config)
    try:
        row = get_experiment(store, experiment_id)
        assert row is not None
        hypothesis = get_hypothesis(store, row.hypothesis_id) if row.hypothesis_id else None
        return {
            "row": row,
            "steps": {(s.index, s.name): s.status for s in list_steps(store, experiment_id)},
            "evidence": len(evidence_of(store, experiment_id)),
            "hypothesis": None if hypothesis is None else hypothesis.statement,
        }
    finally:
        store.close()


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.usefixtures("on_baseline")
async def test_a_try_killed_at_each_step_is_settled_by_the_next_command(
    testbed: Testbed, ssh_ops: NodeShells, tmp_path: Path, point: str
) -> None:
    config = write_config(testbed, tmp_path)
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    original = (await node_state(ssh_ops)).invocation
    started = time.monotonic()
    doomed = await start(config, "try", METRICS, "keep=always", "because=metrics are free", "--json", **TTL)
    try:
        await POINTS[point](config, ssh_ops, original)
        assert doomed.returncode is None, "the try ended before the kill point"
    finally:
        doomed.kill()  # SIGKILL: no finally, no lease release, a step left "running"
        await doomed.wait()
    killed_after = time.monotonic() - started
    at_kill_node = await node_state(ssh_ops)
    row, steps = steps_of(config)
    at_kill = "no experiment yet" if row is None else f"step {_in_flight(steps)}"
    before = recorded(config, row.id) if row is not None else None

    await until(lambda: _expired(config), 30, "the dead holder's lease to expire")
    code, verified, err = await flagbot_json(config, "verify", "max_running_requests>=1", **TTL)
    assert code == 0, (verified, err)
    settled = verified["reconciled"]
    if row is None:  # killed before the experiment was written: nothing to settle, nothing changed
        assert settled == [] and not at_kill_node.written
    else:
        assert [item["experiment_id"] for item in settled] == [row.id], settled
        assert settled[0]["status"] in ("succeeded", "rolled-back"), settled
        assert "interrupted" in (settled[0]["summary"] or ""), settled[0]
        after = recorded(config, row.id)
        assert before is not None and after["row"].created_at == before["row"].created_at
        assert after["row"].params == before["row"].params
        assert before["hypothesis"] is None or after["hypothesis"] == before["hypothesis"]
        kept = {k: v for k, v in before["steps"].items() if v != "running"}
        assert kept.items() <= after["steps"].items(), (before["steps"], after["steps"])
        assert after["evidence"] >= before["evidence"]

    _, status, _ = await flagbot_json(config, "status")
    expect_new = bool(settled) and settled[0]["status"] == "succeeded"
    assert status["health"] == 200 and (METRICS in [f["flag"] for f in status["flags"]]) == expect_new
    for k in range(len(testbed.addresses)):  # every node on the same known flags, as systemd runs them
        final = await node_state(ssh_ops, k)
        assert final.active == "active" and not final.reload_pending, (k, final)
        assert final.loaded == final.written == expect_new, (k, final)
    assert status["diverged"] in (None, {}, False), status["diverged"]
    assert lease(config) is None
    what = "nothing to settle" if not settled else f"{settled[0]['status']}: {settled[0]['summary']}"
    print(
        f"\n| {point} (killed at {killed_after:.1f} s) | {at_kill}; node 0: {at_kill_node.brief()} "
        f"| {what} | {'new flags, kept' if expect_new else 'old flags'}, /health 200 |"
    )


def _in_flight(steps: list[Any]) -> str:
    running = [s for s in steps if s.status == "running"]
    last = running[-1] if running else (steps[-1] if steps else None)
    return "none started" if last is None else f"{last.index + 1} {last.name} {last.status}"


async def _expired(config: Path) -> bool:
    info = lease(config)
    return info is None or bool(info.expired())
