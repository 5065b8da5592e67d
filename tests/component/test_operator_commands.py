"""The commands docs/operations.md gives an operator, run here as far as they can run.

Not run here, and why: creating the Slack app and its tokens (a real workspace), `docker build`
and `docker run` (no Docker engine; tests/component/test_docker_image.py rebuilds the image's
venv instead), `systemctl enable --now flagbot` (a sample unit for a real host), `ssh-keygen`,
`ssh-keyscan` and installing the sudoers file on GPU nodes (real hosts; the testbed does the same
with the same generated file), `createuser`/`createdb` (PostgreSQL administration; `flagbot db
upgrade` on PostgreSQL is covered by the store tests).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bot.target import sudoers_text

ROOT = Path(__file__).parents[2]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
FLAGBOT = Path(sys.executable).parent / "flagbot"


def _python_c(prefix: str) -> list[str]:
    """The `python -c CODE ARGS...` words of the docs' line that starts with `prefix`."""
    (line,) = [line for line in OPERATIONS.splitlines() if line.startswith(prefix)]
    words = shlex.split(line.split(" > ", 1)[0])
    start = words.index("-c")
    return words[start:]


def _flagbot_words(prefix: str) -> list[str]:
    """The words after `flagbot` of the docs' line that starts with `prefix` (redirection cut)."""
    (line,) = [line for line in OPERATIONS.splitlines() if line.startswith(prefix)]
    words = shlex.split(line.split(" > ", 1)[0])
    return words[words.index("sudoers") :]


def _env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "FLAGBOT_"))}
    return {**keep, **extra}


def test_the_sudoers_command_prints_the_generated_file(tmp_path: Path) -> None:
    native = _flagbot_words("flagbot sudoers --user")
    docker = _flagbot_words("docker run --rm flagbot sudoers")
    assert native == docker
    printed = subprocess.run(
        [str(FLAGBOT), *native], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert printed == sudoers_text("flagbot", "sglang-qwen.service")
    assert "NOPASSWD: /usr/bin/systemctl stop sglang-qwen.service" in printed
    assert "NOPASSWD: /usr/bin/systemctl start sglang-qwen.service" in printed
    assert "systemctl restart" not in printed  # flagbot restarts as stop, then start: not granted
    visudo = shutil.which("visudo") or "/usr/sbin/visudo"
    if not Path(visudo).exists():
        pytest.skip("visudo is not installed (make deps installs sudo)")
    (tmp_path / "flagbot.sudoers").write_text(printed)
    checked = subprocess.run(
        [visudo, "-cf", str(tmp_path / "flagbot.sudoers")], capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


def _run(cwd: Path, *words: str) -> subprocess.CompletedProcess[str]:
    """`flagbot WORDS` in `cwd`, its output as text (the caller asserts on the exit status)."""
    return subprocess.run(
        [str(FLAGBOT), *words], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=60, check=False
    )


def test_sudoers_for_a_target_of_the_config_uses_its_login_and_unit(tmp_path: Path) -> None:
    config = re.findall(r"```toml\n(.*?)```", OPERATIONS, re.DOTALL)[0]  # section 4's; 4a's are layouts
    (tmp_path / "flagbot.toml").write_text(config)
    printed = {}
    for prefix in ("flagbot sudoers target=sglang-qwen >", "flagbot sudoers target=sglang-qwen node="):
        run = _run(tmp_path, "--config", str(tmp_path / "flagbot.toml"), *_flagbot_words(prefix))
        assert run.returncode == 0, run.stderr
        printed[prefix] = run.stdout
    both = "node 0 (flagbot@10.0.0.11:22), node 1 (flagbot@10.0.0.12:22) of sglang-qwen"
    assert printed["flagbot sudoers target=sglang-qwen >"] == sudoers_text(
        "flagbot", "sglang-qwen.service", for_nodes=both
    )
    assert printed["flagbot sudoers target=sglang-qwen node="] == sudoers_text(
        "flagbot", "sglang-qwen.service", for_nodes="node 1 (flagbot@10.0.0.12:22) of sglang-qwen"
    )
    bad = _run(tmp_path, "sudoers", "--user", "x;reboot", "--unit", "sglang-qwen.service")
    assert bad.returncode == 2 and bad.stdout == "" and "not a login name" in bad.stderr


def test_the_config_shown_passes_config_check(tmp_path: Path) -> None:
    config = re.findall(r"```toml\n(.*?)```", OPERATIONS, re.DOTALL)[0]  # section 4's; 4a's are layouts
    (tmp_path / "flagbot.toml").write_text(config)
    checked = subprocess.run(
        [str(FLAGBOT), "--config", str(tmp_path / "flagbot.toml"), "config", "check"],
        cwd=tmp_path,
        env=_env(SLACK_BOT_TOKEN="xoxb-not-shown"),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stderr
    assert "targets: sglang-qwen (default: sglang-qwen)" in checked.stdout
    assert "SLACK_BOT_TOKEN: set" in checked.stdout
    assert "xoxb-not-shown" not in checked.stdout + checked.stderr


def test_the_online_backup_copies_a_live_database(tmp_path: Path) -> None:
    upgraded = subprocess.run(
        [str(FLAGBOT), "db", "upgrade"], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert upgraded.returncode == 0, upgraded.stderr
    revision = upgraded.stdout.strip().rsplit(" ", 1)[-1]
    live = sqlite3.connect(tmp_path / "state" / "flagbot.db")  # held open, in WAL mode, as the bot does
    live.execute("PRAGMA journal_mode=WAL")
    live.execute(
        "INSERT INTO audit_event (at, actor, target, action, detail) "
        "VALUES ('2026-01-01 00:00:00', 'cli:test', 'sglang-qwen', 'backup-probe', '{}')"
    )
    live.commit()
    backup = _python_c("/opt/flagbot/venv/bin/python -c 'import sqlite3")
    done = subprocess.run([sys.executable, *backup], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    live.close()
    copy = sqlite3.connect(tmp_path / "state" / "flagbot-backup.db")
    try:
        assert copy.execute("SELECT version_num FROM alembic_version").fetchone() == (revision,)
        assert copy.execute("SELECT action FROM audit_event").fetchall() == [("backup-probe",)]
    finally:
        copy.close()
