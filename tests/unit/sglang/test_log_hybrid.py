"""Hybrid models' state cache and chained tracebacks in the log parser (issue 21, items 1 and 3)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bot.sglang.log import parse_log_lines, parse_log_stream, parse_log_text
from bot.sglang.log_report import chain_of, chain_text
from bot.target.snapshot_facts import capacity
from flagbot_lab.twin.engine.scenario import scenario_from_dict
from flagbot_lab.twin.engine.startup import resolve
from flagbot_lab.twin.schema import compile_scenario
from tests.support.twin_launch import pair_argv

RELEASES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-releases"
HYBRID: list[dict[str, Any]] = json.loads((RELEASES / "hybrid.json").read_text())
STATE_KEYS = (
    "max_mamba_cache_size",
    "conv_state_gb",
    "ssm_state_gb",
    "intermediate_ssm_state_cache_gb",
    "intermediate_conv_window_cache_gb",
)


@pytest.mark.parametrize("entry", HYBRID, ids=[e["sglang_version"] for e in HYBRID])
def test_each_release_prints_the_state_cache_and_its_cap_is_explained(entry: dict[str, Any]) -> None:
    data = (RELEASES / entry["file"]).read_bytes()
    expected = entry["expected"]
    for report in (
        parse_log_stream(io.BytesIO(data)),
        parse_log_stream(io.BytesIO(data), chunk_size=97),
        parse_log_text(data.decode()),
        parse_log_lines(data.decode().splitlines(keepends=True)),
    ):
        state = report.current.state_cache
        assert state is not None
        assert {k: state[k] for k in STATE_KEYS if k in state} == {
            k: expected[k] for k in STATE_KEYS if k in expected
        }
        assert state["rank"] in ("", "TP0")
        json_data = report.to_json()
        assert json_data["unparsed"] == {}
        assert json_data["kv_cache"][0]["tokens"] == expected["kv_tokens"]
        assert json_data["state_cache"] == state
        cap = capacity(report, None, entry["sglang_version"])
        assert cap["parsed_max_running_requests"] == expected["parsed_max_running_requests"]
        assert cap["effective_max_running_requests"] == expected["effective_max_running_requests"]
        assert cap["max_mamba_cache_size"] == expected["max_mamba_cache_size"]
        assert cap["capped_by_state_cache"] == expected["capped_by_state_cache"]
        assert expected["capped_by_state_cache"] in cap["notes"]
        flags = {w["text"]: w["flag"] for w in report.warnings}
        assert flags.items() >= expected["warning_flags"].items()
        assert report.ready is True


def test_the_0_5_23_cap_warning_is_read() -> None:
    report = parse_log_text((RELEASES / "hybrid-0.5.23.log").read_text())
    assert report.current.mamba_cap == {"max_running_requests": 26, "max_mamba_cache_size": 79, "ratio": 3}


def test_a_mamba_line_without_its_slot_count_is_unread_not_unset() -> None:
    report = parse_log_text("[2026-11-30 10:00:13 TP0] Mamba Cache is allocated. conv_state size: 0.04GB")
    assert "max_mamba_cache_size" in report.current.unparsed["mamba_cache"]
    assert capacity(report, None, "0.5.10")["capped_by_state_cache"] is None


def test_a_model_without_a_state_cache_has_none() -> None:
    report = parse_log_text((RELEASES / "0.5.10.log").read_text())
    assert report.current.state_cache is None
    cap = capacity(report, None, "0.5.10")
    assert cap["max_mamba_cache_size"] is None and cap["capped_by_state_cache"] is None


# --- chained tracebacks -------------------------------------------------------------------------

GLM_VALUE_ERROR = (
    "ValueError: The checkpoint you are trying to load has model type `glm_moe_dsa` but Transformers does "
    "not recognize this architecture. This could be because of an issue with the checkpoint, or because "
    "your version of Transformers is out of date."
)


def test_the_headline_is_the_last_exception_of_a_chain_during_handling() -> None:
    report = parse_log_text((RELEASES / "chained-traceback.log").read_text())
    assert report.startup_error == GLM_VALUE_ERROR
    chain = report.current.startup_error_chain
    assert [e["text"] for e in chain] == ["KeyError: 'glm_moe_dsa'", GLM_VALUE_ERROR]
    assert chain[1]["follows"] == {"line": chain[0]["line"], "link": "during handling of"}
    assert report.to_json()["startup_error_chain"] == chain
    assert report.to_json()["starts"][-1]["startup_error"] == GLM_VALUE_ERROR
    assert "FAILED: ValueError: The checkpoint" in report.summary()
    text = chain_text(chain)
    assert "line 8: KeyError: 'glm_moe_dsa'" in text
    assert "during handling of it, line 17: ValueError" in text


def test_a_direct_cause_chain_of_three_ends_at_the_last() -> None:
    text = "\n".join(
        [
            "[2026-11-30 12:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "model_runner.py", line 10, in load_model',
            "OSError: [Errno 2] No such file or directory: '/models/x/config.json'",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            "RuntimeError: cannot load the model config",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            "ValueError: no usable model at /models/x",
            "[2026-11-30 12:00:02] Received sigquit from a child process. It usually means the child failed.",
        ]
    )
    report = parse_log_text(text)
    assert report.startup_error == "ValueError: no usable model at /models/x"
    links = [e.get("follows", {}).get("link") for e in report.current.startup_error_chain]
    assert links == [None, "caused by", "during handling of"]


def test_two_separate_tracebacks_are_not_one_chain() -> None:
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            "RuntimeError: the first failure",
            "Traceback (most recent call last):",
            "ValueError: another rank's own failure",
        ]
    )
    report = parse_log_text(text)
    assert report.startup_error == "RuntimeError: the first failure"
    assert len(report.current.startup_error_chain) == 1


def test_a_separator_after_a_weak_line_links_nothing() -> None:
    text = "\n".join(
        [
            "[2026-11-30 12:00:02] Received sigquit from a child process. It usually means the child failed.",
            "During handling of the above exception, another exception occurred:",
            "ValueError: the real one",
        ]
    )
    report = parse_log_text(text)
    assert report.startup_error == "ValueError: the real one"
    assert "follows" not in report.current.errors[-1]


def test_chain_of_finds_the_chain_holding_readinesss_first_fatal_line() -> None:
    report = parse_log_text((RELEASES / "chained-traceback.log").read_text())
    assert chain_of(report, "KeyError: 'glm_moe_dsa'")[-1]["text"] == GLM_VALUE_ERROR
    assert chain_of(report, None)[-1]["text"] == GLM_VALUE_ERROR
    assert chain_of(report, "RuntimeError: not in this journal") == []


def test_a_0_5_23_twin_start_reads_its_mamba_line_and_cap_warning() -> None:
    """The twin's 0.5.23 seed start with the fused workspace (tests/unit/twin/test_hybrid_0_5_23.py):
    the parser finds the state-cache line, the cap warning with 5 slots per request, and says why."""
    scenario = scenario_from_dict(compile_scenario("seed-gb10-0.5.23"))
    argv = pair_argv(scenario.launch, 0, "--enable-fused-moe-sum-all-reduce")
    resolved = resolve(argv, scenario, start_seed=1, env={})
    now, lines = 1_764_000_000.0, []
    for step in resolved.steps:
        now += step.delay_s
        lines.append(step.render(now))
    report = parse_log_lines(lines)
    assert report.current.unparsed == {}
    state = report.current.state_cache
    assert state is not None and state["max_mamba_cache_size"] == resolved.memory.max_mamba_cache_size == 124
    assert report.current.mamba_cap == {"max_running_requests": 24, "max_mamba_cache_size": 124, "ratio": 5}
    cap = capacity(report, None, "0.5.23")
    assert cap["max_mamba_cache_size"] == 124
    assert cap["capped_by_state_cache"] is not None and "124 // 5" in cap["capped_by_state_cache"]
