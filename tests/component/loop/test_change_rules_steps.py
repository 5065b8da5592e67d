"""The change rules in the domain (bot/loop/steps): the `try` playbook's preflight refuses a
protected flag or a refused variable before its dry run, and `apply` refuses a write that changes
one, whichever step planned it (a revert, a site's own action). On the real steps, the target
layer faked (tests/support/loop_fake_target.py), a real store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.loop.actions import StepContext, action, unregister
from bot.loop.engine import Engine
from bot.loop.playbook import Playbook, load_playbook
from bot.loop.report import MemoryReporter
from bot.loop.steps import analysis_steps
from bot.sglang.flagset import FlagItem, FlagSet
from bot.store import AsyncStore
from tests.support.loop_fake_target import START_FLAGS, TARGET, faked_target, settings

MODEL = FlagItem("--model-path", "/models/other")


@pytest.fixture
def planner() -> Iterator[dict[str, Any]]:
    """`t_plan`: a step of a site's own playbook that plans the flags and environment it is told."""
    wanted: dict[str, Any] = {"flags": START_FLAGS, "env": {}}

    @action("t_plan", summary="plan the flags and environment the test gives")
    async def t_plan(ctx: StepContext) -> dict[str, Any]:
        ctx.state.plan.flags = wanted["flags"]
        ctx.state.plan.env = dict(wanted["env"])
        return {}

    try:
        yield wanted
    finally:
        unregister("t_plan")


def plan_and_apply(tmp_path: Path) -> Playbook:
    path = tmp_path / "plan_apply.yaml"
    path.write_text(
        "name: plan_apply\ndescription: plan, then write\nmutating: true\n"
        "steps: [{action: t_plan}, {action: apply}]\n",
        encoding="utf-8",
    )
    return load_playbook(path)


def failure(outcome: Any) -> tuple[str, str]:
    """The step that failed and what it said."""
    failed = next(step for step in outcome.steps if step["status"] == "failed")
    return failed["action"], str(failed.get("error") or failed.get("result"))


async def run_try(tmp_path: Path, store: AsyncStore, changes: list[dict[str, Any]], *, admin: bool) -> Any:
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    params = {"changes": changes, "dry_run": True}
    return await engine.run("try", params, target=TARGET, actor="slack:U_OP", admin=admin)


async def test_try_s_preflight_refuses_a_protected_flag_before_its_dry_run(
    tmp_path: Path, store: AsyncStore
) -> None:
    asked: list[object] = []
    with faked_target(store.store) as target:
        real_preflight = target.preflight

        async def preflight(ts: Any, **kwargs: Any) -> Any:
            asked.append(kwargs["changes"])
            return await real_preflight(ts, **kwargs)

        setattr(analysis_steps, "run_preflight", preflight)  # noqa: B010 (faked_target restores it)
        change = {"op": "add", "flag": "--model-path", "value": "/models/other"}
        refused = await run_try(tmp_path, store, [change], admin=False)
        assert refused.status == "failed"
        step, said = failure(refused)
        assert step == "preflight"
        assert (
            "`--model-path` is a protected flag of target lab (policy.protected_flags): only an admin" in said
        )
        assert asked == [] and target.restarts == []  # the dry run never ran, nothing was written

        allowed = await run_try(tmp_path, store, [change], admin=True)
        assert (allowed.status, allowed.verdict) == ("succeeded", "dry-run")
        assert len(asked) == 1 and target.restarts == []


async def test_try_s_preflight_refuses_a_start_up_variable_for_admins_too(
    tmp_path: Path, store: AsyncStore
) -> None:
    with faked_target(store.store) as target:
        change = {"op": "env-set", "name": "LD_PRELOAD", "value": "/tmp/x.so"}
        refused = await run_try(tmp_path, store, [change], admin=True)
        step, said = failure(refused)
        assert (refused.status, step) == ("failed", "preflight")
        assert "LD_PRELOAD changes how a process starts (sudo's env_delete: LD_*)" in said
        assert target.restarts == []


async def test_apply_refuses_a_planned_protected_flag_for_an_operator_and_writes_it_for_an_admin(
    tmp_path: Path, store: AsyncStore, planner: dict[str, Any]
) -> None:
    planner["flags"] = FlagSet((*START_FLAGS.items, MODEL))
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    with faked_target(store.store) as target:
        refused = await engine.run(plan_and_apply(tmp_path), {}, target=TARGET, actor="slack:U_OP")
        step, said = failure(refused)
        assert (refused.status, step) == ("failed", "apply")
        assert "`--model-path` is a protected flag of target lab" in said
        assert target.restarts == []

        done = await engine.run(plan_and_apply(tmp_path), {}, target=TARGET, actor="slack:U_AD", admin=True)
        assert done.status == "succeeded"
        assert target.restarts == [FlagSet((*START_FLAGS.items, MODEL))]


async def test_apply_refuses_a_planned_variable_outside_the_allow_list(
    tmp_path: Path, store: AsyncStore, planner: dict[str, Any]
) -> None:
    planner["env"] = {"PYTHONPATH": "/tmp/evil"}
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    with faked_target(store.store) as target:
        refused = await engine.run(
            plan_and_apply(tmp_path), {}, target=TARGET, actor="slack:U_AD", admin=True
        )
        step, said = failure(refused)
        assert (refused.status, step) == ("failed", "apply")
        assert "PYTHONPATH changes how a process starts (python3 --help-env: PYTHONPATH)" in said
        assert target.restarts == []
        planner["env"] = {"NCCL_DEBUG": "INFO"}
        done = await engine.run(plan_and_apply(tmp_path), {}, target=TARGET, actor="slack:U_OP")
        assert done.status == "succeeded" and target.restarts == [START_FLAGS]


async def test_a_plan_that_differs_only_in_node_rank_is_no_change_of_it(
    tmp_path: Path, store: AsyncStore, planner: dict[str, Any]
) -> None:
    """Every write sets each node's own `--node-rank`, so a plan's is no change an operator makes."""
    planner["flags"] = FlagSet((*START_FLAGS.items, FlagItem("--node-rank", "0")))
    engine = Engine(settings(tmp_path), store, MemoryReporter(), cache_dir=tmp_path / "cache")
    with faked_target(store.store) as target:
        done = await engine.run(plan_and_apply(tmp_path), {}, target=TARGET, actor="slack:U_OP")
        assert done.status == "succeeded" and len(target.restarts) == 1
