"""One cgroup per node, in every mounted hierarchy, under a testbed-owned parent.

Why: with no systemd on the host, `systemd-nspawn` puts the container's tree under `payload/`
of the cgroup it was *started from*. Two nodes started from one cgroup share that payload, so
a unit's processes land in one directory and stopping the unit on one node does not kill its
process (testbed.md, Addendum 1). Each nspawn is therefore started inside
`<hierarchy>/flagbot-testbed/<i>/n<k>`, which also lets teardown find and kill every process
of a node that crashed or was orphaned, and lets tests freeze a node (freezer controller).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from pathlib import Path

from flagbot_lab.testbed.layout import TestbedError
from flagbot_lab.testbed.system import mounts

CGROUP_FS = Path("/sys/fs/cgroup")


def hierarchies() -> list[Path]:
    """Mount points of every cgroup (v1) and cgroup2 hierarchy under /sys/fs/cgroup."""
    found = [
        Path(point)
        for _, point, fstype in mounts()
        if fstype in ("cgroup", "cgroup2") and Path(point).is_relative_to(CGROUP_FS)
    ]
    return sorted(set(found))


def _copy_cpuset(path: Path) -> None:
    """A v1 cpuset cgroup starts with no CPUs and memory nodes: joining it fails with ENOSPC."""
    for name in ("cpuset.cpus", "cpuset.mems"):
        own = path / name
        if own.exists() and not own.read_text().strip():
            own.write_text((path.parent / name).read_text())


def create(relative: str) -> list[Path]:
    """Create `relative` (e.g. `flagbot-testbed/201/n0`) in every hierarchy; return the paths."""
    made = []
    for hierarchy in hierarchies():
        path = hierarchy
        for part in relative.split("/"):
            path = path / part
            path.mkdir(exist_ok=True)
            _copy_cpuset(path)
        made.append(path)
    return made


def join(paths: list[Path]) -> None:
    """Move the calling process into `paths` (run in the child before exec'ing nspawn)."""
    pid = str(os.getpid())
    for path in paths:
        (path / "cgroup.procs").write_text(pid)


def _tree(relative: str) -> list[Path]:
    """Every directory of `relative`'s subtree in every hierarchy, deepest first."""
    out: list[Path] = []
    for hierarchy in hierarchies():
        top = hierarchy / relative
        if top.is_dir():
            for dirpath, _, _ in os.walk(top):
                out.append(Path(dirpath))
    return sorted(out, key=lambda p: len(p.parts), reverse=True)


def pids(relative: str) -> set[int]:
    """Processes in `relative`'s subtree, in any hierarchy."""
    found: set[int] = set()
    for path in _tree(relative):
        with contextlib.suppress(OSError):
            found.update(int(pid) for pid in (path / "cgroup.procs").read_text().split())
    return found


def exists(relative: str) -> bool:
    return any((hierarchy / relative).is_dir() for hierarchy in hierarchies())


def set_frozen(relative: str, frozen: bool) -> None:
    """Freeze or thaw a node: its processes stop dead (a hung host), then resume."""
    for hierarchy in hierarchies():
        v1, v2 = hierarchy / relative / "freezer.state", hierarchy / relative / "cgroup.freeze"
        if v1.exists():
            v1.write_text("FROZEN" if frozen else "THAWED")
            return
        if v2.exists():
            v2.write_text("1" if frozen else "0")
            return
    raise TestbedError(f"no freezer for cgroup {relative}")


def kill_all(relative: str, *, deadline: float) -> None:
    """SIGKILL every process of the subtree until none is left (new ones may fork meanwhile)."""
    with contextlib.suppress(TestbedError, OSError):
        set_frozen(relative, False)  # a frozen process cannot die
    while True:
        alive = pids(relative)
        if not alive:
            return
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise TestbedError(f"processes {sorted(alive)} of cgroup {relative} survived SIGKILL")
        time.sleep(0.02)


def remove(relative: str, *, deadline: float) -> None:
    """Remove the subtree in every hierarchy (children first); retry while the kernel drains it."""
    while True:
        busy = []
        for path in _tree(relative):
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                    raise
                busy.append(path)
        if not busy:
            return
        if time.monotonic() > deadline:
            raise TestbedError(f"cgroups still busy: {', '.join(map(str, busy))}")
        time.sleep(0.02)


def remove_parent_if_empty() -> None:
    """Drop `flagbot-testbed/` itself once no instance has a cgroup left in it."""
    from flagbot_lab.testbed.layout import CGROUP_PARENT

    for hierarchy in hierarchies():
        with contextlib.suppress(OSError):
            (hierarchy / CGROUP_PARENT).rmdir()
