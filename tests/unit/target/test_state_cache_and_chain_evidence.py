"""Issue 21 in observe's and rollback's evidence: the hybrid state cache next to the KV tokens,
the cap it sets, the adjustment warnings' flags, and a failed start's whole traceback chain."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.sglang.log import parse_log_text
from bot.target.observe import Observation, observation_evidence
from bot.target.readiness_result import Failure, Readiness
from bot.target.rollback import failure_evidence
from bot.target.snapshot_facts import capacity
from tests.unit.target.scripted_node import failed_start_node, show_text

RELEASES = Path(__file__).resolve().parents[2] / "fixtures" / "sglang-releases"
INV = "e" * 32


def _observation(log: str, version: str) -> Observation:
    report = parse_log_text((RELEASES / log).read_text())
    return Observation(
        target="t",
        node="n0",
        invocation=INV,
        state={},
        health=200,
        requested=[],
        environment={},
        server_args=report.server_args,
        implied={},
        derived={},
        unknown_flags=[],
        capacity=capacity(report, None, version),
        effective=report.effective,
        ready=report.ready,
        startup_error=report.startup_error,
        warnings=[str(w["text"]) for w in report.warnings],
        gpus={},
        startup={},
        sglang_version=version,
        flag_list={},
        node_mismatch={},
        journal={},
        startup_error_chain=report.current.startup_error_chain if report.startup_error else [],
        warning_flags={str(w["text"]): str(w["flag"]) for w in report.warnings if w.get("flag")},
    )


def test_observe_shows_the_state_cache_next_to_the_kv_tokens_and_says_it_caps() -> None:
    obs = _observation("hybrid-0.5.23.log", "0.5.23")
    table = observation_evidence(obs)[0].to_json()
    rows = {row[0]: row for row in table["rows"]}
    assert rows["max_running_requests"][1:3] == ["48", "26"]
    assert rows["max_mamba_cache_size (hybrid state cache)"][2] == "79"
    assert list(rows)[:3] == [
        "max_running_requests",
        "max_total_num_tokens",
        "max_mamba_cache_size (hybrid state cache)",
    ]
    assert "26 = max_mamba_cache_size 79 // 3: the hybrid state cache, not KV memory" in table["note"]
    snapshot = obs.to_snapshot()
    assert any("hybrid state cache" in note for note in snapshot.effective["capacity_notes"])


def test_observe_names_the_flag_each_adjustment_warning_bears_on() -> None:
    obs = _observation("hybrid-0.5.10.log", "0.5.10")
    block = next(
        b.to_json() for b in observation_evidence(obs) if "adjustment warnings" in json.dumps(b.to_json())
    )
    assert (
        "specify --disable-custom-all-reduce explicitly.  [bears on --disable-custom-all-reduce]"
        in json.dumps(block)
    )


def test_a_plain_model_has_no_state_cache_row() -> None:
    obs = _observation("0.5.10.log", "0.5.10")
    rows = observation_evidence(obs)[0].to_json()["rows"]
    assert [row[0] for row in rows] == ["max_running_requests", "max_total_num_tokens"]


def test_observe_shows_the_whole_chain_under_the_last_exception() -> None:
    obs = _observation("chained-traceback.log", "0.5.10")
    block = next(b.to_json() for b in observation_evidence(obs) if "Startup error" in json.dumps(b.to_json()))
    text = json.dumps(block)
    assert obs.startup_error is not None and obs.startup_error.startswith("ValueError: The checkpoint")
    assert "KeyError: 'glm_moe_dsa'" in text and "during handling of it" in text


async def test_a_failed_start_is_reported_by_its_last_exception_with_the_chain() -> None:
    """Readiness stops at the first fatal line it sees (the KeyError); the evidence re-reads the
    journal and reports the exception that killed the start, with the whole chain."""
    now = time.time()
    lines = (RELEASES / "chained-traceback.log").read_text().splitlines()
    state = show_text(invocation=INV, active="failed", sub="failed", result="exit-code")
    node = failed_start_node(INV, lines, state, started=now)
    readiness = Readiness("failed", "failed", INV, {"n0": INV}, now - 3)
    readiness.failure = Failure(
        "fatal-line", "n0", "n0: fatal line in the journal", "KeyError: 'glm_moe_dsa'", INV
    )
    ts: Any = SimpleNamespace(nodes=[node], node0=node)
    blocks, fatal, summary = await failure_evidence(ts, readiness)
    assert summary["fatal_line"] == fatal and summary["first_fatal_line"] == "KeyError: 'glm_moe_dsa'"
    assert fatal is not None and fatal.startswith("ValueError: The checkpoint you are trying to load")
    what = json.dumps(blocks[0].to_json())
    assert "fatal line: ValueError: The checkpoint" in what
    assert "KeyError: 'glm_moe_dsa'" in what and "during handling of it" in what
