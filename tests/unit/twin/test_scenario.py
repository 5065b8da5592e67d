"""Scenario files: the shipped truth compiles, loads in the engine, and typos fail loudly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flagbot_lab.twin.engine.scenario import (
    Condition,
    Effect,
    Rule,
    load_scenario,
    scenario_from_dict,
    scenario_to_dict,
)
from flagbot_lab.twin.schema import ScenarioError, compile_scenario, load_scenario_yaml, scenario_names

SHIPPED = ("h200-tp8", "seed-gb10", "seed-gb10-0.5.9", "seed-gb10-0.5.23", "tiny-cpu")


def test_the_shipped_scenarios_are_listed() -> None:
    assert set(SHIPPED) <= set(scenario_names())


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_scenario_compiles_loads_and_round_trips(name: str, tmp_path: Path) -> None:
    document = compile_scenario(name)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document))
    scenario = load_scenario(path)
    assert scenario.name == name
    assert scenario_from_dict(scenario_to_dict(scenario)) == scenario
    assert load_scenario_yaml(name)["name"] == name


def test_seed_gb10_holds_the_hardware_truth_of_the_seeds() -> None:
    scenario = scenario_from_dict(compile_scenario("seed-gb10"))
    assert scenario.gpu.name == "NVIDIA GB10"
    assert scenario.gpu.compute_capability == (12, 1)
    assert scenario.gpu.memory_gib == pytest.approx(119.7)
    assert scenario.nodes == 2
    assert scenario.gpu.gpus_per_node == 1
    assert scenario.model.architecture == "Qwen3_5MoeForConditionalGeneration"  # SGLang's class
    assert scenario.model.multimodal and scenario.model.vision is not None
    assert scenario.model.hybrid is not None
    launch = " ".join(scenario.launch)
    assert "--tp 2" in launch
    assert "--speculative-algorithm EAGLE" in launch
    assert "--max-running-requests" not in launch  # 48 comes from post-init, as in the seeds


def test_seed_gb10_throughput_saturates_before_26_running_streams() -> None:
    tp = scenario_from_dict(compile_scenario("seed-gb10")).throughput
    assert tp.aggregate_at(1) == pytest.approx(121)
    assert tp.aggregate_at(64) == pytest.approx(1582)
    assert tp.aggregate_at(26) == tp.aggregate_at(48) == tp.aggregate_at(64)
    assert tp.per_stream_at(1) == pytest.approx(121)
    assert tp.per_stream_at(26) > tp.per_stream_at(48)
    assert tp.aggregate_at(0) == 0.0


def test_aggregate_curve_interpolates_and_starts_at_the_single_stream_speed() -> None:
    scenario = scenario_from_dict(compile_scenario("tiny-cpu"))
    tp = scenario.throughput
    assert tp.aggregate_at(4) == pytest.approx(250 + (1700 - 250) * 3 / 7)
    assert tp.aggregate_at(1000) == pytest.approx(5200)


def test_flag_rules_are_keyed_by_serverargs_field() -> None:
    scenario = scenario_from_dict(compile_scenario("seed-gb10"))
    fields = {rule.when[0].field for rule in scenario.flags}
    assert fields == {
        "enable_fused_moe_sum_all_reduce",
        "enable_flashinfer_allreduce_fusion",
        "enable_nccl_nvls",
    }


def test_a_rule_whose_capability_is_unmet_keeps_only_its_side_effects() -> None:
    gb10 = scenario_from_dict(compile_scenario("seed-gb10"))
    h200 = scenario_from_dict(compile_scenario("h200-tp8"))
    args = {"enable_flashinfer_allreduce_fusion": True}
    assert [e.throughput_factor for _r, e in gb10.active_effects(args)] == [1.0]
    assert sorted(e.throughput_factor for _r, e in h200.active_effects(args)) == [1.0, 1.06]


def test_an_interaction_needs_all_its_flags() -> None:
    rule = Rule(
        when=(Condition("--a", "a"), Condition("--b", "b", value="x", equals=True)),
        effect=Effect(throughput_factor=0.5),
    )
    assert not rule.matches({"a": True, "b": "y"})
    assert rule.matches({"a": True, "b": "x"})
    assert rule.name == "--a + --b"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def _base() -> str:
    return Path(__file__).parents[3].joinpath("lab/flagbot_lab/twin/scenarios/tiny-cpu.yaml").read_text()


def test_an_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = _write(tmp_path, _base().replace("  weight_gib: 1.4", "  weight_gib: 1.4\n  wieght: 3"))
    with pytest.raises(ScenarioError, match=r"bad\.yaml: model\.wieght: Extra inputs are not permitted"):
        compile_scenario(path)


def test_a_misspelt_flag_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = _write(
        tmp_path, _base() + "flags:\n  --enable-fused-moe-sum-allreduce: {throughput_factor: 1.1}\n"
    )
    with pytest.raises(
        ScenarioError, match=r"flags\.--enable-fused-moe-sum-allreduce: .* is not an SGLang 0\.5\.10 flag"
    ):
        compile_scenario(path)


def test_a_flag_prefix_is_refused_in_rules(tmp_path: Path) -> None:
    path = _write(tmp_path, _base() + "flags:\n  --enable-fused-moe: {throughput_factor: 1.1}\n")
    with pytest.raises(ScenarioError, match="did you mean --enable-fused-moe-sum-all-reduce"):
        compile_scenario(path)


def test_a_launch_line_the_twin_would_reject_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _base().replace("launch: [--model-path, /models/Qwen3-0.6B]", "launch: [--model-path, /m, --bogus]"),
    )
    with pytest.raises(ScenarioError, match="launch: sglang serve: error: unrecognized arguments: --bogus"):
        compile_scenario(path)


def test_per_node_flags_do_not_belong_in_launch(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _base().replace(
            "launch: [--model-path, /models/Qwen3-0.6B]", "launch: [--model-path, /m, --port, '1']"
        ),
    )
    with pytest.raises(ScenarioError, match="--port is added per node"):
        compile_scenario(path)


def test_implies_takes_switch_values_as_booleans(tmp_path: Path) -> None:
    rule = "flags:\n  --enable-fused-moe-sum-all-reduce:\n    side_effects: {implies: {--disable-piecewise-cuda-graph: 1}}\n"
    with pytest.raises(ScenarioError, match="is a switch"):
        compile_scenario(_write(tmp_path, _base() + rule))


def test_a_value_flag_needs_a_value_to_match(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="takes a value"):
        compile_scenario(
            _write(tmp_path, _base() + "flags:\n  --attention-backend: {throughput_factor: 0.9}\n")
        )
    document = compile_scenario(
        _write(tmp_path, _base() + "flags:\n  --attention-backend: {value: triton, throughput_factor: 0.9}\n")
    )
    assert document["flags"][0]["when"] == [
        {"flag": "--attention-backend", "field": "attention_backend", "value": "triton", "equals": True}
    ]


def test_unknown_names_and_bad_yaml_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no scenario named 'nope'"):
        compile_scenario("nope")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        compile_scenario(_write(tmp_path, "name: [unclosed\n"))


def test_the_engine_loader_refuses_unknown_keys() -> None:
    document = compile_scenario("tiny-cpu")
    document["gpu"]["vram"] = 1
    with pytest.raises(ValueError, match=r"scenario\.gpu: unknown key\(s\) vram"):
        scenario_from_dict(document)
