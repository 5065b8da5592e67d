"""The Dockerfile, checked without a Docker engine: what it copies exists and is in the build
context, the runtime runs `flagbot serve` from the venv the builder made, as a non-root user, with
state on a volume, a healthcheck, and no secret baked in. The image's venv is rebuilt for real in
tests/component/test_docker_image.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import PurePosixPath

import pytest

from bot.config.schema import DatabaseSettings
from bot.config.secrets import SECRET_ENV_NAMES
from tools.dockerfile_check import ROOT, Stage, copies, ignore_rules, ignored, instructions, stages

SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|DATABASE_URL|PRIVATE|API_KEY", re.IGNORECASE)
SECRET_VALUES = re.compile(r"xox[abp]-|xapp-|postgres(?:ql)?://[^/\s]*:[^@\s]*@|BEGIN [A-Z ]*PRIVATE KEY")


@pytest.fixture(scope="module")
def built() -> list[Stage]:
    return stages((ROOT / "Dockerfile").read_text())


@pytest.fixture(scope="module")
def builder(built: list[Stage]) -> Stage:
    return built[0]


@pytest.fixture(scope="module")
def runtime(built: list[Stage]) -> Stage:
    return built[-1]


def venv_of(stage: Stage) -> str:
    (venv,) = {m.group(1) for r in stage.all("RUN") for m in re.finditer(r"-m venv (\S+)", r.text)}
    return venv


def test_two_stages_on_the_same_slim_python(built: list[Stage]) -> None:
    assert [stage.name for stage in built] == ["builder", "runtime"]
    assert {stage.base for stage in built} == {"python:3.11-slim-bookworm"}
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert requires == ">=3.11"


def test_every_copied_file_exists_and_is_in_the_build_context(built: list[Stage]) -> None:
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    sources = [s for stage in built for c in copies(stage) if c.from_stage is None for s in c.sources]
    assert sources, "the builder copies the project"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
        assert not ignored(source, rules), f"COPY {source}: excluded by .dockerignore"
        for file in (ROOT / source).rglob("*.py") if (ROOT / source).is_dir() else []:
            if "__pycache__" not in file.parts:
                assert not ignored(str(file.relative_to(ROOT)), rules), file


def test_the_build_context_leaves_out_state_config_and_caches() -> None:
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    for path in ("state/flagbot.db", "flagbot.toml", ".venv/bin/python", ".git/config", "tests/conftest.py"):
        assert ignored(path, rules), path
    assert ignored("bot/slack/__pycache__/app.cpython-311.pyc", rules)
    assert not ignored("bot/slack/app.py", rules)


def test_the_image_build_never_sees_the_lab(built: list[Stage]) -> None:
    """The lab (twin, testbed, stand-in, demo) is neither copied nor in the build context."""
    rules = ignore_rules((ROOT / ".dockerignore").read_text())
    sources = [s for stage in built for c in copies(stage) if c.from_stage is None for s in c.sources]
    assert not [s for s in sources if PurePosixPath(s).parts[0] == "lab"]
    lab_files = [p for p in (ROOT / "lab").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert lab_files, "the lab lives in lab/"
    for file in lab_files:
        assert ignored(str(file.relative_to(ROOT)), rules), file
    assert not [p for p in (ROOT / "bot").rglob("*") if p.name in {"twin", "testbed", "demo", "standin"}]


def test_the_dockerignore_reader_follows_last_match_wins() -> None:
    """The reader the checks above rely on, on rules where order decides."""
    rules = ignore_rules("*\n!keep/\nkeep/secret.txt\n!keep/secret.txt.example\n**/*.pyc\n")
    assert ignored("other.txt", rules)
    assert not ignored("keep/a/b.txt", rules)
    assert ignored("keep/secret.txt", rules)
    assert not ignored("keep/secret.txt.example", rules)
    assert ignored("keep/x.pyc", rules)
    assert ignored("x.pyc", rules)


def test_the_entrypoint_is_the_console_script_of_the_venv_the_builder_made(
    builder: Stage, runtime: Stage
) -> None:
    venv = venv_of(builder)
    (from_builder,) = [c for c in copies(runtime) if c.from_stage == "builder"]
    assert from_builder.sources == [venv]
    assert from_builder.dest == venv, "the venv's scripts name their interpreter by absolute path"
    installs = [r.text for r in builder.all("RUN") if f"{venv}/bin/pip install" in r.text]
    workdir = builder.last("WORKDIR")
    assert workdir is not None
    assert any(re.search(rf"pip install (?:\S+ )*{re.escape(workdir.text)}(?:\s|$)", r) for r in installs)
    assert any(c.sources == ["pyproject.toml", "README.md"] for c in copies(builder))
    entry = runtime.last("ENTRYPOINT")
    assert entry is not None
    argv = entry.exec_form()
    assert argv is not None, "exec form: signals reach flagbot, not a shell"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv == [f"{venv}/bin/flagbot"]
    assert "flagbot" in scripts


def test_the_default_command_is_serve(runtime: Stage) -> None:
    from typer.main import get_command

    from bot.main import app

    cmd = runtime.last("CMD")
    assert cmd is not None
    assert cmd.exec_form() == ["serve"]
    assert "serve" in get_command(app).commands  # type: ignore[attr-defined]


def test_playbooks_are_in_the_build_context_the_wheel_is_made_from(builder: Stage) -> None:
    """bot/playbooks links to the top-level playbooks/; the builder must copy both, or the
    wheel's package data (the built-in playbooks, the knowledge base) would dangle."""
    from bot.loop.knowledge import PACKAGED
    from bot.loop.playbook import BUILTIN_DIR

    link = ROOT / "bot" / "playbooks"
    assert link.is_symlink() and link.resolve() == (ROOT / "playbooks").resolve()
    assert link.resolve() == BUILTIN_DIR and PACKAGED.is_relative_to(BUILTIN_DIR)
    order = [c.sources for c in copies(builder)]
    assert ["playbooks"] in order and ["bot"] in order
    assert order.index(["playbooks"]) < order.index(["bot"])


