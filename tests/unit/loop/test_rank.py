"""Ranking suspects: the seeds' case, gating, observations, implied flags, memory, probe order."""

from __future__ import annotations

from typing import Any

import pytest

from bot.loop.knowledge import KnowledgeBase
from bot.loop.rank import rank_hypotheses, rank_order
from bot.sglang.catalog import FlagCatalog
from bot.store.models import Snapshot
from tests.unit.loop.kb_support import Obs

AR = "--enable-flashinfer-allreduce-fusion"
MOE = "--enable-fused-moe-sum-all-reduce"
CATALOG = FlagCatalog.load("0.5.10")
SEED_FLAGS = [
    {"flag": "--model-path", "value": "/shared/models/Qwen3.5-122B-A10B"},
    {"flag": "--tp", "value": "2"},
    {"flag": "--speculative-algorithm", "value": "EAGLE"},
    {"flag": "--speculative-num-steps", "value": "3"},
]
PIECEWISE = {"disable_piecewise_cuda_graph": {"value": True, "was": False, "source": "default"}}


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return KnowledgeBase.load()


def snap(
    extra: list[dict[str, Any]] | None = None,
    *,
    mrr: int = 48,
    tokens: int = 1833679,
    cc: str = "12.1",
    implied: dict[str, Any] | None = None,
    flags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "requested_flags": [*(flags if flags is not None else SEED_FLAGS), *(extra or [])],
        "implied": PIECEWISE if implied is None else implied,
        "server_args": {"mem_fraction_static": 0.856},
        "effective": {
            "max_running_requests": mrr,
            "max_total_num_tokens": tokens,
            "available_gpu_mem_gb": 13.26,
            "gpus": {"node0": [{"name": "NVIDIA GB10", "compute_cap": cc}], "node1": [{"compute_cap": cc}]},
        },
    }


BASELINE = snap()
SEEDS = snap([{"flag": AR, "value": None}, {"flag": MOE, "value": None}], mrr=26)


def test_the_seeds_case_ranks_fused_moe_sum_above_the_gated_allreduce_fusion(kb: KnowledgeBase) -> None:
    proposals = rank_hypotheses(BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb, catalog=CATALOG)
    assert [p.variable for p in proposals] == [MOE, AR]
    top, second = proposals
    assert top.statement == f"adding {MOE} lowers max_running_requests (48 -> 26)"
    assert top.experiment == {
        "playbook": "try",
        "changes": [f"remove {MOE}"],
        "metric": "max_running_requests",
    }
    assert any(
        "unknown capacity" in reason and "fused_moe_triton/fused_moe.py" in reason for reason in top.why
    )
    assert any("probably a no-op here" in reason for reason in second.why)
    assert top.score > second.score
    assert rank_order([AR, MOE], proposals) == [MOE, AR]
    assert top.to_json()["kind"] == "flag"


def test_gating_is_what_lowers_the_allreduce_fusion_on_this_gpu(kb: KnowledgeBase) -> None:
    hopper = snap([{"flag": AR, "value": None}, {"flag": MOE, "value": None}], mrr=26, cc="9.0")
    on_gb10 = {
        p.variable: p for p in rank_hypotheses(BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb)
    }
    on_h100 = {
        p.variable: p
        for p in rank_hypotheses(snap(cc="9.0"), hopper, regressed=["max_running_requests"], kb=kb)
    }
    assert on_h100[AR].score > on_gb10[AR].score
    assert not any("probably a no-op" in reason for reason in on_h100[AR].why)
    assert any("can act on this GPU (compute capability 9.0)" in reason for reason in on_h100[AR].why)


def test_observations_can_overturn_the_order(kb: KnowledgeBase) -> None:
    seen = [
        Obs(AR, "capacity-lowered", "isolate found it: max_running_requests 48 -> 26"),
        Obs(AR, "effect", "max_running_requests dropped again"),
        Obs(MOE, "not-culprit", "removing it did not bring 48 back"),
    ]
    proposals = rank_hypotheses(BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb, observations=seen)
    assert [p.variable for p in proposals] == [AR, MOE]
    assert any(reason.startswith("observed 2026-03-09 on twin") for reason in proposals[0].why)
    elsewhere = [Obs(AR, "capacity-lowered", "on an H100", compute_capability="9.0")]
    same = [Obs(AR, "capacity-lowered", "on a GB10")]
    far = {
        p.variable: p.score
        for p in rank_hypotheses(
            BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb, observations=elsewhere
        )
    }
    near = {
        p.variable: p.score
        for p in rank_hypotheses(
            BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb, observations=same
        )
    }
    assert near[AR] > far[AR]


