"""The capacity model fed from the store: a learned workspace is reused on any target with the same
model, GPU, tensor parallelism and SGLang release, with its provenance, and never on a guess."""

from __future__ import annotations

from typing import Any

from bot.loop.capacity import (
    MEMORY_COST,
    StartIdentity,
    cost_detail,
    explicit_keys,
    figures_of,
    free_memory_history,
    identity_of,
    learned_costs,
)
from bot.store.loop_models import KnowledgeObservation
from bot.store.models import Snapshot
from tests.unit.app.test_predict import snapshot

FUSED = "--enable-fused-moe-sum-all-reduce"
MODEL = "/shared/models/Qwen3.5-122B-A10B"
GB10 = "NVIDIA GB10"
HERE = StartIdentity(model=MODEL, gpu=GB10, tp_size=2, version="0.5.10")


def cost(
    ident: int, gib: float, *, target: str = "lab", identity: StartIdentity = HERE, **changes: Any
) -> KnowledgeObservation:
    row = KnowledgeObservation(
        id=ident,
        flag=FUSED,
        kind=MEMORY_COST,
        text="…",
        target=target,
        gpu_name=identity.gpu,
        sglang_version=identity.version,
        experiment_id=ident * 10,
        detail=cost_detail(identity, gib, 1, 2),
    )
    for name, value in changes.items():
        setattr(row, name, value)
    return row


def test_a_cost_measured_on_one_target_is_used_on_another_with_the_same_model_gpu_and_release() -> None:
    found = learned_costs([cost(4, 9.24, target="seeds-a")], HERE)
    assert found[FUSED].gib == 9.24
    assert found[FUSED].source == (
        f"knowledge fact #4: measured by experiment #40 on seeds-a ({MODEL} on {GB10} (tp 2), SGLang 0.5.10)"
    )


def test_the_newest_measurement_wins() -> None:
    assert learned_costs([cost(9, 9.3), cost(4, 9.24)], HERE)[FUSED].gib == 9.3


def test_a_cost_of_another_gpu_release_tp_or_model_is_not_used() -> None:
    others = [
        cost(1, 9.0, gpu_name="NVIDIA H200"),
        cost(2, 9.0, sglang_version="0.5.23"),
        cost(3, 9.0, identity=StartIdentity(MODEL, GB10, 4, "0.5.10")),
        cost(5, 9.0, identity=StartIdentity("/models/other", GB10, 2, "0.5.10")),
        cost(6, 9.0, kind="capacity-lowered"),
    ]
    assert learned_costs(others, HERE) == {}


def test_nothing_is_reused_where_the_gpu_or_model_is_not_known() -> None:
    unknown_gpu = StartIdentity(MODEL, None, 2, "0.5.10")
    assert learned_costs([cost(4, 9.24, identity=unknown_gpu)], unknown_gpu) == {}


def test_a_starts_identity_is_its_model_path_first_gpu_tp_and_release() -> None:
    snapshot = Snapshot(
        target="lab",
        node="node0",
        sglang_version="0.5.10",
        server_args={"model_path": MODEL, "tp_size": 2},
        effective={"gpus": {"node0": [{"name": GB10, "compute_cap": "12.1"}]}},
    )
    assert identity_of(snapshot) == HERE


def test_the_launch_lines_flags_are_the_explicit_server_args_keys() -> None:
    assert explicit_keys([{"flag": "--mem-fraction-static"}, {"flag": "--max-running-requests"}]) == {
        "mem_fraction_static",
        "max_running_requests",
    }


def test_a_stored_start_becomes_the_models_input_with_its_gpu_memory() -> None:
    figures = figures_of(snapshot())
    assert figures.pre_model_load_gib == 80.0
    assert figures.gpu_total_mib == 81559.0
    assert "mem_fraction_static" in figures.explicit


def test_the_jitter_history_keeps_starts_of_the_same_release_and_weights_only() -> None:
    last = snapshot(80.0)
    history = [
        last,
        snapshot(80.1),
        snapshot(70.0, weight=30.0),
        snapshot(79.0, version="0.5.9"),
        snapshot(figures=False),
    ]
    assert free_memory_history(history, last) == [80.0, 80.1]


def test_the_value_a_cost_was_measured_at_comes_back_with_it() -> None:
    row = cost(4, 2.0)
    row.detail = cost_detail(HERE, 2.0, 1, 2, value=("a", "b"))
    assert learned_costs([row], HERE)[FUSED].value == ("a", "b")
