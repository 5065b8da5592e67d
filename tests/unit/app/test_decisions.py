"""Buttons fit the outcome (issue 22, item 2): per outcome x button, whether the finished card
offers it, which one is primary, and the command a click sends (`bot.app.decisions`)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from bot.app.decisions import button_command, decision_pending, next_actions
from bot.app.errors import AppError
from bot.config.verdicts import Verdicts
from bot.slack.card import CardState, status_card
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment
from bot.store.snapshots import get_snapshot

TWO_FLAGS = [{"op": "add", "flag": "--enable-a"}, {"op": "add", "flag": "--enable-b"}]


def experiment(
    playbook: str = "try",
    *,
    status: str = "succeeded",
    verdict: str | None = "regressed",
    kept: bool | None = None,
    applied: bool = True,
    start_failed: bool = False,
    rolled_back: bool = False,
    restored: bool = False,
    after_set: int | None = 31,
    changes: list[dict[str, Any]] | None = None,
    dry_run: bool = False,
    expectations: list[dict[str, Any]] | None = None,
    extra: dict[str, Any] | None = None,
) -> Experiment:
    state: dict[str, Any] = {
        "schema_version": 2,
        "before": {"snapshot_id": 5, "set_id": 30},
        "after": {"snapshot_id": 6, "set_id": after_set},
        "restart": {
            "applied": applied,
            "start_failed": start_failed,
            "rolled_back": rolled_back,
            "restored": restored,
        },
        "conclusion": {"verdict": verdict, "kept": kept, "expectations": expectations or []},
        **(extra or {}),
    }
    return Experiment(
        id=7,
        target="gb10",
        playbook=playbook,
        params={"changes": TWO_FLAGS if changes is None else changes, "dry_run": dry_run},
        status=status,
        verdict=verdict,
        state=state,
        actor="slack:U1",
    )


ONE_FLAG = [{"op": "add", "flag": "--enable-a"}]


def stopped_by_prediction() -> Experiment:
    """A try its preflight stopped before the restart: an expectation predicted to fail."""
    row = experiment(
        status="failed",
        verdict="predicted-fail",
        applied=False,
        changes=[
            {"op": "add", "flag": "--enable-fused-moe-sum-all-reduce"},
            {"op": "set", "flag": "--mem-fraction-static", "value": "0.85"},
        ],
        extra={"prediction": {"stopped": "predicted to fail before any restart: …"}},
    )
    row.params = {**row.params, "expect": ["max_running_requests>=48"], "because": "more room"}
    return row


OUTCOMES: dict[str, Callable[[], Experiment]] = {
    "try regressed+reverted": lambda: experiment(kept=False),
    "try regressed+reverted, one flag": lambda: experiment(kept=False, changes=ONE_FLAG),
    "try regressed+kept (keep=always)": lambda: experiment(kept=True),
    "try improved kept": lambda: experiment(verdict="improved", kept=True),
    "try no-effect kept": lambda: experiment(verdict="no-effect", kept=True),
    "try undecided (kept by auto)": lambda: experiment(verdict="inconclusive", kept=True),
    "try pending decision (regressed)": lambda: experiment(kept=None),
    "try pending decision (undecided)": lambda: experiment(verdict="inconclusive", kept=None),
    "try failed before restart": lambda: experiment(status="failed", verdict=None, applied=False),
    "try failed start, rolled back": lambda: experiment(
        status="rolled-back", verdict="failed-to-start", start_failed=True, rolled_back=True
    ),
    "dry run": lambda: experiment(verdict=None, applied=False, dry_run=True),
    "baseline": lambda: experiment("baseline", verdict=None, applied=False, changes=[]),
    "verify": lambda: experiment("verify", verdict="fail", applied=False, changes=[]),
    "revert": lambda: experiment(
        "revert", verdict="pass", changes=[], extra={"plan": {"reverting_experiment": 3}}
    ),
    "isolate": lambda: experiment(
        "isolate", verdict="found", changes=[], restored=False, extra={"isolate": {"status": "found"}}
    ),
    "try still running": lambda: experiment(status="running", verdict=None),
    "try stopped by its prediction": lambda: stopped_by_prediction(),
}
EXPECTED: dict[str, tuple[tuple[str, ...], str | None]] = {
    "try regressed+reverted": (("isolate",), None),
    "try regressed+reverted, one flag": ((), None),
    "try regressed+kept (keep=always)": (("revert", "rerun", "isolate"), None),
    "try improved kept": (("revert", "rerun"), None),
    "try no-effect kept": (("revert", "rerun"), None),
    "try undecided (kept by auto)": (("revert", "rerun"), None),
    "try pending decision (regressed)": (("revert", "keep", "rerun", "isolate"), "revert"),
    "try pending decision (undecided)": (("revert", "keep", "rerun"), None),
    "try failed before restart": ((), None),
    "try failed start, rolled back": ((), None),
    "dry run": ((), None),
    "baseline": ((), None),
    "verify": ((), None),
    "revert": ((), None),
    "isolate": ((), None),
    "try still running": ((), None),
    "try stopped by its prediction": (("force",), None),
}
BUTTONS = ("revert", "keep", "rerun", "isolate", "force")


@pytest.mark.parametrize("outcome", list(OUTCOMES))
@pytest.mark.parametrize("button", BUTTONS)
def test_each_button_is_offered_only_where_it_means_something(outcome: str, button: str) -> None:
    row = OUTCOMES[outcome]()
    chosen = next_actions(row)
    actions, primary = EXPECTED[outcome]
    assert (button in chosen.actions) == (button in actions), (outcome, button, chosen)
    assert chosen.primary == primary
    assert chosen.actions == actions
    assert decision_pending(row) == ("keep" in actions)
    # Keep is never the primary (green) button, least of all after a regression
    assert chosen.primary != "keep"
    # the card shows exactly these, Keep never green; Cancel only while it runs
    card = CardState(7, row.playbook, row.target, "U1", "x", status=row.status)
    card.next_actions, card.primary_action = chosen.actions, chosen.primary
    blocks, _ = status_card(card)
    elements = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    shown = {e["action_id"].removeprefix("flagbot_"): e.get("style") for e in elements}
    if row.status == "running":
        assert list(shown) == ["cancel"]
    else:
        assert (button in shown) == (button in actions)
        assert "cancel" not in shown
        if button in shown:
            assert shown[button] == ("primary" if button == primary else None)


class FakeStore:
    """What `AsyncStore.run` answers for the functions `bot.app.decisions` calls."""

    def __init__(self, row: Experiment, snapshot: Any = None, comparison: Any = None) -> None:
        self.store = object()
        self.answers: dict[Any, Any] = {get_experiment: row, get_snapshot: snapshot}
        self.comparison = comparison

    async def run(self, fn: Any, _store: Any, *_args: Any) -> Any:
        if fn in self.answers:
            return self.answers[fn]
        return self.comparison


def ctx_for(row: Experiment, *, snapshot: Any = None, comparison: Any = None) -> Any:
    return SimpleNamespace(
        store=FakeStore(row, snapshot, comparison), settings=SimpleNamespace(verdicts=Verdicts())
    )


def capacity_snapshot(value: int) -> dict[str, Any]:
    return {"effective": {"max_running_requests": value}}


async def test_rerun_sends_a_bench_rerun_of_that_experiment_on_its_target() -> None:
    row = experiment(kept=True)
    assert await button_command(ctx_for(row), 7, "rerun") == "bench rerun=7 target=gb10"
    assert await button_command(ctx_for(row), 7, "revert") == "revert 7 target=gb10"
    assert await button_command(ctx_for(row), 7, "cancel") == "cancel 7 target=gb10"
    assert await button_command(ctx_for(row), 7, "keep") is None


async def test_restart_anyway_sends_the_same_try_with_force_yes() -> None:
    row = stopped_by_prediction()
    assert await button_command(ctx_for(row), 7, "force") == (
        "try add --enable-fused-moe-sum-all-reduce set --mem-fraction-static 0.85 "
        "'max_running_requests>=48' 'because=more room' force=yes target=gb10"
    )


async def test_a_button_that_no_longer_fits_is_refused() -> None:
    row = experiment(kept=False)  # reverted: nothing to revert or re-run
    for action in ("revert", "rerun"):
        with pytest.raises(AppError, match=f"offers no {action}"):
            await button_command(ctx_for(row), 7, action)


async def test_isolate_uses_the_expectation_that_failed() -> None:
    row = experiment(
        kept=False,
        expectations=[
            {"expectation": "max_running_requests>=40", "outcome": "pass"},
            {"expectation": "output_throughput>=-3%", "outcome": "fail"},
        ],
    )
    words = await button_command(ctx_for(row), 7, "isolate")
    assert words == "isolate output_throughput>=-3% since=7 target=gb10"


async def test_isolate_uses_the_throughput_metric_that_decided_the_regression() -> None:
    row = experiment(kept=False, extra={"conclusion": {"verdict": "regressed", "comparison_id": 4}})
    comparison = (SimpleNamespace(guarded_by="output_throughput@c=32"), None)
    words = await button_command(ctx_for(row, comparison=comparison), 7, "isolate")
    assert words == "isolate output_throughput>=-3% since=7 target=gb10"
    latency = (SimpleNamespace(guarded_by="median_ttft_ms@c=32"), None)
    words = await button_command(ctx_for(row, comparison=latency), 7, "isolate")
    assert words == "isolate median_ttft_ms<=+3% since=7 target=gb10"


async def test_isolate_of_a_capacity_regression_checks_the_capacity_before() -> None:
    row = experiment(kept=False, extra={"conclusion": {"verdict": "regressed", "comparison_id": 4}})
    comparison = (SimpleNamespace(guarded_by="max_running_requests"), None)
    ctx = ctx_for(row, snapshot=capacity_snapshot(48), comparison=comparison)
    assert await button_command(ctx, 7, "isolate") == "isolate max_running_requests>=48 since=7 target=gb10"
