"""Running host tools, and the preflight checks that turn a missing tool into one clear line.

Every command is an argv list: names and paths come from `Layout`, never from a shell string.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from flagbot_lab.testbed.layout import TestbedError

TOOLS: Final[dict[str, tuple[str, str]]] = {
    # what the testbed runs: (path or name, Debian package that provides it)
    "systemd-nspawn": ("/usr/bin/systemd-nspawn", "systemd-container"),
    "sshd": ("/usr/sbin/sshd", "openssh-server"),
    "ssh-keygen": ("/usr/bin/ssh-keygen", "openssh-client"),
    "sudo": ("/usr/bin/sudo", "sudo"),
    "visudo": ("/usr/sbin/visudo", "sudo"),
    "ip": ("/usr/sbin/ip", "iproute2"),
    "mount": ("/usr/bin/mount", "mount"),
    "umount": ("/usr/bin/umount", "mount"),
    "chroot": ("/usr/sbin/chroot", "coreutils"),
    "useradd": ("/usr/sbin/useradd", "passwd"),
    "python3": ("/usr/bin/python3", "python3"),
}
DEB_PACKAGES: Final = ("openssh-server", "sudo", "systemd-container", "iproute2")


def tool(name: str) -> str:
    path = TOOLS[name][0]
    if os.path.exists(path):
        return path
    found = shutil.which(name)
    return found or path


def missing_packages() -> list[str]:
    """Debian packages whose tools are absent (empty when the testbed can run)."""
    missing = [pkg for name, (_, pkg) in TOOLS.items() if not os.path.exists(tool(name))]
    return sorted(set(missing))


def unavailable_reason() -> str | None:
    """Why the testbed cannot run here, or None: not root, no packages, no overlayfs or cgroups."""
    if os.geteuid() != 0:
        return "the testbed needs root (it mounts, creates network namespaces and boots systemd-nspawn)"
    missing = missing_packages()
    if missing:
        return (
            f"missing Debian packages: {', '.join(missing)} "
            f"(apt-get install --no-install-recommends {' '.join(DEB_PACKAGES)}, or make deps)"
        )
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no cgroup file system at /sys/fs/cgroup"
    return None


def run(
    argv: Sequence[str | Path],
    *,
    check: bool = True,
    input_text: str | None = None,
    timeout: float = 30.0,
) -> subprocess.CompletedProcess[str]:
    """Run a host command; a failure raises `TestbedError` with the command and its stderr."""
    args = [str(arg) for arg in argv]
    try:
        result = subprocess.run(  # noqa: S603 - argv list, no shell
            args, input=input_text, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError:
        raise TestbedError(f"{args[0]}: not installed") from None
    except subprocess.TimeoutExpired:
        raise TestbedError(f"`{' '.join(args)}` did not finish within {timeout:g} s") from None
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise TestbedError(f"`{' '.join(args)}` failed (exit {result.returncode}): {detail}")
    return result


def replace_file(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `path` inside a node tree, replacing a symlink instead of following it.

    A symlink in the host's tree (say `/etc/resolv.conf -> /run/...`) is absolute: following it
    from the host would write the *host's* file, not the node's.
    """
    if path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, mode)


def replace_symlink(path: Path, target: str) -> None:
    if path.is_symlink() or path.exists():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


def mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, fs type) of every mount in this mount namespace, from mountinfo."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 2:
            point = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
            out.append((tail[1], point, tail[0]))
    return out


def pid_alive(pid: int) -> bool:
    """True for a running process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
