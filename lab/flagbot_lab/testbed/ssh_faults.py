"""Drop a node's SSH connections from the host, the way a dying sshd would, while the node stays up.

Why: a lost TCP connection to a host that is still up (sshd restarted, a NAT or firewall idle
cut, the session process killed) is not a host fault, and flagbot must reconnect and carry on;
the link-down and frozen-node faults of `Testbed` cannot show that. OpenSSH runs one monitor
process per connection (`sshd: ops [priv]`, root) and one unprivileged child (`sshd: ops@notty`);
SIGKILL of both closes the socket at once, the listener stays, so a new login works. The
commands the connection had started (`sudo systemctl stop ...`) live on, as they would.
Found from the host through the node's cgroup (`Layout.node_cgroup`), no SSH needed.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from flagbot_lab.testbed import cgroups
from flagbot_lab.testbed.layout import OPS_USER, Layout, TestbedError

GONE_S = 5.0
"""How long the killed processes get to disappear before that is an error."""


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    return ""


def connection_pids(layout: Layout, k: int, user: str = OPS_USER) -> list[int]:
    """Host PIDs of node k's per-connection sshd processes of `user` (monitor and session child).

    OpenSSH before 9.8 names them `sshd: <user> [priv]` and `sshd: <user>@notty` (`@pts/N` with a
    terminal); 9.8 and later `sshd-session: ...`. The listener (`sshd: /usr/sbin/sshd -D
    [listener] ...`) never matches.
    """
    pattern = re.compile(rf"^sshd(?:-session)?: {re.escape(user)}(?: \[priv\]|@)")
    return sorted(pid for pid in cgroups.pids(layout.node_cgroup(k)) if pattern.match(_cmdline(pid)))


def processes(layout: Layout, k: int, needle: str) -> list[int]:
    """Host PIDs of node k's processes whose command line contains `needle` (e.g. `systemctl stop`)."""
    return sorted(pid for pid in cgroups.pids(layout.node_cgroup(k)) if needle in _cmdline(pid))


def drop_connections(layout: Layout, k: int, user: str = OPS_USER) -> list[int]:
    """SIGKILL every SSH connection of `user` to node k; returns the PIDs once they are gone.

    Raises `TestbedError` when there is no such connection (a test that meant to cut one would
    otherwise pass without having cut anything) or when a process survives `GONE_S`.
    """
    pids = connection_pids(layout, k, user)
    if not pids:
        raise TestbedError(f"node {k} has no SSH connection of {user} to drop")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + GONE_S
    while alive := [pid for pid in pids if Path(f"/proc/{pid}").exists() and _state(pid) != "Z"]:
        if time.monotonic() > deadline:
            raise TestbedError(f"sshd processes {alive} of node {k} survived SIGKILL")
        time.sleep(0.01)
    return pids


def _state(pid: int) -> str:
    """The process state letter (`Z` for a zombie its parent has not reaped yet), "" when gone."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return ""
