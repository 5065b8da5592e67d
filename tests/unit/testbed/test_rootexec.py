"""Finding a node's init among its cgroup's processes, and the nsenter argv (no testbed needed;
tests/integration/testbed/test_nodes.py runs it on the nodes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flagbot_lab.testbed.layout import TestbedError
from flagbot_lab.testbed.rootexec import init_pid, nsenter_argv


def _proc(tmp_path: Path, table: dict[int, tuple[int, str]]) -> Path:
    """A fake /proc: {pid: (ppid, "NSpid" field)}."""
    for pid, (ppid, nspid) in table.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(f"Name:\tx\nPPid:\t{ppid}\nNSpid:\t{nspid}\n")
    return tmp_path


def test_init_is_pid_1_of_its_own_namespace_and_a_child_of_nspawn(tmp_path: Path) -> None:
    # nspawn (100) itself, the container's init (101), a service inside (150 = pid 40 in the node)
    proc = _proc(tmp_path, {100: (1, "100"), 101: (100, "101\t1"), 150: (101, "150\t40")})
    assert init_pid({100, 101, 150, 999}, proc=proc) == 101  # 999: gone meanwhile
    assert init_pid({100, 101, 150}, nspawn_pid=100, proc=proc) == 101
    with pytest.raises(TestbedError, match="expected one init"):
        init_pid({100, 101, 150}, nspawn_pid=7, proc=proc)  # another nspawn's child
    with pytest.raises(TestbedError, match="expected one init"):
        init_pid({100, 150}, proc=proc)  # the node is not up


def test_nsenter_enters_the_namespaces_then_runs_the_argv_as_given() -> None:
    argv = nsenter_argv(101, ["systemctl", "restart", "a b; reboot"])
    assert argv[1:] == [
        "--target=101",
        "--mount",
        "--uts",
        "--ipc",
        "--net",
        "--pid",
        "--root",
        "--wd",
        "--",
        "systemctl",
        "restart",
        "a b; reboot",  # one word: no shell anywhere
    ]
    for bad in ([], ["systemctl", ""]):
        with pytest.raises(TestbedError, match="non-empty"):
            nsenter_argv(101, bad)
