"""The run's typed state: its JSON with a schema version, and schema 1 (the flat dict) converted."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from bot.loop.run_state import (
    RUN_STATE_SCHEMA_VERSION,
    Conclusion,
    PreflightFacts,
    RankedProposal,
    RunState,
    RunStateError,
)
from bot.sglang.flagset import FlagItem, FlagSet

INTENDED = [{"flag": "--tp-size", "value": "2"}, {"flag": "--enable-metrics", "value": None}]
BEFORE = [{"flag": "--tp-size", "value": "2"}, {"flag": "--cuda-graph-bs", "value": ["1", "2", "4"]}]
PROPOSAL = {
    "variable": "--enable-metrics",
    "kind": "flag",
    "statement": "adding --enable-metrics lowers max_running_requests (48 -> 26)",
    "why": ["the knowledge base says it costs memory"],
    "score": 1.3,
    "experiment": {"playbook": "try", "changes": ["remove --enable-metrics"]},
}
ISOLATE = {
    "status": "found",
    "culprits": ["--enable-metrics"],
    "suspects": ["--enable-metrics"],
    "final": ["--x"],
    "final_verified": True,
    "message": "found",
    "probe_count": 1,
    "probes": [{"index": 1, "applied": ["--x"], "passed": True, "note": "half"}],
}

SCHEMA_1: dict[str, Any] = {
    "intended_flags": INTENDED,
    "intended_env": {"NCCL_DEBUG": "INFO"},
    "preflight": {"ok": True, "gpus": {"n0": [{"index": 0}]}, "gpus_read_at": 1700000000.5, "warnings": []},
    "hypothesis_id": 3,
    "before_flags": BEFORE,
    "before_env": {},
    "before_snapshot_id": 11,
    "before_set_id": 21,
    "baseline_id": 2,
    "applied": True,
    "previous_invocations": {"node0": "inv-1", "node1": None},
    "after_snapshot_id": 12,
    "after_invocation": "inv-2",
    "after_set_id": 22,
    "comparison_id": 5,
    "verdict": "regressed",
    "summary": "regressed: capacity 48 -> 26",
    "proposals": [PROPOSAL],
    "kept": False,
    "start_failed": False,
    "rolled_back": False,
    "fatal_line": None,
    "failure_reason": None,
    "restored": True,
    "reference_snapshot_id": 13,
    "reference_set_id": 23,
    "reference_summary": {"levels": [{"concurrency": 8, "output_throughput": 100.0}]},
    "failed_metrics": ["max_running_requests"],
    "reverting_experiment": 7,
    "isolate": ISOLATE,
    "culprits": ["--enable-metrics"],
}
"""Every key main's built-in steps wrote (31), with values of the types they wrote."""


def test_every_key_of_schema_1_has_its_field() -> None:
    state = RunState.load(SCHEMA_1)
    assert state.plan.flags == FlagSet((FlagItem("--tp-size", "2"), FlagItem("--enable-metrics")))
    assert (state.plan.env, state.plan.reverting_experiment) == ({"NCCL_DEBUG": "INFO"}, 7)
    assert state.preflight is not None
    assert (state.preflight.gpus, state.preflight.gpus_read_at) == ({"n0": [{"index": 0}]}, 1700000000.5)
    assert state.preflight.report == SCHEMA_1["preflight"]  # the whole report is kept
    assert (state.hypothesis_id, state.baseline_id) == (3, 2)
    assert state.before.flags is not None and state.before.flags.to_json() == BEFORE  # multi-value kept
    assert (state.before.env, state.before.snapshot_id, state.before.set_id) == ({}, 11, 21)
    assert (state.after.snapshot_id, state.after.set_id, state.after.invocation) == (12, 22, "inv-2")
    assert (state.reference.snapshot_id, state.reference.set_id) == (13, 23)
    assert state.reference.summary == SCHEMA_1["reference_summary"]
    restart = state.restart
    assert restart.applied and restart.restored and not restart.start_failed and not restart.rolled_back
    assert restart.previous_invocations == {"node0": "inv-1", "node1": None}
    assert (restart.fatal_line, restart.failure_reason) == (None, None)
    assert state.conclusion == Conclusion(
        verdict="regressed",
        summary="regressed: capacity 48 -> 26",
        comparison_id=5,
        failed_metrics=["max_running_requests"],
        kept=False,
        proposals=[RankedProposal.model_validate(PROPOSAL)],
    )
    assert state.isolate is not None and state.isolate.model_dump(mode="json", exclude_unset=True) == ISOLATE
    # an old outcome's probes cite no snapshot: learn_isolate treats them as not measured (issue 18)
    assert state.isolate.probes[0].snapshot_id is None and state.isolate.failing_snapshot_id is None
    assert (state.other_set_ids, state.custom) == ({}, {})


