"""A seeded week (2026-W48, Europe/Berlin) written into a real store.

Rows are written with the store's repositories; the repositories stamp "now", so each row's
time is then moved into the seeded week by writing the row back (`Store.add`). The week has a
regression 48 -> 26 that was reverted, an improvement that was kept and later reverted by a
`revert`, a start that failed and was rolled back, hypotheses in every state, observations,
starts and benchmarks for the chart; and experiments just outside the week on the team's clock
(inside it in UTC) that must not count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from bot.config import Settings
from bot.digest.threads import record_thread
from bot.store import Snapshot, Store
from bot.store.baselines import pin_baseline
from bot.store.bench_repo import save_set
from bot.store.experiments import create_experiment, update_experiment
from bot.store.hypotheses import add_hypothesis, resolve_hypothesis
from bot.store.models import MeasurementSet
from bot.store.observations import add_observation

TARGET = "sglang-qwen"
TZ = "Europe/Berlin"
BASE_FLAGS = [{"flag": "--tp-size", "value": "2"}]
FUSION = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"
CHUNK = "--chunked-prefill-size"
PERMALINK = "https://flagbot.example.slack.com/archives/C0FLAGBOT/p1764000000000100"

R = TypeVar("R")


def utc(day: int, hour: int, minute: int = 0, month: int = 11) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def moved(store: Store, row: R, **times: datetime) -> R:
    """The row with its timestamps set (the repositories write "now")."""
    for name, value in times.items():
        setattr(row, name, value)
    return store.add(row)


@dataclass
class Seeded:
    store: Store
    settings: Settings
    ids: dict[str, int]


def _snapshot(store: Store, at: datetime, capacity: int, flags: list[dict[str, Any]], **extra: Any) -> int:
    row = store.add(
        Snapshot(
            target=TARGET,
            captured_at=at,
            requested_flags=flags,
            effective={"max_running_requests": capacity},
            ready=True,
            **extra,
        )
    )
    assert row.id is not None
    return row.id


def _bench(store: Store, at: datetime, snapshot_id: int, throughput: float) -> int:
    levels = [
        {"concurrency": 16, "output_throughput": throughput * 0.6},
        {"concurrency": 64, "output_throughput": throughput},
    ]
    loaded = save_set(
        store,
        MeasurementSet(target=TARGET, created_at=at, snapshot_id=snapshot_id, summary={"levels": levels}),
    )
    assert loaded.set.id is not None
    return loaded.set.id


def _experiment(store: Store, at: datetime, playbook: str, params: dict[str, Any], **fields: Any) -> int:
    row = create_experiment(store, target=TARGET, playbook=playbook, params=params, actor="slack:U0OPER")
    assert row.id is not None
    moved(store, row, created_at=at)
    if fields:
        update_experiment(store, row.id, **fields)
    return row.id


def seed_week(store: Store) -> dict[str, int]:
    ids: dict[str, int] = {}
    add = {"op": "add", "value": None}
    # before the week: the baseline start and its benchmark
    ids["s_base"] = _snapshot(store, utc(20, 9), 48, BASE_FLAGS)
    set_base = _bench(store, utc(20, 9, 5), ids["s_base"], 1000.0)
    base = pin_baseline(
        store, target=TARGET, snapshot_id=ids["s_base"], set_id=set_base, pinned_by="cli:alice"
    )
    moved(store, base, pinned_at=utc(20, 9, 10))
    # Sunday 22 Nov 23:30 Berlin (22:30 UTC): week 47 on the team's clock
    ids["e_before"] = _experiment(
        store,
        utc(22, 22, 30),
        "verify",
        {"expect": ["max_running_requests>=48"]},
        status="succeeded",
        verdict="pass",
    )
    # the regression: both flags, 48 -> 26, reverted by decide
    ids["s_regressed"] = _snapshot(store, utc(24, 10, 5), 26, [*BASE_FLAGS, {"flag": FUSION}, {"flag": MOE}])
    _bench(store, utc(24, 10, 8), ids["s_regressed"], 700.0)
    ids["s_back"] = _snapshot(store, utc(24, 10, 20), 48, BASE_FLAGS)
    ids["e_regressed"] = _experiment(
        store,
        utc(24, 10),
        "try",
        {"changes": [{**add, "flag": FUSION}, {**add, "flag": MOE}], "expect": []},
        status="succeeded",
        verdict="regressed",
        summary="max_running_requests 48 -> 26",
        state={
            "before_snapshot_id": ids["s_base"],
            "after_snapshot_id": ids["s_regressed"],
            "kept": False,
            "restored": True,
        },
    )
    record_thread(
        store,
        experiment_id=ids["e_regressed"],
        target=TARGET,
        channel="C0FLAGBOT",
        thread_ts="1764000000.000100",
        permalink=PERMALINK,
    )
    # an improvement, kept
    ids["s_chunk"] = _snapshot(store, utc(25, 14, 5), 48, [*BASE_FLAGS, {"flag": CHUNK, "value": "4096"}])
    _bench(store, utc(25, 14, 8), ids["s_chunk"], 1100.0)
    ids["e_kept"] = _experiment(
        store,
        utc(25, 14),
        "try",
        {"changes": [{"op": "add", "flag": CHUNK, "value": "4096"}], "expect": []},
        status="succeeded",
        verdict="improved",
        state={"before_snapshot_id": ids["s_back"], "after_snapshot_id": ids["s_chunk"], "kept": True},
    )
    # a start that failed and was rolled back
    ids["e_failed"] = _experiment(
        store,
        utc(26, 8),
        "try",
        {"changes": [{**add, "flag": "--enable-piecewise-cuda-graph"}], "expect": []},
        status="succeeded",
        verdict="failed-to-start",
        state={"start_failed": True, "rolled_back": True, "fatal_line": "RuntimeError: CUDA out of memory"},
    )
    # Friday: the kept change taken back by `revert`
    ids["s_reverted"] = _snapshot(store, utc(27, 16, 5), 48, BASE_FLAGS)
    ids["e_revert"] = _experiment(
        store,
        utc(27, 16),
        "revert",
        {"what": str(ids["e_kept"]), "flags": None},
        status="succeeded",
        verdict="pass",
        state={"reverting_experiment": ids["e_kept"], "after_snapshot_id": ids["s_reverted"]},
    )
    # a later start on the last day: the target ends the week on the regressed flags again
    ids["s_last"] = _snapshot(store, utc(28, 12), 26, [*BASE_FLAGS, {"flag": MOE}])
    # Monday 30 Nov 00:30 Berlin (Sunday 23:30 UTC): week 49 on the team's clock
    ids["e_after"] = _experiment(
        store,
        utc(29, 23, 30),
        "try",
        {"changes": [{**add, "flag": "--enable-metrics"}], "expect": []},
        status="succeeded",
        verdict="no-effect",
        state={"kept": True},
    )
    _hypotheses(store, ids)
    _observations(store, ids)
    return ids


def _hypotheses(store: Store, ids: dict[str, int]) -> None:
    def hypothesis(statement: str, created: datetime, status: str | None, resolved: datetime | None) -> int:
        row = add_hypothesis(store, target=TARGET, statement=statement, created_by="slack:U0OPER")
        assert row.id is not None
        moved(store, row, created_at=created)
        if status is not None:
            row = resolve_hypothesis(store, row.id, status=status, because=f"seeded {status}")
            if resolved is not None:
                moved(store, row, resolved_at=resolved)
        return row.id if row.id is not None else 0

    ids["h_confirmed"] = hypothesis(
        f"{MOE} lowers max_running_requests", utc(24, 9), "confirmed", utc(24, 11)
    )
    ids["h_refuted"] = hypothesis(f"{FUSION} lowers max_running_requests", utc(24, 9), "refuted", utc(25, 9))
    ids["h_inconclusive"] = hypothesis(
        f"{CHUNK} 4096 raises throughput", utc(25, 13), "inconclusive", utc(26, 9)
    )
    ids["h_open"] = hypothesis("memory fraction moved with the fusion flag", utc(25, 10), None, None)
    ids["h_old"] = hypothesis("an older question", utc(10, 9), "confirmed", utc(12, 9))
    ids["h_future"] = hypothesis("asked after the week", utc(2, 9, month=12), None, None)


def _observations(store: Store, ids: dict[str, int]) -> None:
    def observation(flag: str, kind: str, text_: str, at: datetime, experiment: int | None) -> int:
        row = add_observation(
            store, flag=flag, kind=kind, text=text_, target=TARGET, experiment_id=experiment
        )
        moved(store, row, observed_at=at)
        return row.id if row.id is not None else 0

    ids["o_culprit"] = observation(
        MOE,
        "capacity-lowered",
        "max_running_requests 48 -> 26 on the GB10",
        utc(24, 10, 30),
        ids["e_regressed"],
    )
    ids["o_noop"] = observation(FUSION, "no-op", "a no-op on SM 12.1", utc(24, 10, 31), ids["e_regressed"])
    ids["o_old"] = observation(CHUNK, "note", "learned the week before", utc(18, 9), None)
