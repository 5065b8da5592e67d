"""`flagbot digest` as a user runs it: the installed console script on a seeded SQLite store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.component.digest.digest_seed import PERMALINK, Seeded

pytestmark = pytest.mark.parametrize("sync_store", ["sqlite"], indirect=True)
FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


def flagbot(seeded: Seeded, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    database = seeded.store.engine.url.database
    assert database is not None
    config = tmp_path / "flagbot.toml"
    config.write_text(f'[schedules]\ntimezone = "Europe/Berlin"\n\n[database]\nsqlite_path = "{database}"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    return subprocess.run(
        [FLAGBOT, "--config", str(config), "digest", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env | {"COLUMNS": "200"},
        timeout=120,
        check=False,
    )


def test_markdown_for_a_wiki(seeded: Seeded, tmp_path: Path) -> None:
    result = flagbot(seeded, tmp_path, "--week", "2026-W48", "--markdown")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Weekly post-mortem 2026-W48\n")
    assert "4 experiments (1 failed-to-start, 1 improved, 1 pass, 1 regressed)" in result.stdout
    assert "48 → 26" in result.stdout
    assert f"[thread]({PERMALINK})" in result.stdout


def test_all_changes_nothing_in_a_normal_week(seeded: Seeded, tmp_path: Path) -> None:
    summarised = flagbot(seeded, tmp_path, "--week", "2026-W48", "--markdown")
    whole = flagbot(seeded, tmp_path, "--week", "2026-W48", "--markdown", "--all")
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == summarised.stdout and "not shown" not in whole.stdout


def test_json_and_the_chart_file(seeded: Seeded, tmp_path: Path) -> None:
    chart = tmp_path / "out" / "w48.png"
    result = flagbot(seeded, tmp_path, "week=2026-W48", "--json", "--chart", str(chart))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["week"] == "2026-W48"
    assert data["counts"]["experiments"] == 4
    assert data["chart_path"] == str(chart)
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize(
    ("week", "says"),
    [
        ("2026-48", "expected YYYY-Www, e.g. 2026-W48"),
        ("2025-W53", "2025-W53 does not exist"),
    ],
)
def test_a_malformed_week_is_a_usage_error(seeded: Seeded, tmp_path: Path, week: str, says: str) -> None:
    result = flagbot(seeded, tmp_path, "--week", week, "--markdown")
    assert result.returncode == 2
    assert says in result.stderr
    assert result.stdout == ""


def test_an_unknown_target_is_a_usage_error(seeded: Seeded, tmp_path: Path) -> None:
    result = flagbot(seeded, tmp_path, "--week", "2026-W48", "--target", "nope")
    assert result.returncode == 2
    assert "unknown target 'nope'" in result.stderr


def test_the_current_week_by_default_printed_for_the_terminal(seeded: Seeded, tmp_path: Path) -> None:
    result = flagbot(seeded, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Weekly post-mortem" in result.stdout
    assert "Experiments" in result.stdout
