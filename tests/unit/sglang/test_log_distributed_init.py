"""The distributed init as a stage of its own: the extractor on real lines (0.5.10's `elapsed=`,
0.5.9's without it, a negative memory delta) and the report's last stage of a multi-node start
that stops after the NCCL line (corpus 008.log, a real node 0 of a two-node start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sglang import log_events as ev
from bot.sglang.log import parse_log_text

CORPUS = Path("corpus") / "sglang-logs"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Init torch distributed begin.", {"phase": "begin"}),
        ("sglang is using nccl==2.27.5", {"phase": "nccl", "nccl": "2.27.5"}),
        (
            "Init torch distributed ends. elapsed=0.99 s, mem usage=0.23 GB",
            {"phase": "end", "elapsed_s": 0.99, "mem_usage_gb": 0.23},
        ),
        ("Init torch distributed ends. mem usage=1.21 GB", {"phase": "end", "mem_usage_gb": 1.21}),
        (
            "Init torch distributed ends. elapsed=0.00 s, mem usage=-0.00 GB",
            {"phase": "end", "elapsed_s": 0.0, "mem_usage_gb": -0.0},
        ),
        ("Load weight begin. avail mem=138.03 GB", None),
        ("NCCL_DEBUG says nccl==2.27.5 somewhere", None),
    ],
)
def test_the_distributed_init_lines(message: str, expected: dict[str, object] | None) -> None:
    assert ev.distributed_init(message) == expected


def test_a_start_that_stops_after_the_nccl_line_is_in_distributed_init(fixtures_dir: Path) -> None:
    text = (fixtures_dir / CORPUS / "008.log").read_text(encoding="utf-8", errors="replace")
    report = parse_log_text(text)
    cur = report.current
    assert cur.stage == "distributed_init"
    assert not cur.ready and cur.startup_error is None
    phases = [entry["phase"] for entry in cur.distributed_init]
    assert phases.count("begin") == 8 and phases[-1] == "nccl" and "end" not in phases
    assert "not ready (last stage: distributed_init)" in report.summary()


def test_a_finished_distributed_init_is_recorded_per_rank(fixtures_dir: Path) -> None:
    text = (fixtures_dir / CORPUS / "017.log").read_text(encoding="utf-8", errors="replace")
    ends = [e for e in parse_log_text(text).current.distributed_init if e["phase"] == "end"]
    assert [(e["rank"], e["elapsed_s"]) for e in ends] == [("TP0", 0.99), ("TP1", 0.97)]
    assert parse_log_text(text).to_json()["distributed_init"][0]["phase"] == "begin"
