"""The twin's silent hang per stage (`engine/hangs.py`): where the hung node and its peers stop,
read back with flagbot's own stall classification (`bot.target.stalls`), and how the fault and a
flag's effect reach a start."""

from __future__ import annotations

from typing import Any

import pytest

from bot.config.schema import TargetTimeouts
from bot.target.stalls import StallBounds, StallWatch, stage_of, step_of
from flagbot_lab.twin.engine.hangs import hang_step
from flagbot_lab.twin.engine.scenario import scenario_from_dict
from flagbot_lab.twin.engine.startup import Resolved, resolve
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_launch import pair_argv


def _resolve(node_rank: int, faults: dict[str, Any], *extra: str) -> Resolved:
    document = compile_scenario("seed-gb10")
    document["faults"] = {**document["faults"], **faults}
    scenario = scenario_from_dict(document)
    return resolve(pair_argv(scenario.launch, node_rank, *extra), scenario, start_seed=1, env={})


def _printed(node_rank: int, faults: dict[str, Any]) -> list[str]:
    """The messages this node prints before it goes silent (all of them if it never does)."""
    resolved = _resolve(node_rank, faults)
    hanging = resolved.hang_node in (None, node_rank)
    stop = hang_step(resolved.steps, resolved.hang_in, hanging=hanging)
    return [step.message for step in resolved.steps[: len(resolved.steps) if stop is None else stop]]


def _stage_reached(messages: list[str]) -> str:
    steps = [s for s in (step_of(m) for m in messages) if s is not None]
    return stage_of(max(steps, default=0))


@pytest.mark.parametrize(
    ("stage", "hung_last", "peer_stage"),
    [
        ("distributed_init", "sglang is using nccl==", "distributed_init"),
        ("weight_load", "Load weight begin.", "weight_load"),
        ("graph_capture", "Capture cuda graph begin", "graph_capture"),
    ],
)
def test_the_hung_node_stops_inside_its_stage_and_flagbot_names_it(
    stage: str, hung_last: str, peer_stage: str
) -> None:
    faults = {"hang_in": stage, "hang_node": 1}
    hung, peer = _printed(1, faults), _printed(0, faults)
    assert _stage_reached(hung) == stage and _stage_reached(peer) == peer_stage
    assert hung[-1].startswith(hung_last)
    # flagbot, fed both nodes' lines, names node 1 in that stage
    watch = StallWatch(StallBounds.from_timeouts(TargetTimeouts()), [("n0", 0), ("n1", 1)], at=0.0)
    for message in peer:
        watch.line("n0", message, 2.0)
    for message in hung:
        watch.line("n1", message, 1.0)
    stall = watch.stalled(10_000.0)
    assert stall is not None and (stall.node, stall.stage) == ("n1", stage)


def test_a_weight_load_hang_lets_the_peer_finish_its_own_load_and_wait() -> None:
    peer = _printed(0, {"hang_in": "weight_load", "hang_node": 1})
    assert any(m.startswith("Load weight end") for m in peer)
    assert not any(m.startswith("KV Cache is allocated") for m in peer)


def test_without_a_hang_every_step_is_printed_and_a_warmup_hang_is_node_0_s() -> None:
    plain = _resolve(1, {})
    assert hang_step(plain.steps, plain.hang_in, hanging=True) is None
    warm = _resolve(0, {"hang_in": "warmup"})
    assert warm.hang_during_warmup and hang_step(warm.steps, warm.hang_in, hanging=True) is None
    assert not _resolve(0, {"hang_in": "warmup", "hang_node": 1}).hang_during_warmup  # node 0 serves it


def test_a_flag_s_effect_hangs_only_the_start_that_has_the_flag() -> None:
    document = compile_scenario("seed-gb10")
    rule = next(r for r in document["flags"] if r["when"][0]["flag"] == "--enable-nccl-nvls")
    rule["effect"] = {**rule["effect"], "hang_during_warmup": False, "hang_in": "weight_load", "hang_node": 1}
    scenario = scenario_from_dict(document)
    argv = pair_argv(scenario.launch, 1)
    assert resolve(argv, scenario, start_seed=1, env={}).hang_in is None
    hung = resolve([*argv, "--enable-nccl-nvls"], scenario, start_seed=1, env={})
    assert (hung.hang_in, hung.hang_node) == ("weight_load", 1)
