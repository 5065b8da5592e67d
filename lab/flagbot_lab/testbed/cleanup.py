"""Idempotent teardown of one instance, and the checker that proves nothing is left.

Teardown works from the instance number alone (names in `layout`), so it also cleans a run
that crashed and lost its state: stop the nodes (a clean halt first, bounded, then SIGKILL of
every process in the node cgroups), unmount, remove cgroups, links, namespaces, and the files
nspawn leaves under /run/systemd because /run is not a tmpfs on this machine kind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import time
from pathlib import Path

from flagbot_lab.testbed import cgroups, network
from flagbot_lab.testbed.layout import CGROUP_PARENT, RUNTIME_BASE, TestbedError
from flagbot_lab.testbed.system import cmdline, mounts, pid_alive, run, tool

NSPAWN_RUN = Path("/run/systemd/nspawn")
NSPAWN_DIRS = (NSPAWN_RUN / "propagate", NSPAWN_RUN / "locks", NSPAWN_RUN, Path("/run/systemd/nspawn-root"))
GRACE_SECONDS = 3.0
"""A clean halt of a node takes ~1.5 s; past this, every process of the node is killed."""


def _source_re(instance: int) -> re.Pattern[str]:
    return re.compile(rf"^fbtb{instance}n\d+$")


def nspawn_pids(instance: int) -> set[int]:
    """nspawn processes of the instance, found by cgroup and by command line (belt and braces)."""
    machine = re.compile(rf"^--machine=fb{instance}n\d+$")
    found = set()
    candidates = cgroups.pids(f"{CGROUP_PARENT}/{instance}")
    candidates |= {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
    for pid in candidates:
        argv = cmdline(pid)
        if argv and argv[0].endswith("systemd-nspawn") and any(machine.match(arg) for arg in argv):
            found.add(pid)
    return found


def _stop_nodes(instance: int) -> None:
    relative = f"{CGROUP_PARENT}/{instance}"
    supervisors = nspawn_pids(instance)
    for pid in supervisors:  # nspawn turns SIGTERM into a clean poweroff of the container
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while any(pid_alive(pid) for pid in supervisors) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in nspawn_pids(instance):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cgroups.kill_all(relative, deadline=time.monotonic() + 10)


def _unmount(instance: int) -> list[str]:
    """Unmount the instance's overlays and tmpfs; return nspawn's lock files of those roots
    (`/run/systemd/nspawn/locks/inode-<dev>:<ino>` of each root, left there by a crashed nspawn)."""
    pattern = _source_re(instance)
    ours = [point for source, point, _ in mounts() if pattern.match(source)]
    locks = []
    for source, point, fstype in mounts():
        if pattern.match(source) and fstype == "overlay":
            with contextlib.suppress(OSError):
                stat = os.stat(point)
                locks.append(str(NSPAWN_RUN / "locks" / f"inode-{stat.st_dev}:{stat.st_ino}"))
    for point in sorted(ours, key=lambda p: p.count("/"), reverse=True):
        result = run([tool("umount"), point], check=False)
        if result.returncode != 0:  # busy only if something outside the node holds it
            run([tool("umount"), "--lazy", point])
    return locks


def _nspawn_leftovers(instance: int, lock_files: list[str]) -> None:
    propagate = NSPAWN_RUN / "propagate"
    if propagate.is_dir():
        for entry in propagate.iterdir():
            if re.fullmatch(rf"fb{instance}n\d+", entry.name):
                shutil.rmtree(entry, ignore_errors=True)
    for lock in lock_files:
        Path(lock).unlink(missing_ok=True)
    for directory in NSPAWN_DIRS:  # shared by instances: removed only when empty
        with contextlib.suppress(OSError):
            directory.rmdir()


def _lock_files(state_file: Path | None) -> list[str]:
    if state_file is None or not state_file.exists():
        return []
    with contextlib.suppress(ValueError, OSError):
        state = json.loads(state_file.read_text())
        return [str(node["nspawn_lock"]) for node in state.get("nodes", []) if node.get("nspawn_lock")]
    return []


def _remove_runtime_dir(instance: int) -> None:
    """The mount points (and nspawn's `.#root.lck` next to each root), once nothing is mounted."""
    runtime = RUNTIME_BASE / str(instance)
    if not runtime.is_dir():
        return
    mounted = [point for _, point, _ in mounts() if Path(point).is_relative_to(runtime)]
    if mounted:
        raise TestbedError(f"still mounted, not removing {runtime}: {', '.join(mounted)}")
    shutil.rmtree(runtime)


def teardown(instance: int, instance_dir: Path | None = None) -> None:
    """Leave nothing of `instance` running or mounted; safe to call any number of times."""
    _stop_nodes(instance)
    locks = _unmount(instance)
    cgroups.remove(f"{CGROUP_PARENT}/{instance}", deadline=time.monotonic() + 10)
    cgroups.remove_parent_if_empty()
    network.remove_instance(instance)
    recorded = _lock_files(instance_dir / "state.json" if instance_dir else None)
    _nspawn_leftovers(instance, sorted(set(locks + recorded)))
    _remove_runtime_dir(instance)
    problems = leftovers(instance)
    if problems:
        raise TestbedError(f"teardown of instance {instance} left: {'; '.join(problems)}")


def leftovers(instance: int) -> list[str]:
    """Everything of `instance` still on the host: processes, mounts, cgroups, links, routes."""
    found = [f"nspawn process {pid}" for pid in sorted(nspawn_pids(instance))]
    relative = f"{CGROUP_PARENT}/{instance}"
    found += [f"process {pid} in cgroup {relative}" for pid in sorted(cgroups.pids(relative))]
    if cgroups.exists(relative):
        found.append(f"cgroup {relative}")
    pattern = _source_re(instance)
    found += [f"mount {point} ({fstype})" for source, point, fstype in mounts() if pattern.match(source)]
    found += network.leftovers(instance)
    if (RUNTIME_BASE / str(instance)).exists():
        found.append(f"directory {RUNTIME_BASE / str(instance)}")
    propagate = NSPAWN_RUN / "propagate"
    if propagate.is_dir():
        found += [
            f"nspawn directory {entry}"
            for entry in propagate.iterdir()
            if re.fullmatch(rf"fb{instance}n\d+", entry.name)
        ]
    return found
