"""`bench rerun=ID` (issue 22, item 2): the request takes the experiment's stored after-set's
profile, levels and backend, compares with that set, and refuses words that contradict it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from bot.app.bench import BenchRequest, check_rerun, plan_bench, with_rerun
from bot.app.errors import AppError
from bot.commands import CommandError, parse_command
from bot.config.schema import Settings
from bot.store.bench_repo import load_set
from bot.store.experiments import get_experiment
from bot.store.loop_models import Experiment
from bot.store.models import MeasurementSet


def settings() -> Settings:
    return Settings.model_validate(
        {
            "default_target": "lab",
            "targets": {
                "lab": {"unit": "sglang.service", "base_url": "http://127.0.0.1:9", "nodes": [{"host": "h"}]},
                "other": {
                    "unit": "sglang.service",
                    "base_url": "http://127.0.0.1:9",
                    "nodes": [{"host": "h"}],
                },
            },
        }
    )


def request(words: str) -> BenchRequest:
    return BenchRequest.of(settings(), parse_command(words))


class FakeStore:
    def __init__(self, row: Experiment | None, after: Any) -> None:
        self.store = object()
        self.answers = {get_experiment: row, load_set: after}

    async def run(self, fn: Any, _store: Any, *_args: Any) -> Any:
        return self.answers[fn]


def ctx(row: Experiment | None, after: Any = None) -> Any:
    return SimpleNamespace(store=FakeStore(row, after), settings=settings())


def stored(after_set: int | None = 31) -> Experiment:
    return Experiment(
        id=42,
        target="lab",
        playbook="try",
        params={},
        status="succeeded",
        state={"schema_version": 2, "after": {"set_id": after_set}},
        actor="x",
    )


AFTER = SimpleNamespace(
    set=MeasurementSet(
        id=31, target="lab", profile="full", backend="builtin", params={"concurrency": [8, 64]}
    )
)


async def test_rerun_takes_the_after_sets_profile_levels_and_compares_with_it() -> None:
    asked = request("bench rerun=42 repeats=2")
    assert asked.rerun == 42 and asked.target is None  # the experiment's target, not the default
    final = await with_rerun(ctx(stored(), AFTER), asked)
    assert (final.target, final.profile, final.concurrency, final.backend) == (
        "lab",
        "full",
        (8, 64),
        "builtin",
    )
    assert final.compare_to == 31 and final.repeats == 2
    assert final.reference_name() == "set #31 (the after-set of experiment #42)"
    assert final.label == "re-run of experiment #42"
    setup = plan_bench(settings(), final)
    assert setup.plan.profile_name == "full" and setup.plan.concurrency == (8, 64)
    assert setup.steps(final.compare_to, final.compared_with)[-1] == (
        "compare with set #31 (the after-set of experiment #42)"
    )


@pytest.mark.parametrize("extra", ["profile=quick", "concurrency=1,2", "backend=builtin", "compare-to=3"])
def test_rerun_refuses_what_the_experiments_set_decides(extra: str) -> None:
    with pytest.raises(CommandError, match=r"rerun= re-runs the experiment's own benchmark.*drop"):
        check_rerun(request(f"bench rerun=42 {extra}"))


async def test_rerun_of_another_target_or_without_an_after_set_is_refused() -> None:
    with pytest.raises(AppError, match="ran on lab, not other"):
        await with_rerun(ctx(stored(), AFTER), request("bench rerun=42 target=other"))
    with pytest.raises(AppError, match="stored no after-set"):
        await with_rerun(ctx(stored(after_set=None)), request("bench rerun=42"))
    with pytest.raises(AppError, match="no experiment #42"):
        await with_rerun(ctx(None), request("bench rerun=42"))
    with pytest.raises(AppError, match="no longer stored"):
        await with_rerun(ctx(stored(), None), request("bench rerun=42"))
