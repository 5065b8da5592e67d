"""A stand-in for the target layer under the built-in steps: the `try` playbook runs end to end
on a real store without SSH, systemd or a server.

Why module attributes are replaced (not a fake TargetSession): the built-in steps call the target
layer's functions (`observe`, `apply_and_restart`, `ensure_ready`, `read_unit`, ...) by name, so
swapping those names is the one seam that leaves every step's own code, and so what it writes into
the run's state, exactly as it runs in production. `--enable-metrics` costs the seeds' capacity
(effective max_running_requests 48 -> 26), so a try that adds it regresses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.bench.compare_sets import Compared
from bot.bench.run import BenchRun
from bot.config import Settings
from bot.loop.preflight import PreflightReport
from bot.loop.steps import analysis_steps, measure_steps, target_steps
from bot.sglang.change import Change, apply_changes
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import Snapshot, Store
from bot.store.models import Comparison, MeasurementSet
from bot.target.dropin import HandEditError

TARGET = "lab"
START_FLAGS = FlagSet((FlagItem("--tp-size", "2"), FlagItem("--mem-fraction-static", "0.8")))
GPUS = {"node0": [{"index": 0, "name": "NVIDIA GB10", "compute_cap": "12.1"}]}


def settings(tmp_path: Path) -> Settings:
    """One target, `lab`, on a closed port: nothing may reach it (the fakes answer for it)."""
    return Settings.model_validate(
        {
            "targets": {
                TARGET: {
                    "unit": "sglang.service",
                    "base_url": "http://127.0.0.1:9",
                    "nodes": [{"host": "127.0.0.1", "port": 9}],
                }
            },
            "database": {"sqlite_path": str(tmp_path / "state" / "flagbot.db")},
        }
    )


def capacity(flags: FlagSet) -> int:
    return 26 if any(item.flag == "--enable-metrics" for item in flags.items) else 48


@dataclass(frozen=True)
class FakePlan:
    """What the steps read of a benchmark plan; a dataclass, so a try's sizing can `replace` its
    repeats as it does a real `BenchPlan`'s."""

    backend: str
    profile_name: str
    label: str
    snapshot_id: int | None
    repeats: int = 2


