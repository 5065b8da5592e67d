"""The sudoers file for flagbot's deploy user, generated from the one command table.

The same table (`bot/target/privileged.py`) drives what flagbot runs and what sudo allows, so
the two cannot drift apart: a privileged command flagbot does not run is never granted, and one
it runs is always granted exactly, with every argument spelled out.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bot.target.privileged import COMMANDS, PROGRAMS, USER_NAME, ParamError, render, unit_name

_SUDOERS_SPECIAL = re.compile(r"([\\,:=])")


def _sudoers_word(text: str) -> str:
    """sudoers(5): `,` `:` `=` and `\\` in command arguments are escaped; glob characters refused."""
    if re.search(r"[*?\[\]\s!#\"']", text):
        raise ParamError(f"{text!r} cannot appear in an exact sudoers rule")
    return _SUDOERS_SPECIAL.sub(r"\\\1", text)


def sudoers_text(user: str, unit: str, *, programs: Mapping[str, str] = PROGRAMS) -> str:
    """The sudoers file that lets `user` run exactly the privileged commands for `unit`.

    One line per command, absolute paths, every argument spelled out: sudo then refuses any
    other argument list, path or unit. Install it as `/etc/sudoers.d/flagbot` (mode 0440) after
    checking it with `validate_sudoers`.
    """
    if not USER_NAME.match(user):
        raise ParamError(f"user: {user!r} is not a login name")
    unit_name(unit)
    lines = [
        f"# flagbot: what {user} may run as root for {unit}. Generated from bot/target/privileged.py;",
        "# one exact command per line (no wildcards). Regenerate instead of editing.",
    ]
    for command in COMMANDS.values():
        if command.privileged:
            params = {"unit": unit} if "unit" in command.required else {}
            argv = render(command.name, sudo=False, programs=programs, **params).argv
            if not argv[0].startswith("/"):
                raise ParamError(f"{command.program}: sudoers needs an absolute path, got {argv[0]!r}")
            words = " ".join(_sudoers_word(word) for word in argv)
            lines.append(f"{user} ALL=(root) NOPASSWD: {words}")
    return "\n".join(lines) + "\n"


def missing_programs(root: Path = Path("/"), *, programs: Mapping[str, str] = PROGRAMS) -> list[str]:
    """Privileged programs whose absolute path does not exist under `root` (a node's tree)."""
    needed = {COMMANDS[name].program for name in COMMANDS if COMMANDS[name].privileged}
    return sorted(programs[prog] for prog in needed if not (root / programs[prog].lstrip("/")).exists())


def validate_sudoers(text: str, *, visudo: str = "/usr/sbin/visudo") -> None:
    """Run `visudo -cf` on `text`; raise `ValueError` with visudo's message when it is refused."""
    with tempfile.NamedTemporaryFile("w", prefix="flagbot-sudoers-", suffix=".tmp") as handle:
        handle.write(text)
        handle.flush()
        result = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [visudo, "-cf", handle.name], capture_output=True, text=True, check=False
        )
    if result.returncode != 0:
        raise ValueError(f"visudo refused the sudoers file: {(result.stderr or result.stdout).strip()}")
