"""Run a command as root inside a node, the way an operator with a root shell on the host would.

Why: tests play people who act on a node outside flagbot (an operator restarting the unit by
hand). They must not do it through flagbot's sudo grant, or the grant would have to hold what
flagbot itself never runs. The nodes boot with `systemd-nspawn --register=no` (no machined, no
`machinectl shell`), so this enters the namespaces of the node's init with `nsenter`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

from flagbot_lab.testbed.layout import TestbedError

NSENTER: Final = "/usr/bin/nsenter"
ENV: Final = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LC_ALL": "C",
    "SYSTEMD_PAGER": "",
    "SYSTEMD_COLORS": "0",
}
"""A clean environment: nothing of the test process (its PATH, its venv) leaks into the node."""


def _status(pid: int, proc: Path) -> dict[str, str]:
    try:
        lines = (proc / str(pid) / "status").read_text().splitlines()
    except OSError:  # gone meanwhile
        return {}
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def init_pid(pids: Iterable[int], *, nspawn_pid: int | None = None, proc: Path = Path("/proc")) -> int:
    """The host PID of a node's init: among the node cgroup's `pids`, the one that is PID 1 of its
    own PID namespace (the last field of `NSpid`). nspawn reaps its children, so init's parent is
    the nspawn process; when `nspawn_pid` is known, a candidate with another parent is refused."""
    found = []
    for pid in sorted(pids):
        status = _status(pid, proc)
        nspids = status.get("NSpid", "").split()
        parent_ok = nspawn_pid is None or status.get("PPid", "").strip() == str(nspawn_pid)
        if len(nspids) > 1 and nspids[-1] == "1" and parent_ok:
            found.append(pid)
    if len(found) != 1:
        raise TestbedError(f"expected one init process among {sorted(pids)}, found {found}")
    return found[0]


def nsenter_argv(pid: int, argv: Sequence[str]) -> list[str]:
    """`nsenter` into init's mount, UTS, IPC, network and PID namespaces, root and working dir."""
    if not argv or not all(isinstance(word, str) and word for word in argv):
        raise TestbedError(f"a command is a non-empty list of non-empty words, got {list(argv)!r}")
    nsenter = NSENTER if os.path.exists(NSENTER) else (shutil.which("nsenter") or NSENTER)
    namespaces = ["--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd"]
    return [nsenter, f"--target={pid}", *namespaces, "--", *argv]


def run_in(
    pid: int, argv: Sequence[str], *, timeout: float, input: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `argv` (a list, no shell) as root in the namespaces of host process `pid`."""
    return subprocess.run(  # noqa: S603 - argv list, no shell
        nsenter_argv(pid, argv),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        check=False,
    )
