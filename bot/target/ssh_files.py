"""The files on the bot host that an SSH connection needs: the private key and known_hosts.

Why checked before connecting: asyncssh reports a missing key file as an `OSError` of the
connect ("[Errno 2] ...") and a missing known_hosts as an unverifiable host key, so the node
looked unreachable or hostile when the fault was a path in flagbot.toml. Each function returns
what is wrong in a few words (None when nothing is), for `LocalFileError` and for
`flagbot config check --connect`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import asyncssh

__all__ = ["key_file_problem", "key_permissions_problem", "known_hosts_entry_problem", "known_hosts_problem"]


def _may_read(path: Path) -> bool:
    """This process may read `path` (root may read any file: mode 000 stops only other users)."""
    return os.access(path, os.R_OK)


def _readable_file(path: Path) -> str | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a file"
    if not _may_read(path):
        return "is not readable by this user (permission denied)"
    return None


def key_file_problem(path: Path) -> str | None:
    """Missing, unreadable, or not a private key asyncssh can load without a passphrase."""
    problem = _readable_file(path)
    if problem is not None:
        return problem
    try:
        asyncssh.read_private_key(path)
    except asyncssh.KeyImportError as exc:
        said = str(exc)
        if "assphrase" in said:
            return "is protected by a passphrase (flagbot has none to give; use a key without one)"
        return f"is not a private key asyncssh can load ({said})"
    except (OSError, ValueError) as exc:
        return f"cannot be read ({exc})"
    return None


def key_permissions_problem(path: Path) -> str | None:
    """Group or others may read the key (OpenSSH's `ssh` refuses such a key; asyncssh does not)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if mode & 0o077:
        return f"is readable by group or others (mode {stat.S_IMODE(mode):04o}; chmod 600)"
    return None


def known_hosts_problem(path: Path) -> str | None:
    """Missing or unreadable, or not a known_hosts file asyncssh can read."""
    problem = _readable_file(path)
    if problem is not None:
        return problem
    try:
        asyncssh.read_known_hosts(str(path))
    except (OSError, ValueError, asyncssh.Error) as exc:
        return f"cannot be read as known_hosts ({exc})"
    return None


def known_hosts_entry_problem(path: Path, host: str, port: int) -> str | None:
    """known_hosts has no host key for `host` at `port` (`[host]:port` when the port is not 22)."""
    try:
        known = asyncssh.read_known_hosts(str(path))
        trusted, ca_keys, *_ = known.match(host, "", port)
    except (OSError, ValueError, asyncssh.Error) as exc:
        return f"cannot be read as known_hosts ({exc})"
    if trusted or ca_keys:
        return None
    name = host if port == 22 else f"[{host}]:{port}"
    return f"has no entry for {name}"
