"""The one line of a finished run, per outcome; the cells that decided a verdict; the restart's
ETA from the target's stored starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.app.run_headline import (
    RestartEta,
    change_text,
    decisive_cells,
    duration_text,
    headline_of,
    restart_eta_of,
)
from bot.loop.report import RunOutcome
from bot.store import AsyncStore, Snapshot, Store

CAPACITY = "max_running_requests: 48 -> 26 (-45.8%) regressed (tolerance 0)"
SLOWER = "output_throughput@c=32: -12.0% [-15.1%, -8.9%] regressed"
FASTER = "output_throughput@c=64: +9.0% [+6.0%, +12.0%] improved"
UNDECIDED = "median_ttft_ms@c=32: +173.6% [-99.6%, +169014.3%] undecided"
NO_EFFECT = "median_itl_ms@c=1: -0.1% [-1.0%, +0.9%] no effect"
ADD_FOO = {"changes": [{"op": "add", "flag": "--enable-foo"}]}


def outcome(
    status: str, verdict: str | None, *, kept: bool | str | None = "absent", decided_by: str | None = None
) -> RunOutcome:
    steps: list[dict[str, Any]] = []
    if decided_by is not None:
        steps.append({"action": "compare", "result": {"decided_by": decided_by}})
    if kept != "absent":
        steps.append({"action": "decide", "result": {"kept": kept}})
    return RunOutcome(3, "try", "lab", status, verdict, "a summary", steps)


@pytest.mark.parametrize(
    ("run", "details", "line"),
    [
        (
            outcome("succeeded", "regressed", kept=False),
            (CAPACITY, UNDECIDED),
            "--enable-foo → regressed: max_running_requests 48 → 26 (-45.8%); reverted",
        ),
        (
            outcome("succeeded", "improved", kept=True),
            (UNDECIDED, FASTER),
            "--enable-foo → improved: output_throughput@c=64 +9.0% [+6.0%, +12.0%]; kept",
        ),
        (
            outcome("succeeded", "regressed", kept=None),
            (SLOWER,),
            "--enable-foo → regressed: output_throughput@c=32 -12.0% [-15.1%, -8.9%]; "
            "change still applied: Keep or Revert?",
        ),
        (
            outcome("succeeded", "no-effect", kept=True, decided_by="the statistics decided"),
            (NO_EFFECT,),
            "--enable-foo → no effect: the statistics decided; kept",
        ),
        (
            outcome("rolled-back", "failed-to-start"),
            (),
            "--enable-foo → failed to start; rolled back to the flags from before",
        ),
        (outcome("failed", None), (), "--enable-foo → failed: a summary; see the failed step"),
        (outcome("cancelled", None), (), "--enable-foo → cancelled: a summary; stopped"),
    ],
)
def test_the_line_says_change_verdict_deciding_number_and_what_was_done(
    run: RunOutcome, details: tuple[str, ...], line: str
) -> None:
    assert headline_of(run, ADD_FOO, details).text() == line


def test_a_failed_expectation_decides_a_regression() -> None:
    details = ("an expectation of the command failed: max_running_requests>=48 (got 26)", UNDECIDED)
    assert decisive_cells(details, "regressed") == ["expectation failed: max_running_requests>=48 (got 26)"]


def test_only_cells_that_decided_at_most_three_never_undecided_ones() -> None:
    details = ["verdict: regressed; 3 repeats a side", UNDECIDED, NO_EFFECT, FASTER, *[SLOWER] * 4, CAPACITY]
    cells = decisive_cells(details, "regressed")
    assert len(cells) == 3 and all("undecided" not in c and "median_ttft" not in c for c in cells)
    assert "output_throughput@c=64" not in " ".join(cells)  # an improvement did not decide a regression
    assert decisive_cells([UNDECIDED, NO_EFFECT], "inconclusive") == []


def test_the_change_reads_as_typed() -> None:
    changes = {
        "changes": [
            {"op": "add", "flag": "--enable-foo", "value": None},
            {"op": "set", "flag": "--tp-size", "value": "4"},
            {"op": "env-set", "name": "NCCL_DEBUG", "value": "INFO"},
        ]
    }
    assert change_text("try", changes) == "--enable-foo, set --tp-size 4, env set NCCL_DEBUG=INFO"
    assert (
        change_text("verify", {"expect": ["max_running_requests>=48"]}) == "verify max_running_requests>=48"
    )
    assert change_text("baseline", {}) == "baseline"


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0.4, "0 s"), (42, "42 s"), (185, "3 min 05 s"), (3720, "1 h 02 min")]
)
def test_durations_read_at_a_glance(seconds: float, shown: str) -> None:
    assert duration_text(seconds) == shown


async def test_the_restart_eta_is_the_median_of_the_targets_last_starts(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "flagbot.db")
    store.upgrade()
    async_store = AsyncStore(store)
    try:
        assert (await restart_eta_of(async_store, "lab")).text() == "ETA unknown: no earlier start"
        for seconds in (900.0, None, 840.0, 960.0):
            store.add(Snapshot(target="lab", startup_seconds=seconds))
        store.add(Snapshot(target="other", startup_seconds=10.0))
        eta = await restart_eta_of(async_store, "lab")
        assert eta == RestartEta(900.0, 3)
        assert eta.text() == "ETA ~15 min 00 s (median of the last 3 starts)"
    finally:
        await async_store.aclose()
