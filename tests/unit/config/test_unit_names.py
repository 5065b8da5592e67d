"""A unit per node in the config: head/worker names, a template target unit, and the names refused."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.config.schema import Target
from bot.config.unit_names import check_service_name, is_template

ROOT = Path(__file__).parents[3]
TWO_HOSTS = [{"host": "10.0.0.11"}, {"host": "10.0.0.12"}]


def test_a_node_without_its_own_unit_runs_the_targets() -> None:
    target = Target(unit="sglang-qwen.service", nodes=TWO_HOSTS)
    assert [target.unit_of(k) for k in range(2)] == ["sglang-qwen.service", "sglang-qwen.service"]


def test_head_and_worker_units_differ() -> None:
    nodes = [{"host": "10.0.0.11"}, {"host": "10.0.0.12", "unit": "sglang-worker.service"}]
    target = Target(unit="sglang-head.service", nodes=nodes)
    assert [target.unit_of(k) for k in range(2)] == ["sglang-head.service", "sglang-worker.service"]


def test_a_template_target_unit_runs_the_nodes_index_as_instance() -> None:
    target = Target(
        unit="sglang@.service", nodes=[*TWO_HOSTS, {"host": "10.0.0.13", "unit": "sglang@7.service"}]
    )
    assert [target.unit_of(k) for k in range(3)] == [
        "sglang@0.service",
        "sglang@1.service",
        "sglang@7.service",
    ]


@pytest.mark.parametrize(
    ("unit", "says"),
    [
        (
            "sglang@.service",
            "is a template, which systemd cannot start: name the instance, e.g. sglang@0.service",
        ),
        ("sglang worker.service", "is not a systemd service name"),
        ("@0.service", "is not a systemd service name"),
        ("sglang-worker", "is not a systemd service name"),
        ("sglang-worker.socket", "is not a systemd service name"),
        ("sglang*.service", "is not a systemd service name"),
        ("sglang\\x2dw.service", "is not a systemd service name"),
        ("s" * 250 + ".service", "a unit name is at most 255 characters"),
    ],
)
def test_a_bad_node_unit_is_refused_naming_the_key(unit: str, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        Target(unit="sglang-head.service", nodes=[{"host": "10.0.0.11", "unit": unit}])
    assert "nodes.0.unit" in str(refused.value) and says in str(refused.value)


def test_the_target_unit_follows_the_same_rule_and_may_be_a_template() -> None:
    with pytest.raises(ValidationError, match="is not a systemd service name"):
        Target(unit="sglang qwen.service", nodes=TWO_HOSTS)
    assert Target(unit="sglang@.service", nodes=TWO_HOSTS).unit == "sglang@.service"


def test_the_rule_accepts_systemds_instance_forms() -> None:
    for name in ("a.service", "a@b.service", "a@b@c.service", "a:b_c.d-e@0.service", "s" * 247 + ".service"):
        assert check_service_name(name) == name
    assert is_template("a@.service") and not is_template("a@0.service") and not is_template("a.service")


def test_the_layouts_docs_operations_shows_load_with_the_units_they_state() -> None:
    """docs/operations.md section 4a: each example config is a valid target with the units its text says."""
    section = (
        (ROOT / "docs" / "operations.md").read_text().split("## 4a. Unit layouts", 1)[1].split("\n## ", 1)[0]
    )
    blocks = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    units = []
    for block in blocks:
        (target,) = tomllib.loads(block)["targets"].values()
        config = Target.model_validate(target)
        units.append([config.unit_of(k) for k in range(len(config.nodes))])
    assert units == [
        ["sglang-qwen.service", "sglang-qwen.service"],
        ["sglang-head.service", "sglang-worker.service"],
        ["sglang@0.service", "sglang@1.service"],
    ]