def test_runs_as_a_non_root_user_it_creates(runtime: Stage) -> None:
    user = runtime.last("USER")
    assert user is not None
    assert user.text not in ("root", "0", "0:0")
    assert any(
        re.search(rf"useradd\b[^&]*\s{re.escape(user.text)}(?:\s|$)", r.text) for r in runtime.all("RUN")
    )
    assert runtime.instructions.index(user) > max(
        runtime.instructions.index(i) for i in runtime.all("RUN")
    ), "nothing runs as root after USER"


def test_state_is_a_volume_the_database_defaults_into(runtime: Stage) -> None:
    volume = runtime.last("VOLUME")
    workdir = runtime.last("WORKDIR")
    assert volume is not None
    assert workdir is not None
    volumes = [PurePosixPath(v) for v in (volume.exec_form() or volume.words())]
    database = PurePosixPath(workdir.text) / DatabaseSettings().sqlite_path.as_posix()
    assert any(database.is_relative_to(v) for v in volumes), (database, volumes)
    assert any(f"chown flagbot:flagbot {v}" in r.text for r in runtime.all("RUN") for v in map(str, volumes))


def test_config_comes_from_a_mount_and_secrets_from_the_environment(built: list[Stage]) -> None:
    runtime = built[-1]
    assert runtime.env()["FLAGBOT_CONFIG"] == "/etc/flagbot/flagbot.toml"
    for stage in built:
        for key, value in stage.env().items():
            assert not SECRET_WORDS.search(key), f"ENV {key} bakes a secret into the image"
            assert not SECRET_VALUES.search(value), f"ENV {key} holds what looks like a secret"
            assert key not in SECRET_ENV_NAMES
        for arg in stage.all("ARG"):
            assert not SECRET_WORDS.search(arg.text), (
                f"ARG {arg.text}: build args end up in the image history"
            )
    text = (ROOT / "Dockerfile").read_text()
    assert not SECRET_VALUES.search(text)


def test_the_secret_check_catches_a_baked_token() -> None:
    (stage,) = stages("FROM x AS runtime\nENV SLACK_BOT_TOKEN=xoxb-1-2 \\\n    OTHER=1\n")
    assert stage.env() == {"SLACK_BOT_TOKEN": "xoxb-1-2", "OTHER": "1"}
    assert SECRET_WORDS.search("SLACK_BOT_TOKEN")
    assert SECRET_VALUES.search("xoxb-1-2")
    assert SECRET_VALUES.search("postgresql://flagbot:hunter2@db/flagbot")
    assert not SECRET_VALUES.search("postgresql://db/flagbot")


def test_the_healthcheck_runs_a_real_command_of_the_venv(builder: Stage, runtime: Stage) -> None:
    from typer.main import get_command

    from bot.cli.app import db_app

    check = runtime.last("HEALTHCHECK")
    assert check is not None
    options, _, command = check.text.partition("CMD ")
    assert "--interval=" in options
    assert "--timeout=" in options
    argv = _exec_argv(command)
    assert argv[0] == f"{venv_of(builder)}/bin/flagbot"
    assert argv[1:] == ["db", "current"]
    assert "current" in get_command(db_app).commands  # type: ignore[attr-defined]


def _exec_argv(text: str) -> list[str]:
    (instruction,) = instructions(f"CMD {text}")
    argv = instruction.exec_form()
    assert argv is not None, "exec form: no shell in the healthcheck"
    return argv


def test_the_reader_joins_continuations_and_skips_comments() -> None:
    found = instructions(
        "# c\nARG B=img:1\nFROM ${B} AS one\nRUN a \\\n  # inside\n  && b\nCOPY --from=one /x /y\n"
    )
    assert [(i.keyword, i.text) for i in found] == [
        ("ARG", "B=img:1"),
        ("FROM", "${B} AS one"),
        ("RUN", "a && b"),
        ("COPY", "--from=one /x /y"),
    ]
    (stage,) = stages("ARG B=img:1\nFROM ${B} AS one\nCOPY --from=zero /x /y\n")
    assert stage.base == "img:1"
    (copy,) = copies(stage)
    assert (copy.from_stage, copy.sources, copy.dest) == ("zero", ["/x"], "/y")
