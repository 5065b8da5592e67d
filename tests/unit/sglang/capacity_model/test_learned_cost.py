"""A flag's workspace learned from two starts, and the prediction that uses it (issue 23, item 2).

The starts are the hand-written dense model of test_prediction.py: the start after a try
that added `--enable-fused-moe-sum-all-reduce` has a pool smaller by the flag's workspace.
"""

from __future__ import annotations

import pytest

from bot.sglang.capacity_model.applied_change import LearnedCost
from bot.sglang.capacity_model.arithmetic import learn_flag_cost
from bot.sglang.capacity_model.figures import GIB, StartFigures, Unknown
from bot.sglang.capacity_model.prediction import predict
from bot.sglang.change import Change
from bot.sglang.expectation import parse_expectation
from tests.unit.sglang.capacity_model.test_prediction import CELL, dense, figure

FUSED = "--enable-fused-moe-sum-all-reduce"
WORKSPACE_GIB = 9.24


def with_workspace(gib: float, **server_args: object) -> StartFigures:
    """The dense start with `gib` taken before the profile (its pool smaller by that much)."""
    tokens = int((56.0 - gib) * GIB) // CELL
    return dense(
        kv_tokens=tokens,
        kv_gib=tokens * CELL / GIB,
        max_total_num_tokens=tokens,
        server_args=dict(server_args),
    )


def test_a_flags_workspace_is_what_the_start_after_leaves_unexplained_beyond_the_start_before() -> None:
    cost = learn_flag_cost(dense(), with_workspace(WORKSPACE_GIB, enable_fused_moe_sum_all_reduce=True))
    assert not isinstance(cost, Unknown)
    assert cost == pytest.approx(WORKSPACE_GIB, abs=0.01)


def test_a_start_the_rules_cannot_explain_teaches_nothing() -> None:
    cost = learn_flag_cost(dense(version="0.4.0"), with_workspace(WORKSPACE_GIB))
    assert isinstance(cost, Unknown)


def test_an_unmodelled_flag_is_unknown_until_its_cost_is_learned_then_predicted_from_it() -> None:
    change = [Change("add", FUSED)]
    expectation = parse_expectation("max_total_num_tokens>=400000")
    unknown = predict(dense(), change, jitter_gib=0.0, expectations=[expectation])
    assert unknown.unknown is not None
    assert unknown.calls[0].call == "undecided"

    learned = {
        FUSED: LearnedCost(FUSED, WORKSPACE_GIB, "knowledge fact #3: measured by experiment #1 on lab")
    }
    known = predict(dense(), change, jitter_gib=0.0, expectations=[expectation], learned=learned)
    assert figure(known, "max_total_num_tokens").value == pytest.approx(
        int((56.0 - WORKSPACE_GIB) * GIB) // CELL, abs=2
    )
    assert known.calls[0].call == "fail"  # about 377,000 tokens: the whole band is below
    step = next(s for s in known.steps if s.name == f"workspace of {FUSED}")
    assert step.source == "knowledge fact #3: measured by experiment #1 on lab"
    assert "+9.24 GiB" in step.formula


def test_removing_a_learned_flag_frees_its_workspace_and_adding_one_already_on_moves_nothing() -> None:
    learned = {FUSED: LearnedCost(FUSED, WORKSPACE_GIB, "fact")}
    running = with_workspace(WORKSPACE_GIB, enable_fused_moe_sum_all_reduce=True)
    freed = predict(running, [Change("remove", FUSED)], jitter_gib=0.0, learned=learned)
    assert figure(freed, "max_total_num_tokens").value == pytest.approx(dense().max_total_num_tokens, abs=2)
    again = predict(running, [Change("add", FUSED)], jitter_gib=0.0, learned=learned)
    assert figure(again, "max_total_num_tokens").value == pytest.approx(running.max_total_num_tokens, abs=2)


def test_a_flag_measured_at_one_value_is_not_predicted_at_another() -> None:
    flag = "--moe-workspace-mb"
    learned = {flag: LearnedCost(flag, 2.0, "fact", value="512")}
    same = predict(dense(), [Change("add", flag, "512")], jitter_gib=0.0, learned=learned)
    assert same.unknown is None
    other = predict(dense(), [Change("add", flag, "1024")], jitter_gib=0.0, learned=learned)
    assert other.unknown == (
        f"the memory effect of {flag} at another value than the one its workspace was measured at is not modelled"
    )
