"""docs/performance.md may only cite benchmark scripts that exist and still start.

Every figure in that doc was printed by a script in bench/; if a script is renamed or removed,
or breaks on import, the doc would point at something nobody can re-run. `--help` imports the
script's modules and builds its parser without booting anything, so it is cheap and safe here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "performance.md"
SCRIPT = re.compile(r"(?<![\w/])bench/([A-Za-z0-9_]+\.py)")


def cited_scripts() -> list[str]:
    return sorted(set(SCRIPT.findall(DOC.read_text())))


def test_the_doc_cites_the_scripts_the_issue_asks_for() -> None:
    cited = cited_scripts()
    for needed in ("experiment_overhead.py", "digest_scale.py", "isolate_restarts.py", "readiness_lag.py"):
        assert needed in cited, f"docs/performance.md does not cite bench/{needed}"


@pytest.mark.parametrize("name", cited_scripts())
def test_every_cited_script_exists_and_its_help_runs(name: str) -> None:
    path = ROOT / "bench" / name
    assert path.is_file(), f"docs/performance.md cites bench/{name}, which does not exist"
    done = subprocess.run(
        [sys.executable, str(path), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"bench/{name} --help failed:\n{done.stderr[-2000:]}"
    assert "usage:" in done.stdout
