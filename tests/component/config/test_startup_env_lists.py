"""The stored start-up lists (bot/config/change_rules.py) against the programs they come from:
the running interpreter's `--help-env`, and `sudo -V` as root. A name either program adds and the
product does not hold fails here, so the allow-list's exceptions cannot drift silently."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from bot.config.change_rules import PYTHON_HELP_ENV, SUDO_ENV_DELETE

_HELP_ENV_NAME = re.compile(r"^(PYTHON[A-Z0-9_]*)\s*(?:=\S*)?\s*:", re.MULTILINE)


def help_env_names(text: str) -> list[str]:
    """The variable names `python --help-env` prints (each at the start of its line, before `:`)."""
    return _HELP_ENV_NAME.findall(text)


def sudo_env_delete(text: str) -> list[str]:
    """The entries under `Environment variables to remove:` of `sudo -V` (tab-indented lines)."""
    lines = text.splitlines()
    start = lines.index("Environment variables to remove:") + 1
    entries = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        entries.append(line.strip())
    return entries


def test_the_parsers_read_the_formats_they_are_given() -> None:
    sample = (
        "PYTHONPATH   : ':'-separated list\n   more\nPYTHONWARNINGS=arg      : warning control (-W arg)\n"
    )
    assert help_env_names(sample) == ["PYTHONPATH", "PYTHONWARNINGS"]
    sudo = "x\nEnvironment variables to remove:\n\tLD_*\n\tIFS\nEnvironment variables to preserve:\n\tPATH\n"
    assert sudo_env_delete(sudo) == ["LD_*", "IFS"]


def test_every_name_the_running_interpreter_lists_is_held() -> None:
    done = subprocess.run(
        [sys.executable, "--help-env"], capture_output=True, text=True, check=True, timeout=30
    )
    names = help_env_names(done.stdout)
    assert len(names) >= 20, done.stdout  # the parser still reads the format
    missing = sorted(set(names) - set(PYTHON_HELP_ENV))
    assert not missing, (
        f"python {sys.version.split()[0]} --help-env lists {missing}: add them to PYTHON_HELP_ENV"
    )


@pytest.mark.skipif(shutil.which("sudo") is None, reason="sudo is not installed here")
@pytest.mark.skipif(os.geteuid() != 0, reason="sudo -V prints its env_delete list only to root")
def test_every_entry_of_sudo_s_env_delete_is_held() -> None:
    done = subprocess.run(["sudo", "-V"], capture_output=True, text=True, check=True, timeout=30)
    entries = sudo_env_delete(done.stdout)
    assert "LD_*" in entries, done.stdout  # the parser still reads the format
    missing = sorted(set(entries) - set(SUDO_ENV_DELETE))
    assert not missing, f"sudo -V lists {missing} to remove: add them to SUDO_ENV_DELETE"
