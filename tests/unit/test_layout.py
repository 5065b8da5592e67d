"""The project's layout promises: the user's card, the Dockerfile's sources, what state/ keeps."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_top_level_layout_of_the_users_card() -> None:
    for name in ("bot", "playbooks", "state", "tests", "Dockerfile", "pyproject.toml"):
        assert (ROOT / name).exists(), name


def test_pyproject_declares_the_runtime_and_dev_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=\[ ]", dep, maxsplit=1)[0].lower() for dep in project["dependencies"]}
    assert {
        "slack-bolt",
        "slack-sdk",
        "aiohttp",
        "asyncssh",
        "httpx",
        "sqlmodel",
        "alembic",
        "apscheduler",
        "pydantic-settings",
        "typer",
        "pyyaml",
    } <= names
    apscheduler = next(dep for dep in project["dependencies"] if dep.startswith("apscheduler"))
    assert "<4" in apscheduler
    dev = {
        re.split(r"[<>=\[ ]", dep, maxsplit=1)[0].lower() for dep in project["optional-dependencies"]["dev"]
    }
    assert {"pytest", "pytest-asyncio", "hypothesis", "ruff", "mypy"} <= dev
    assert project["scripts"] == {"flagbot": "bot.main:main"}
    assert project["requires-python"] == ">=3.11"


def test_every_dockerfile_source_exists() -> None:
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:  # a stage copy names no repo file
            for source in line.split()[1:-1]:
                assert (ROOT / source).exists(), source


def test_state_keeps_only_its_readme_in_git() -> None:
    probe = ROOT / "state" / "flagbot.db"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT, check=False)
    kept = subprocess.run(
        ["git", "check-ignore", "-q", str(ROOT / "state" / "README.md")], cwd=ROOT, check=False
    )
    assert ignored.returncode == 0
    assert kept.returncode == 1
    assert "flagbot.db" in (ROOT / "state" / "README.md").read_text()


def test_ci_runs_the_readme_test_command() -> None:
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme
    assert "make test-unit" in readme


def test_test_modules_have_unique_import_names() -> None:
    """pytest's default import mode imports a test file under its name within its packages (the
    folders up from it that hold an `__init__.py`): a bare basename outside any. Two files of one
    such name stop the whole collection, and a run of one tier would not notice."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        parts = [path.stem]
        folder = path.parent
        while (folder / "__init__.py").exists():
            parts.insert(0, folder.name)
            folder = folder.parent
        name = ".".join(parts)
        if name in seen:
            clashes.append(f"{name}: {seen[name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
        seen.setdefault(name, path)
    assert clashes == []
