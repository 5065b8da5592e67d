"""A built wheel carries what an installed flagbot needs at run time (data files, migrations)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_wheel_ships_the_flag_catalog_and_the_migrations(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("flagbot-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "bot/sglang/data/sglang-0.5.10-flags.json" in names
    assert "bot/store/migrations/env.py" in names
    assert "bot/store/migrations/script.py.mako" in names
    assert any(name.startswith("bot/store/migrations/versions/0001_") for name in names)
    assert "bot/py.typed" in names
    assert not any(name.startswith("tests/") for name in names)
