"""The installed `flagbot` console script, run as a user runs it, on real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bot
from bot.store.schema_revision import SCHEMA_HEAD

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


def flagbot(
    *args: str, cwd: Path = ROOT, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "FLAGBOT_CONFIG"} | (env or {})
    return subprocess.run(
        [FLAGBOT, *args],
        cwd=cwd,
        input=stdin.decode() if stdin else None,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


def test_version() -> None:
    result = flagbot("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"flagbot {bot.__version__}"


def test_help_lists_every_command_with_its_tier() -> None:
    result = flagbot("help")
    assert result.returncode == 0
    assert "try" in result.stdout
    assert "[mutating]" in result.stdout
    assert "usage: try CHANGE" in flagbot("help", "try").stdout
    assert "usage: try CHANGE" in flagbot("try", "--help").stdout


def test_raw_words_reach_the_grammar_not_the_cli_parser() -> None:
    result = flagbot("explain", "--json", "try", "--tp", "2", "--enable-metrics", "max_running_requests>=48")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["changes"] == [
        {"op": "add", "flag": "--tp-size", "value": "2"},
        {"op": "add", "flag": "--enable-metrics", "value": None},
    ]
    assert data["expectations"] == ["max_running_requests>=48"]
    assert data["tier"] == "mutating"


def test_a_usage_error_is_specific_and_exits_2() -> None:
    result = flagbot("try", "add", "--enable-metricz")
    assert result.returncode == 2
    assert "error: unknown flag --enable-metricz" in result.stderr
    assert "usage: try CHANGE" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_of_an_unknown_command_fails() -> None:
    result = flagbot("help", "nosuch")
    assert result.returncode == 2
    assert "unknown command 'nosuch'" in result.stderr


def test_an_unknown_target_is_refused_before_flags_are_judged() -> None:
    result = flagbot(
        "--config", str(ROOT / "flagbot.example.toml"), "explain", "try", "add", "--tp", "2", "target=nope"
    )
    assert result.returncode == 2
    assert "unknown target 'nope'; targets: sglang-qwen" in result.stderr


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u:hunter2@127.0.0.1:1/x", "database (postgresql) unavailable: connection failed"),
        ("nosuchdialect://x", "FLAGBOT_DATABASE_URL: Can't load plugin"),
    ],
)
def test_a_bad_database_url_is_one_line_without_the_password(tmp_path: Path, url: str, says: str) -> None:
    result = flagbot("db", "upgrade", cwd=tmp_path, env={"FLAGBOT_DATABASE_URL": url})
    assert result.returncode == 2
    assert says in result.stderr
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr


def test_checks_on_a_new_sqlite_database_runs_without_db_upgrade(tmp_path: Path) -> None:
    result = flagbot("checks", "pause", "4", cwd=tmp_path)  # every command is built now (checks was last)
    assert "db upgrade" not in result.stderr and "Traceback" not in result.stderr
    assert "no check #4" in result.stderr  # the command ran on the database it created and migrated


def test_try_without_a_target_is_refused_before_anything_runs(tmp_path: Path) -> None:
    result = flagbot("try", "add", "--enable-metrics", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "no target: give target=NAME or set default_target" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_config_check_and_malformed_config(tmp_path: Path) -> None:
    good = flagbot("--config", str(ROOT / "flagbot.example.toml"), "config", "check")
    assert good.returncode == 0
    assert "targets: sglang-qwen (default: sglang-qwen)" in good.stdout
    bad = tmp_path / "flagbot.toml"
    bad.write_text("[targets.q]\nunit = 'q.service'\nnodes = [{host = 'h'}]\nsudo_pasword = 'x'\n")
    result = flagbot("--config", str(bad), "config", "check")
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: {bad}: targets.q.sudo_pasword: unknown key"


def test_db_upgrade_creates_sqlite_in_state(tmp_path: Path) -> None:
    result = flagbot("db", "upgrade", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"database (sqlite) at revision {SCHEMA_HEAD}" in result.stdout
    assert (tmp_path / "state" / "flagbot.db").is_file()
    assert f"revision {SCHEMA_HEAD}" in flagbot("db", "current", cwd=tmp_path).stdout


def test_db_upgrade_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    result = flagbot("db", "upgrade", cwd=tmp_path, env={"FLAGBOT_DATABASE_URL": postgres_url})
    assert result.returncode == 0, result.stderr
    assert f"database (postgresql) at revision {SCHEMA_HEAD}" in result.stdout
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("path", sorted((CORPUS / "sglang-logs").glob("*.log")), ids=lambda p: p.name)
def test_parse_log_json_has_the_documented_keys(path: Path) -> None:
    result = flagbot("parse", "log", "--json", str(path))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {
        "server_args",
        "parsed",
        "effective",
        "per_rank",
        "ready",
        "startup_error",
        "warnings",
        "starts",
    } <= set(data)
    assert set(data["effective"]) >= {
        "max_running_requests",
        "max_total_num_tokens",
        "context_len",
        "chunked_prefill_size",
        "max_prefill_tokens",
        "available_gpu_mem_gb",
    }
    expected = next(
        e for e in json.loads((CORPUS / "sglang-logs" / "index.json").read_text()) if e["file"] == path.name
    )["expected"]
    assert data["effective"]["max_running_requests"] == expected["max_running_requests"]
    assert data["parsed"]["max_running_requests"] == expected["server_args_max_running_requests"]


RELEASES = CORPUS.parent / "sglang-releases"


@pytest.mark.parametrize("entry", json.loads((RELEASES / "index.json").read_text()), ids=lambda e: e["file"])
def test_parse_log_reads_each_releases_lines(entry: dict[str, Any]) -> None:
    result = flagbot("parse", "log", "--json", str(RELEASES / entry["file"]))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["server_args_form"] == entry["server_args_form"]
    assert data["parsed"]["cuda_graph_max_bs"] == entry["expected"]["cuda_graph_max_bs"]
    assert data["effective"]["max_total_num_tokens"] == entry["expected"]["max_total_num_tokens"]
    assert data["unparsed"] == {}


def test_parse_log_from_stdin_and_human_summary() -> None:
    text = (CORPUS / "sglang-logs" / "014.log").read_bytes()
    result = flagbot("parse", "log", "-", stdin=text)
    assert result.returncode == 0, result.stderr
    assert "48" in result.stdout


def test_parse_bench_json() -> None:
    result = flagbot("parse", "bench", "--json", str(CORPUS / "sglang-bench" / "001.log"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["completed"] == 120
    assert data["output_throughput"] == pytest.approx(1953.01)
    assert data["max_concurrency"] == 120
    assert [run["completed"] for run in data["runs"]] == [120]


def test_parse_bench_with_several_runs_keeps_one_shape(tmp_path: Path) -> None:
    both = tmp_path / "two.log"
    both.write_bytes(
        (CORPUS / "sglang-bench" / "001.log").read_bytes()
        + (CORPUS / "sglang-bench" / "002.log").read_bytes()
    )
    data = json.loads(flagbot("parse", "bench", "--json", str(both)).stdout)
    assert data["completed"] == 64  # the last run on top
    assert [run["completed"] for run in data["runs"]] == [120, 64]


def test_parse_unit_json() -> None:
    result = flagbot("parse", "unit", "--json", str(CORPUS / "sglang-units" / "001.service"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["entrypoint"] == "/home/tchen19/LLM/.venv/bin/python -m sglang.launch_server"
    assert data["flags"][0] == {"flag": "--model-path", "value": "Qwen/Qwen3-14B"}


def test_parse_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = flagbot("parse", "log", str(tmp_path / "nope.log"))
    assert result.returncode == 2
    assert "No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_parse_bench_without_a_block_fails_clearly(tmp_path: Path) -> None:
    empty = tmp_path / "x.txt"
    empty.write_text("nothing here\n")
    result = flagbot("parse", "bench", str(empty))
    assert result.returncode == 1
    assert "no `Serving Benchmark Result` block" in result.stderr
