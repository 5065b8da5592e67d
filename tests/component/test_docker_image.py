"""The image's venv, built for real without Docker: the wheel the builder installs, a venv made
as the Dockerfile makes it, the Dockerfile's copies into it; then the image's entrypoint, default
command and healthcheck run from that venv in a directory standing in for /app.

What cannot run here: the base image itself and `pip install` of the dependencies from the index
(the venv borrows this checkout's installed dependencies through a .pth file instead).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

import bot
from tools.dockerfile_check import ROOT, Stage, copies, stages

PYTHON_DIR = "lib/python3.11/site-packages"


def _run(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=180)


@pytest.fixture(scope="module")
def dockerfile() -> list[Stage]:
    return stages((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)], cwd=out
    )
    assert built.returncode == 0, built.stderr
    return next(out.glob("flagbot-*.whl"))


@pytest.fixture(scope="module")
def venv(dockerfile: list[Stage], wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/opt/venv of the image, at a temporary path."""
    builder = dockerfile[0]
    (image_venv,) = {m.group(1) for r in builder.all("RUN") for m in re.finditer(r"-m venv (\S+)", r.text)}
    image = tmp_path_factory.mktemp("image")
    here = image / image_venv.strip("/")
    made = _run([sys.executable, "-m", "venv", str(here)], cwd=image)
    assert made.returncode == 0, made.stderr
    site = here / PYTHON_DIR
    assert site.is_dir(), (
        f"the image's python is 3.11; this venv has {sorted(p.name for p in here.glob('lib/*'))}"
    )
    (site / "zz-flagbot-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run(
        [str(here / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        cwd=here,
    )
    assert installed.returncode == 0, installed.stderr
    for copy in copies(builder):
        if copy.from_stage is None and copy.dest.startswith(image_venv + "/"):
            dest = here / copy.dest.removeprefix(image_venv + "/")
            for source in copy.sources:
                _copy_tree(ROOT / source, dest)
    return here


def _copy_tree(source: Path, dest: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """/app with /etc/flagbot/flagbot.toml mounted: the config from docs/operations.md."""
    (tmp_path / "app").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "flagbot.toml").write_text(_operations_config())
    return tmp_path


def _operations_config() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    match = re.search(r"```toml\n(.*?)```", text, re.DOTALL)
    assert match, "docs/operations.md shows a flagbot.toml"
    return match.group(1)


def _env(app_dir: Path, **extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "FLAGBOT_"))}
    return {**keep, "FLAGBOT_CONFIG": str(app_dir / "etc" / "flagbot.toml"), **extra}


def test_the_wheel_carries_every_module_and_package_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    expected = set()
    for package, patterns in setuptools["package-data"].items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            matched = [p for p in folder.glob(pattern) if p.is_file()]
            assert matched, f"package-data {package}: {pattern} matches no file"
            expected |= {str(p.relative_to(ROOT)) for p in matched}
    expected |= {
        str(p.relative_to(ROOT)) for p in (ROOT / "bot").rglob("*.py") if "__pycache__" not in p.parts
    }
    assert sorted(expected - names) == []


def test_the_wheel_leaves_the_lab_out(wheel: Path) -> None:
    """The twin, testbed, stand-in and demo are the lab's (lab/flagbot_lab), never the product's."""
    names = zipfile.ZipFile(wheel).namelist()
    lab_files = [
        name
        for name in names
        if name.startswith("flagbot_lab/")
        or any(f"bot/{part}/" in name for part in ("twin", "testbed", "demo", "slack/standin"))
    ]
    assert lab_files == []
    assert "bot/main.py" in names and "bot/cli/app.py" in names
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    requirements = [
        line.split(":", 1)[1].strip().lower()
        for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    assert requirements, "the wheel names its runtime dependencies"
    assert not [r for r in requirements if r.startswith(("selenium", "flagbot-lab", "flagbot_lab"))]


def test_the_image_venv_holds_no_lab_and_adds_no_lab_command(venv: Path, wheel: Path) -> None:
    """Nothing the image installs is the lab's, and the product's wheel registers no add-on command:
    `flagbot twin` and `flagbot demo` exist only where the lab is installed too."""
    site = venv / PYTHON_DIR
    assert not (site / "flagbot_lab").exists()
    assert not [p.name for p in site.iterdir() if p.name.lower().startswith(("flagbot_lab", "flagbot-lab"))]
    names = zipfile.ZipFile(wheel).namelist()
    entry_points = next(name for name in names if name.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "flagbot = bot.main:main" in text
    assert "flagbot.commands" not in text


def test_the_venv_runs_the_installed_flagbot_not_this_checkout(venv: Path, tmp_path: Path) -> None:
    where = _run([str(venv / "bin/python"), "-c", "import bot; print(bot.__file__)"], cwd=tmp_path)
    assert where.stdout.strip() == str(venv / PYTHON_DIR / "bot" / "__init__.py")
    version = _run([str(venv / "bin/flagbot"), "--version"], cwd=tmp_path)
    assert version.stdout.strip() == f"flagbot {bot.__version__}"
    assert (venv / "bin/flagbot").read_text().startswith(f"#!{venv}/bin/python")


def test_the_installed_flagbot_finds_its_builtin_playbooks_and_knowledge(venv: Path, tmp_path: Path) -> None:
    probe = (
        "from bot.loop.playbook import load_playbooks, playbook_dirs\n"
        "from bot.loop.knowledge import KnowledgeBase\n"
        "print(' '.join(load_playbooks(playbook_dirs())))\n"
        "print(len(KnowledgeBase.load().flags))\n"
    )
    found = _run([str(venv / "bin/python"), "-c", probe], cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    books, flags = found.stdout.split("\n")[:2]
    assert {"try", "revert", "verify", "isolate", "baseline"} <= set(books.split())
    assert int(flags) > 0


def test_the_healthcheck_passes_on_a_mounted_config_and_fails_without_it(
    dockerfile: list[Stage], venv: Path, app_dir: Path
) -> None:
    check = dockerfile[-1].last("HEALTHCHECK")
    assert check is not None
    argv = [str(venv / "bin/flagbot"), *re.findall(r'"([^"]+)"', check.text.partition("CMD")[2])[1:]]
    healthy = _run(argv, cwd=app_dir / "app", env=_env(app_dir))
    assert healthy.returncode == 0, healthy.stderr
    assert "database (sqlite)" in healthy.stdout
    assert (app_dir / "app" / "state" / "flagbot.db").exists(), "SQLite lands on the /app/state volume"
    missing = _run(argv, cwd=app_dir / "app", env=_env(app_dir, FLAGBOT_CONFIG=str(app_dir / "none.toml")))
    assert missing.returncode != 0
    assert "config file not found" in missing.stderr


def test_the_default_command_serves_and_names_the_missing_secret(
    dockerfile: list[Stage], venv: Path, app_dir: Path
) -> None:
    runtime = dockerfile[-1]
    entry, cmd = runtime.last("ENTRYPOINT"), runtime.last("CMD")
    assert entry is not None
    assert cmd is not None
    argv = [str(venv / "bin" / Path(entry.exec_form()[0]).name), *cmd.exec_form()]  # type: ignore[index,misc]
    upgraded = _run([argv[0], "db", "upgrade"], cwd=app_dir / "app", env=_env(app_dir))
    assert upgraded.returncode == 0, upgraded.stderr
    refused = _run(argv, cwd=app_dir / "app", env=_env(app_dir))
    assert refused.returncode == 2
    assert "SLACK_BOT_TOKEN is not set" in refused.stderr
