"""The sudoers file for flagbot's deploy user, generated from the one command table.

The same table (`bot/target/privileged.py`) drives what flagbot runs and what sudo allows, so
the two cannot drift apart: a privileged command flagbot does not run is never granted, and one
it runs is always granted exactly, with every argument spelled out.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bot.config.schema import Target
from bot.target.privileged import COMMANDS, PROGRAMS, USER_NAME, ParamError, render, unit_name

_SUDOERS_SPECIAL = re.compile(r"([\\,:=])")


def _sudoers_word(text: str) -> str:
    """sudoers(5): `,` `:` `=` and `\\` in command arguments are escaped; glob characters refused."""
    if re.search(r"[*?\[\]\s!#\"']", text):
        raise ParamError(f"{text!r} cannot appear in an exact sudoers rule")
    return _SUDOERS_SPECIAL.sub(r"\\\1", text)


def sudoers_text(
    user: str, unit: str, *, programs: Mapping[str, str] = PROGRAMS, for_nodes: str | None = None
) -> str:
    """The sudoers file that lets `user` run exactly the privileged commands for `unit`.

    One line per command, absolute paths, every argument spelled out: sudo then refuses any
    other argument list, path or unit. Install it as `/etc/sudoers.d/flagbot` (mode 0440) after
    checking it with `validate_sudoers`. `for_nodes` (e.g. `node 1 (ops@10.0.0.2:22) of gb200`)
    adds a comment saying where it belongs: with a unit per node, each node's file differs.
    """
    if not USER_NAME.match(user):
        raise ParamError(f"user: {user!r} is not a login name")
    unit_name(unit)
    lines = [
        f"# flagbot: what {user} may run as root for {unit}. Generated from bot/target/privileged.py;",
        "# one exact command per line (no wildcards). Regenerate instead of editing.",
    ]
    if for_nodes is not None:
        lines.append(f"# install on {for_nodes} only, as /etc/sudoers.d/flagbot")
    for command in COMMANDS.values():
        if command.privileged:
            params = {"unit": unit} if "unit" in command.required else {}
            argv = render(command.name, sudo=False, programs=programs, **params).argv
            if not argv[0].startswith("/"):
                raise ParamError(f"{command.program}: sudoers needs an absolute path, got {argv[0]!r}")
            words = " ".join(_sudoers_word(word) for word in argv)
            lines.append(f"{user} ALL=(root) NOPASSWD: {words}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class NodeSudoers:
    """The sudoers file of the nodes of a target that share one login and one unit."""

    nodes: tuple[int, ...]
    hosts: tuple[str, ...]
    user: str
    unit: str
    text: str


def target_sudoers(
    name: str, target: Target, *, user: str | None = None, node: int | None = None
) -> list[NodeSudoers]:
    """One sudoers file per (login, unit) pair of `target`'s nodes, node order, each saying which
    nodes it is for. A head and a worker with different units get different files: the head's
    grants nothing for the worker's unit. `user` overrides every node's login; `node` keeps the
    file of that node only."""
    if node is not None and not 0 <= node < len(target.nodes):
        raise ParamError(f"node: {name} has nodes 0 to {len(target.nodes) - 1}, not {node}")
    groups: dict[tuple[str, str], list[int]] = {}
    for index, host in enumerate(target.nodes):
        if node is None or index == node:
            groups.setdefault((user or host.user, target.unit_of(index)), []).append(index)
    files = []
    for (login, unit), indexes in groups.items():
        hosts = tuple(f"{login}@{target.nodes[k].host}:{target.nodes[k].port}" for k in indexes)
        which = ", ".join(f"node {k} ({where})" for k, where in zip(indexes, hosts, strict=True))
        text = sudoers_text(login, unit, for_nodes=f"{which} of {name}")
        files.append(NodeSudoers(tuple(indexes), hosts, login, unit, text))
    return files


def needed_commands(unit: str, *, programs: Mapping[str, str] = PROGRAMS) -> list[str]:
    """Each privileged command flagbot runs for `unit`, as sudo lists it (`sudo -l`): the program's
    absolute path and every argument, words joined by single spaces, unescaped."""
    unit_name(unit)
    needed = []
    for command in COMMANDS.values():
        if command.privileged:
            params = {"unit": unit} if "unit" in command.required else {}
            needed.append(" ".join(render(command.name, sudo=False, programs=programs, **params).argv))
    return needed


_RUNAS = re.compile(r"^\((?P<runas>[^)]*)\)\s*(?P<rest>.*)$")
_TAG = re.compile(r"^(?P<tag>[A-Z_]+):\s*")
_UNESCAPE = re.compile(r"\\(.)")


def granted_commands(listing: str) -> tuple[set[str], bool]:
    """(the commands `sudo -n -l` says the login may run as root without a password, whether
    that includes `ALL`). Reads the lines after "may run the following commands"; a command
    behind `PASSWD:` (or without `NOPASSWD:`) is not usable by flagbot, whose sudo never prompts."""
    granted: set[str] = set()
    everything = False
    listed = False
    for raw in listing.splitlines():
        line = raw.strip()
        if "may run the following commands" in line:
            listed = True
            continue
        found = _RUNAS.match(line) if listed else None
        if found is None:
            continue
        runas = found["runas"].split(":")[0]
        as_root = any(user.strip() in ("root", "ALL") for user in runas.split(","))
        nopasswd = False
        for item in re.split(r"(?<!\\),\s*", found["rest"]):
            command = item.strip()
            while (tag := _TAG.match(command)) is not None:
                if tag["tag"] in ("NOPASSWD", "PASSWD"):
                    nopasswd = tag["tag"] == "NOPASSWD"
                command = command[tag.end() :]
            if not (as_root and nopasswd and command):
                continue
            if command == "ALL":
                everything = True
            granted.add(_UNESCAPE.sub(r"\1", " ".join(command.split())))
    return granted, everything


def missing_grants(listing: str, unit: str, *, programs: Mapping[str, str] = PROGRAMS) -> list[str]:
    """The privileged commands flagbot needs for `unit` that `sudo -n -l`'s `listing` does not
    grant (a rule with a sudo wildcard counts when it matches)."""
    granted, everything = granted_commands(listing)
    if everything:
        return []
    return [
        needed
        for needed in needed_commands(unit, programs=programs)
        if needed not in granted
        and not any(("*" in rule or "?" in rule) and fnmatch.fnmatchcase(needed, rule) for rule in granted)
    ]


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