@dataclass
class FakeTarget:
    """The one node's running flags, and every restart flagbot asked for (node 0's flags)."""

    store: Store
    flags: FlagSet = START_FLAGS
    invocation: int = 1
    restarts: list[FlagSet] = field(default_factory=list)
    hand_edit: str | None = None
    """A diff: the unit was changed by hand (`check_unedited` refuses it)."""
    start_of: Callable[[FlagSet, int], Snapshot] | None = None
    """The start a flag set makes (flags, invocation -> snapshot), e.g. the twin's with its memory
    lines (tests/support/twin_start.py); None: a start without them, capacity by `capacity`."""

    def _snapshot(self) -> Snapshot:
        if self.start_of is None:
            return Snapshot(
                target=TARGET,
                node="node0",
                sglang_version="0.5.10",
                requested_flags=self.flags.to_json(),
                effective={"max_running_requests": capacity(self.flags), "gpus": GPUS},
                ready=True,
            )
        start = self.start_of(self.flags, self.invocation)
        measured = (start.effective.get("gpus") or {}).get("node0") or [{}]
        start.effective = {**start.effective, "gpus": {"node0": [{**GPUS["node0"][0], **measured[0]}]}}
        return start

    def observation(self) -> SimpleNamespace:
        """A start as `observe` reports it, its snapshot stored as the real one would be."""
        start = self._snapshot()
        start.invocation_id = f"inv-{self.invocation}"
        row = self.store.add(start)
        return SimpleNamespace(
            evidence=[],
            requested=self.flags.to_json(),
            environment={},
            healthy=True,
            health=200,
            startup_error=None,
            snapshot_id=row.id,
            invocation=f"inv-{self.invocation}",
            effective={"max_running_requests": row.effective.get("max_running_requests")},
        )

    # --- the functions the steps call, by the names they import ---------------------------------

    async def heal_if_diverged(self, ts: Any, **_: Any) -> None:
        return None

    async def observe(self, ts: Any, **_: Any) -> SimpleNamespace:
        return self.observation()

    async def read_unit(self, node: Any) -> SimpleNamespace:
        state = await self.read_state(node)
        return SimpleNamespace(flags=self.flags, env={}, state=state, cat_text="[Service]\n")

    async def read_state(self, node: Any) -> SimpleNamespace:
        return SimpleNamespace(
            invocation_id=f"inv-{self.invocation}", active_state="active", need_daemon_reload=False
        )

    async def check_unedited(self, node: Any, ledger: Any, **_: Any) -> str:
        """The unit as flagbot left it (a test sets `hand_edit` to a diff to refuse it)."""
        if self.hand_edit is not None:
            raise HandEditError(node.name, self.hand_edit)
        return "[Service]\n"

    async def restart_target(self, ts: Any, **_: Any) -> SimpleNamespace:
        """`restart`: every rank stopped and started on the flags it runs (recorded as a restart)."""
        self.restarts.append(self.flags)
        self.invocation += 1
        node = SimpleNamespace(node="node0", old_invocation=None)
        return SimpleNamespace(
            nodes=[node], phase="restarted", duration_s=1.5, connection_notes=list, drain=None, resumed=None
        )

    async def probe_health(self, client: Any, url: str) -> int:
        return 200

    async def apply_and_restart(
        self, ts: Any, flags: Sequence[FlagSet], env: Any, **_: Any
    ) -> SimpleNamespace:
        old = f"inv-{self.invocation}"
        self.flags = flags[0]
        self.restarts.append(flags[0])
        self.invocation += 1
        node = SimpleNamespace(node="node0", old_invocation=old)
        return SimpleNamespace(
            nodes=[node], phase="restarted", duration_s=1.5, connection_notes=list, drain=None, resumed=None
        )

    async def ensure_ready(self, ts: Any, **_: Any) -> SimpleNamespace:
        readiness = SimpleNamespace(timings={"ready_s": 1.0}, failure=None, outcome="ready")
        return SimpleNamespace(
            readiness=readiness, observation=self.observation(), rollback=None, traffic=None
        )

    async def preflight(self, ts: Any, *, changes: Sequence[Change], **_: Any) -> PreflightReport:
        new_flags, env = apply_changes(self.flags, {}, changes)
        return PreflightReport(
            target=TARGET,
            node="node0",
            changes=list(changes),
            new_flags=new_flags,
            env=dict(env),
            sglang_version="0.5.10",
            gpus=GPUS,
            gpus_read_at=time.time(),
            compute_capability="12.1",
        )

    async def bench_plan(self, ctx: Any, label: str, snapshot_id: int | None, profile: str | None) -> Any:
        return FakePlan("builtin", profile or "probe", label, snapshot_id)

    async def run_plan(self, plan: Any, **_: Any) -> BenchRun:
        """A measurement set whose throughput follows the capacity (stored like a real one's)."""
        throughput = 10.0 * capacity(self.flags)
        level = {
            "concurrency": 32,
            "repeats": 2,
            "output_throughput": throughput,
            "completed": 64,
            "failed": 0,
        }
        summary = {"levels": [level]}
        row = self.store.add(
            MeasurementSet(
                target=TARGET,
                snapshot_id=plan.snapshot_id,
                profile=plan.profile_name,
                label=plan.label,
                summary=summary,
            )
        )
        return BenchRun(set=row, measurements=[], levels=[])  # its evidence words are the real ones

    def compare_by_id(
        self, store: Store, reference: int, candidate: int, *_: Any, save: bool = True, **__: Any
    ) -> Compared:
        """A decided verdict (no more repeats asked for); stored by the caller when `save=False`."""
        lines = ["regressed: output_throughput -45.8 % (capacity 48 -> 26)"]
        result = SimpleNamespace(
            verdict="regressed",
            guarded_by="max_running_requests",
            more_repeats=None,
            lines=lambda: lines,
            to_json=lambda: {"verdict": "regressed", "lines": lines},
        )
        row = (
            store.add(Comparison(reference_set_id=reference, candidate_set_id=candidate, verdict="regressed"))
            if save
            else None
        )
        # The real record, so a field added to it later has its default here too.
        return Compared(result=result, row=row)  # type: ignore[arg-type]


def _no_chart(*_: Any, **__: Any) -> None:
    """The chart is drawn by matplotlib from real measurements; the fake sets have none."""


@contextmanager
def faked_target(store: Store) -> Iterator[FakeTarget]:
    """Swap the target layer's functions for a FakeTarget's while the block runs."""
    fake = FakeTarget(store)
    swaps: list[tuple[Any, str, Any]] = [
        (target_steps, "heal_if_diverged", fake.heal_if_diverged),
        (target_steps, "observe", fake.observe),
        (target_steps, "read_unit", fake.read_unit),
        (target_steps, "read_state", fake.read_state),
        (target_steps, "check_unedited", fake.check_unedited),
        (target_steps, "restart_target", fake.restart_target),
        (target_steps, "probe_health", fake.probe_health),
        (target_steps, "apply_and_restart", fake.apply_and_restart),
        (target_steps, "ensure_ready", fake.ensure_ready),
        (target_steps, "_while_the_server_loads", lambda: None),
        (analysis_steps, "run_preflight", fake.preflight),
        (measure_steps, "bench_plan", fake.bench_plan),
        (analysis_steps, "bench_plan", fake.bench_plan),  # isolate's probes plan with measure's bench_plan
        (analysis_steps, "read_unit", fake.read_unit),  # isolate reads the unit, observes and probes
        (analysis_steps, "observe", fake.observe),
        (analysis_steps, "apply_and_restart", fake.apply_and_restart),
        (analysis_steps, "ensure_ready", fake.ensure_ready),
        (analysis_steps, "run_plan", fake.run_plan),
        (measure_steps, "run_plan", fake.run_plan),
        (measure_steps, "compare_by_id", fake.compare_by_id),
        (measure_steps, "render_chart", _no_chart),
    ]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, value in swaps:
        setattr(module, name, value)
    try:
        yield fake
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
