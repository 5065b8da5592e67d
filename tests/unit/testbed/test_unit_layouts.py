"""The testbed's unit layouts: the config it writes names each node's unit as an operator would,
and flagbot reads the same units from it (the integration tests boot these layouts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.loader import load_settings
from flagbot_lab.testbed.config import twin_config_text
from flagbot_lab.testbed.layout import Layout, TestbedError, check_unit_layout, node_unit, unit_file
from flagbot_lab.testbed.node import unit_for_layout
from flagbot_lab.twin.install import unit_text


@pytest.mark.parametrize(
    ("unit_layout", "units", "files"),
    [
        ("one-name", ["sglang-qwen.service"] * 3, ["sglang-qwen.service"] * 3),
        ("head-worker", ["sglang-head.service", "sglang-worker.service", "sglang-worker.service"], None),
        ("template", ["sglang@0.service", "sglang@1.service", "sglang@2.service"], ["sglang@.service"] * 3),
    ],
)
def test_each_layout_names_the_units_the_config_gives_flagbot(
    tmp_path: Path, unit_layout: str, units: list[str], files: list[str] | None
) -> None:
    layout = Layout(210, tmp_path, 3)
    assert [node_unit(unit_layout, k) for k in range(3)] == units
    assert [unit_file(unit_layout, k) for k in range(3)] == (files or units)
    path = tmp_path / "twin.toml"
    path.write_text(
        twin_config_text(
            layout,
            key_path=tmp_path / "key",
            known_hosts=tmp_path / "kh",
            scenario="seed-gb10",
            unit_layout=unit_layout,
        )
    )
    target = load_settings(path, required=True).targets["twin"]
    assert [target.unit_of(k) for k in range(3)] == units


def test_an_unknown_layout_is_refused() -> None:
    with pytest.raises(TestbedError, match="use one of one-name, head-worker, template"):
        check_unit_layout("per-gpu")


def test_the_template_takes_the_rank_from_the_instance() -> None:
    text = unit_text("seed-gb10", node_rank=1, dist_init_addr="10.200.210.2:50000")
    assert unit_for_layout(text, "head-worker", 1) == text
    templated = unit_for_layout(text, "template", 1)
    assert "--node-rank %i" in templated and "--node-rank 1" not in templated
    with pytest.raises(TestbedError, match="--node-rank once"):
        unit_for_layout(text.replace("--node-rank 1", ""), "template", 1)
