"""Every table the CLI prints, at 80 columns with long realistic content: no line wider than
the terminal and no cell squeezed to one word per line (issue 22: `flagbot hypothesis`)."""

from __future__ import annotations

from pathlib import Path

from bot.bench.run import BenchRun
from bot.cli.bench import print_levels
from bot.cli.playbooks import print_playbooks
from bot.cli.records import print_answer as print_records
from bot.cli.status import print_status
from bot.loop.playbook import load_playbook_set, playbook_dirs
from bot.store.models import Measurement, MeasurementSet
from tests.support.narrow_tables import (
    HYPOTHESIS_COLUMNS,
    HYPOTHESIS_ROWS,
    TERMINAL,
    assert_readable,
    console,
    lines_of,
)

LOG_ROWS = [
    [
        "2026-12-01 09:14:03",
        "experiment",
        "#41",
        "try --enable-flashinfer-allreduce-fusion on gpu-a: regressed, effective max_running_requests "
        "fell from 48 to 26 and was reverted",
    ],
    ["2026-12-01 09:40:11", "knowledge", "fact #7", "--disable-piecewise-cuda-graph raises capacity on H200"],
]


def test_the_hypothesis_log_and_knowledge_tables_read_at_80_columns() -> None:
    document = {
        "tables": [
            {"title": "Hypotheses on gpu-a", "columns": list(HYPOTHESIS_COLUMNS), "rows": HYPOTHESIS_ROWS},
            {
                "title": "What was tried on gpu-a",
                "columns": ["when (UTC)", "kind", "ref", "what"],
                "rows": LOG_ROWS,
            },
        ],
        "lines": ["2 hypotheses"],
    }
    out = console()
    print_records(document, out)
    lines = lines_of(out)
    assert_readable(lines, TERMINAL, [cell for row in [*HYPOTHESIS_ROWS, *LOG_ROWS] for cell in row])
    assert "id: 12" in lines and "2 hypotheses" in lines


def test_the_status_table_reads_at_80_columns_with_an_unreachable_node() -> None:
    error = "ssh gpu-a-1.lab.example.com:22: connection refused after 3 attempts (Connection refused)"
    data = {
        "target": "gpu-a",
        "unit": "sglang.service",
        "health": 200,
        "nodes": [
            {
                "node": "gpu-a-0",
                "unit": "sglang-head.service",
                "active": "active",
                "sub": "running",
                "invocation": "4f2c9a1e7b6d4e0a9c3b",
                "n_restarts": 3,
                "result": "success",
            },
            {"node": "gpu-a-1", "unit": "sglang-worker.service", "kind": "unreachable", "error": error},
        ],
        "flags": [{"flag": "--tp-size", "value": "8"}],
        "latest_snapshot": None,
        "known_good_snapshot_id": 5,
        "diverged": None,
    }
    out = console()
    print_status(out, data)
    shown = lines_of(out)
    assert_readable(shown, TERMINAL, [error])
    assert "unit: sglang-worker.service" in " ".join(shown)  # each node's own unit
    references = {"${NODE_RANK}": "0", "${SGLANG_API_KEY}": "********"}
    out = console()
    print_status(
        out, {**data, "flags": [{"flag": "--node-rank", "value": "${NODE_RANK}"}], "references": references}
    )
    text = " ".join(lines_of(out))
    assert "flags (node 0): --node-rank ${NODE_RANK}" in text
    assert "references (EnvironmentFile=): ${NODE_RANK} = 0, ${SGLANG_API_KEY} = ********" in text


def test_the_playbooks_table_reads_at_80_columns_with_a_broken_file(tmp_path: Path) -> None:
    (tmp_path / "warmup.yaml").write_text("name: warmup\nsteps: [ {action: nowhere\n", encoding="utf-8")
    loaded = load_playbook_set(playbook_dirs([tmp_path]))
    assert loaded.broken
    out = console()
    print_playbooks(out, loaded)
    lines = lines_of(out)
    descriptions = [book.description for book in loaded.books.values()]
    assert_readable(lines, TERMINAL, descriptions)
    assert any("BROKEN, not loaded" in line for line in lines)


def test_the_benchmark_table_reads_at_80_columns() -> None:
    metrics = {
        "output_throughput": 1204.52,
        "request_throughput": 3.21,
        "median_ttft_ms": 123.4,
        "p99_ttft_ms": 412.9,
        "mean_tpot_ms": 21.07,
        "median_itl_ms": 19.9,
        "p99_itl_ms": 88.31,
        "median_e2e_latency_ms": 5012.0,
        "completed": 320,
        "failed": 0,
    }
    measurements = [
        Measurement(
            target="gpu-a", concurrency=level, repeat=repeat, metrics=metrics, client_bound=level == 64
        )
        for level in (8, 32, 64)
        for repeat in range(3)
    ]
    run = BenchRun(MeasurementSet(id=9, target="gpu-a", profile="sharegpt-chat"), measurements, [])
    out = console()
    print_levels(out, run)
    lines = lines_of(out)
    assert_readable(lines, TERMINAL, [])
    assert "conc: 64" in lines and any("CLIENT-BOUND 3/3" in line for line in lines)