def test_a_schema_1_state_dumps_in_the_new_shape_and_reads_back_the_same() -> None:
    state = RunState.load(SCHEMA_1)
    stored = state.dump()
    assert stored["schema_version"] == RUN_STATE_SCHEMA_VERSION == 2
    assert RunState.load(stored) == state
    assert stored["plan"]["flags"] == INTENDED  # type: ignore[index,call-overload]  # flag sets as FlagSet.to_json()


def test_schema_1_keys_of_other_actions_and_measure_labels_are_kept() -> None:
    state = RunState.load({"notes": ["a"], "changed": True, "warmup_set_id": 9, "probe_set_id": None})
    assert state.custom == {"notes": ["a"], "changed": True}  # a plugin's keys, as they were
    assert state.other_set_ids == {"warmup": 9}  # `measure label=warmup`


def test_schema_1_flags_read_for_their_truth_become_bools_and_empty_values_defaults() -> None:
    state = RunState.load(
        {
            "applied": 1,
            "rolled_back": None,
            "previous_invocations": None,
            "proposals": None,
            "failed_metrics": None,
        }
    )
    assert state.restart.applied is True and state.restart.rolled_back is False
    assert (
        state.restart.previous_invocations,
        state.conclusion.proposals,
        state.conclusion.failed_metrics,
    ) == (
        {},
        [],
        [],
    )
    assert RunState.load({}) == RunState() == RunState.load(None)


def test_preflight_gpu_facts_of_the_wrong_type_are_no_gpu_facts_as_before() -> None:
    state = RunState.load({"preflight": {"gpus": "?", "gpus_read_at": "soon"}})
    assert state.preflight is not None and (state.preflight.gpus, state.preflight.gpus_read_at) == (
        None,
        None,
    )


def test_culprits_without_an_isolate_record_still_name_the_culprits() -> None:
    state = RunState.load({"culprits": ["--x"]})
    assert state.isolate is not None and state.isolate.culprits == ["--x"]


def test_a_newer_schema_or_an_unreadable_state_is_refused() -> None:
    with pytest.raises(RunStateError, match="newer flagbot"):
        RunState.load({"schema_version": 3})
    with pytest.raises(RunStateError, match="schema 2"):
        RunState.load({"schema_version": 2, "plan": {"flags": "--x"}})
    with pytest.raises(RunStateError, match="schema 1"):
        RunState.load({"before_snapshot_id": "eleven"})
    with pytest.raises(RunStateError, match="schema 2"):
        RunState.load({"schema_version": 2, "no_such_field": 1})


def test_a_state_that_is_not_json_is_refused_when_dumped() -> None:
    state = RunState()
    state.custom["handle"] = object()  # type: ignore[assignment]
    with pytest.raises(RunStateError, match="not JSON"):
        state.dump()


def test_fields_are_checked_on_assignment() -> None:
    state = RunState()
    with pytest.raises(ValidationError, match="snapshot_id"):
        state.after.snapshot_id = "twelve"  # type: ignore[assignment]
    state.plan.flags = FlagSet((FlagItem("--x", "1"),))
    assert state.dump()["plan"]["flags"] == [{"flag": "--x", "value": "1"}]  # type: ignore[index,call-overload]


def test_measure_labels_name_their_start() -> None:
    state = RunState()
    assert state.start("before") is state.before and state.start("after") is state.after
    assert state.start("reference") is state.reference and state.start("warmup") is None


def test_open_json_values_are_kept_as_storing_them_makes_them() -> None:
    """As the old dict state was (a JSON round trip at each checkpoint): tuples become lists."""
    facts = PreflightFacts(report={"implied": {"--x": ("a", "b")}}, gpus={"n0": [{"ids": (0, 1)}]})
    assert facts.report == {"implied": {"--x": ["a", "b"]}} and facts.gpus == {"n0": [{"ids": [0, 1]}]}
    with pytest.raises(ValidationError, match="not JSON"):
        PreflightFacts(report={"handle": object()})


def test_open_json_values_dump_as_their_json_round_trip() -> None:
    """The open JSON fields are dumped in one pydantic-core call (not pydantic's union walk, issue
    16 item 9) as a JSON round trip makes them: a tuple put in after validation is a list, as before."""
    facts = PreflightFacts(report={"nested": [{"a": 1, "b": [1.5, None, True, "x"]}]})
    facts.report["later"] = ("a", 2)  # type: ignore[assignment]  # mutated in place: not validated
    state = RunState()
    state.preflight = facts
    dumped = state.dump()
    assert dumped["preflight"]["report"] == {  # type: ignore[index,call-overload]
        "nested": [{"a": 1, "b": [1.5, None, True, "x"]}],
        "later": ["a", 2],
    }
    loaded = RunState.load(dumped).preflight
    assert loaded is not None and loaded.report == dumped["preflight"]["report"]  # type: ignore[index,call-overload]
