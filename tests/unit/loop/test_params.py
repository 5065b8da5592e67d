"""`flagbot run PLAYBOOK key=value`: parameters to their JSON form, with the playbook's own errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.loop.params import ParamError, complete_params, parse_params
from bot.loop.playbook import Playbook, load_playbook
from bot.sglang.catalog import FlagCatalog
from tests.support.loop_actions import Probe

CATALOG = FlagCatalog.load()
BOOK = """
name: p
params:
  changes: {kind: changes, required: true}
  expect: {kind: expectations, default: "max_running_requests>=48"}
  label: {kind: text}
  repeats: {kind: int, default: 2}
  hypothesis: {kind: id}
  keep: {kind: choice, choices: [auto, always, never], default: auto}
  dry: {kind: bool, default: false}
steps: [{action: t_any}]
"""


@pytest.fixture
def book(tmp_path: Path, probe: Probe) -> Playbook:
    path = tmp_path / "p.yaml"
    path.write_text(BOOK, encoding="utf-8")
    return load_playbook(path)


def test_every_kind_converts_to_its_json_form(book: Playbook) -> None:
    params = parse_params(
        book,
        {
            "changes": "add --enable-metrics set --tp=2 env set NCCL_DEBUG=INFO",
            "expect": "max_running_requests>=48, output_throughput>=-2% median_ttft_ms < 500",
            "label": "a b",
            "repeats": "5",
            "hypothesis": "#7",
            "keep": "never",
            "dry": "yes",
        },
        catalog=CATALOG,
    )
    assert params == {
        "changes": [
            {"op": "add", "flag": "--enable-metrics", "value": None},
            {"op": "set", "flag": "--tp-size", "value": "2"},
            {"op": "env-set", "name": "NCCL_DEBUG", "value": "INFO"},
        ],
        "expect": ["max_running_requests>=48", "output_throughput>=-2%", "median_ttft_ms<500"],
        "label": "a b",
        "repeats": 5,
        "hypothesis": 7,
        "keep": "never",
        "dry": True,
    }


def test_defaults_fill_what_is_not_given(book: Playbook) -> None:
    params = parse_params(book, {"changes": "--enable-metrics"}, catalog=CATALOG)
    assert params["expect"] == ["max_running_requests>=48"]
    assert params["repeats"] == 2 and params["keep"] == "auto" and params["dry"] is False
    assert params["label"] is None and params["hypothesis"] is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"changes": "--enable-metrics", "chagnes": "x"},
            "playbook p: unknown parameter 'chagnes'; parameters: changes, expect, label, repeats, hypothesis, keep, dry",
        ),
        ({}, "playbook p: missing required parameter 'changes'"),
        (
            {"changes": "--enable-metrcs"},
            "playbook p: changes='--enable-metrcs': unknown flag --enable-metrcs",
        ),
        ({"changes": "--enable-metrics max_running_requests>=4"}, "only flag changes here"),
        (
            {"changes": "--enable-metrics", "expect": "max_running_requests>=48 junk"},
            "cannot read expectation 'junk'",
        ),
        (
            {"changes": "--enable-metrics", "expect": "max_runing_requests>=48"},
            "unknown metric 'max_runing_requests'",
        ),
        ({"changes": "--enable-metrics", "repeats": "2.5"}, "repeats='2.5': '2.5' is not a whole number"),
        ({"changes": "--enable-metrics", "hypothesis": "0"}, "is not an id"),
        ({"changes": "--enable-metrics", "keep": "maybe"}, "'maybe' is not one of auto, always, never"),
        ({"changes": "--enable-metrics", "dry": "perhaps"}, "'perhaps' is not true or false"),
    ],
)
def test_bad_values_name_the_playbook_and_the_parameter(
    book: Playbook, raw: dict[str, str], message: str
) -> None:
    with pytest.raises(ParamError) as info:
        parse_params(book, raw, catalog=CATALOG)
    assert message in str(info.value)


def test_json_params_are_checked_and_completed(book: Playbook) -> None:
    changes = [{"op": "add", "flag": "--enable-metrics", "value": None}]
    assert complete_params(book, {"changes": changes})["repeats"] == 2
    with pytest.raises(ParamError, match="unknown parameter 'x'"):
        complete_params(book, {"changes": changes, "x": 1})
