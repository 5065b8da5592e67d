"""A throwaway PostgreSQL server: initdb + pg_ctl in a temporary folder, on a free loopback port.

Real PostgreSQL, not a mock: the store must behave the same on it as on SQLite. Started once
per test session, stopped (and its folder removed) at the end even when tests fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def postgres_bin() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    return Path(candidates[0]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    """initdb refuses to run as root; as root, run it as the package's `postgres` user."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


def unavailable_reason() -> str | None:
    if postgres_bin() is None:
        return "PostgreSQL server binaries not installed (make test installs the Debian package)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "no postgres user to run initdb as"
    return None


@contextmanager
def running_postgres() -> Iterator[str]:
    """Yield a SQLAlchemy URL of a fresh database; stop the server and delete its files afterwards."""
    bindir = postgres_bin()
    assert bindir is not None
    base = Path(tempfile.mkdtemp(prefix="flagbot-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    data, port = base / "data", _free_port()
    run = lambda *args: subprocess.run(_as_postgres([str(a) for a in args]), check=True, capture_output=True)
    try:
        run(bindir / "initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        run(
            bindir / "pg_ctl",
            "-D",
            data,
            "-l",
            base / "pg.log",
            "-w",
            "-o",
            f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )
        try:
            run(bindir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "flagbot_test")
            yield f"postgresql://postgres@127.0.0.1:{port}/flagbot_test"
        finally:
            run(bindir / "pg_ctl", "-D", data, "-w", "-m", "fast", "stop")
    finally:
        shutil.rmtree(base, ignore_errors=True)