def test_an_implied_flag_that_appeared_is_a_suspect_with_an_isolate_experiment(kb: KnowledgeBase) -> None:
    plain = [{"flag": "--model-path", "value": "/m"}, {"flag": "--tp", "value": "2"}]
    before = snap(flags=plain, implied={})
    after = snap([{"flag": "--enable-dp-attention", "value": None}], flags=plain, implied=PIECEWISE, mrr=40)
    proposals = rank_hypotheses(before, after, regressed=["max_running_requests"], kb=kb, catalog=CATALOG)
    implied = next(p for p in proposals if p.kind == "implied")
    assert implied.variable == "--disable-piecewise-cuda-graph"
    assert implied.why[0].startswith("SGLang set disable_piecewise_cuda_graph=True itself")
    assert implied.experiment["playbook"] == "isolate" and implied.experiment["flags"] == [
        "--enable-dp-attention"
    ]
    assert proposals[0].variable == "--enable-dp-attention"  # the knowledge base: it lowers capacity
    unchanged = rank_hypotheses(BASELINE, SEEDS, regressed=["max_running_requests"], kb=kb)
    assert not any(p.kind == "implied" for p in unchanged)


def test_memory_that_moved_is_a_suspect_and_jitter_is_not(kb: KnowledgeBase) -> None:
    shrunk = snap([{"flag": MOE, "value": None}], mrr=26, tokens=1_500_000)
    moved = rank_hypotheses(BASELINE, shrunk, regressed=["max_running_requests"], kb=kb)
    memory = next(p for p in moved if p.variable == "memory")
    assert "max_total_num_tokens 1833679 -> 1500000" in memory.why[0]
    jitter = snap([{"flag": MOE, "value": None}], mrr=26, tokens=1_830_000)
    assert not any(
        p.variable == "memory"
        for p in rank_hypotheses(BASELINE, jitter, regressed=["max_running_requests"], kb=kb)
    )


def test_changed_and_removed_flags_and_store_rows(kb: KnowledgeBase) -> None:
    before = Snapshot(
        **snap(
            [{"flag": "--mem-fraction-static", "value": "0.85"}, {"flag": "--enable-metrics", "value": None}]
        )
    )
    after = Snapshot(**snap([{"flag": "--mem-fraction-static", "value": "0.80"}], mrr=40))
    proposals = rank_hypotheses(before, after, regressed=["max_running_requests"], kb=kb, catalog=CATALOG)
    by = {p.variable: p for p in proposals}
    assert by["--mem-fraction-static"].statement.startswith(
        "changing --mem-fraction-static from 0.85 to 0.80"
    )
    assert by["--mem-fraction-static"].experiment["changes"] == ["set --mem-fraction-static=0.85"]
    assert by["--enable-metrics"].experiment["changes"] == ["add --enable-metrics"]
    assert any("not in the knowledge base" in reason for reason in by["--enable-metrics"].why)
    assert proposals[0].variable == "--mem-fraction-static"


def test_a_speed_metric_uses_speed_effects_and_rank_order_keeps_unknown_flags_last(kb: KnowledgeBase) -> None:
    proposals = rank_hypotheses(BASELINE, SEEDS, regressed=["output_throughput"], kb=kb)
    assert all(any(reason.startswith("knowledge base: speed") for reason in p.why) for p in proposals)
    assert rank_order(["--zzz", AR, MOE], proposals)[-1] == "--zzz"
    assert rank_order(["--a", "--b"], []) == ["--a", "--b"]


def test_a_field_that_differs_only_from_another_releases_default_is_no_suspect(kb: KnowledgeBase) -> None:
    plain = [{"flag": "--model-path", "value": "/m"}, {"flag": "--tp", "value": "2"}]
    release = {
        "lora_backend": {
            "value": "triton",
            "was": "csgmv",
            "source": "default",
            "default_from": "SGLang 0.5.9 list",
            "same_release": False,
        }
    }
    before = snap(flags=plain, implied={})
    after = snap([{"flag": "--enable-dp-attention", "value": None}], flags=plain, implied=release, mrr=40)
    proposals = rank_hypotheses(before, after, regressed=["max_running_requests"], kb=kb, catalog=CATALOG)
    assert [p.kind for p in proposals if p.kind == "implied"] == []
    same = {"lora_backend": {**release["lora_backend"], "same_release": True}}
    after_same = snap([{"flag": "--enable-dp-attention", "value": None}], flags=plain, implied=same, mrr=40)
    proposals = rank_hypotheses(
        before, after_same, regressed=["max_running_requests"], kb=kb, catalog=CATALOG
    )
    assert [p.variable for p in proposals if p.kind == "implied"] == ["--lora-backend"]
