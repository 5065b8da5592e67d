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


def test_the_lab_wheel_ships_its_twin_files_and_registers_its_commands(tmp_path: Path) -> None:
    """The lab is a distribution of its own: its data files, and the entry point that gives
    `flagbot twin` and `flagbot demo` to the product CLI."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT / "lab")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("flagbot_lab-*.whl"))
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert "flagbot_lab/twin/scenarios/seed-gb10.yaml" in names
    assert "flagbot_lab/twin/shim/nvidia-smi" in names
    assert "flagbot_lab/twin/shim/sglang/srt/server_args.py" in names
    assert "flagbot_lab/twin/shim/sglang/benchmark/serving.py" in names  # 0.5.15+'s client path
    assert "flagbot_lab/twin/scenarios/seed-gb10-0.5.23.yaml" in names
    assert any(name.startswith("flagbot_lab/standin/static/") for name in names)
    assert not any(name.startswith("bot/") for name in names)
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    assert "lab = flagbot_lab.plugin:register" in archive.read(entry_points).decode()
