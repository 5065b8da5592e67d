"""Readiness probes: sshd banners, `/health`, and the unit's state over SSH as `ops`.

All waits poll against a deadline: a node is ready when it answers, not after a guessed sleep.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bot.target.privileged import render
from flagbot_lab.testbed.layout import OPS_USER, UNIT, TestbedError

POLL = 0.05


def ssh_banner(address: str, port: int = 22, timeout: float = 0.5) -> str | None:
    """The server's `SSH-2.0-...` identification line, or None if nothing answers yet."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\r\n")[0].decode(errors="replace")
    return line if line.startswith("SSH-") else None


def wait_for_banners(addresses: list[str], *, timeout: float) -> float:
    """Wait until every address shows an SSH banner; return the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    pending = list(addresses)
    while pending:
        pending = [address for address in pending if ssh_banner(address) is None]
        if not pending:
            break
        if time.monotonic() > deadline:
            raise TestbedError(f"sshd did not answer within {timeout:g} s on {', '.join(pending)}")
        time.sleep(POLL)
    return time.monotonic() - start


def health_code(url: str, timeout: float = 1.0) -> int | None:
    """HTTP status of `url`, or None when nothing listens (connection refused or timeout)."""
    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            return client.get(url).status_code
    except httpx.HTTPError:
        return None


def wait_for_health(url: str, *, timeout: float) -> float:
    """Poll `url` until it answers 200; return the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    last: int | None = None
    with httpx.Client(timeout=1.0, trust_env=False) as client:
        while True:
            try:
                last = client.get(url).status_code
            except httpx.HTTPError:
                last = None
            if last == 200:
                return time.monotonic() - start
            if time.monotonic() > deadline:
                seen = "connection refused" if last is None else f"HTTP {last}"
                raise TestbedError(f"{url} not healthy within {timeout:g} s (last: {seen})")
            time.sleep(POLL)


@dataclass(frozen=True)
class UnitState:
    active: str
    sub: str
    restarts: str
    error: str | None = None


async def unit_state(
    address: str, *, key: Path, known_hosts: Path, timeout: float = 5.0, unit: str = UNIT
) -> UnitState:
    """`systemctl show` of the twin's unit (`unit`: the node's, by the unit layout), run as
    `ops` over SSH with host-key checking."""
    import asyncssh

    command = render("show", unit=unit, properties=["ActiveState", "SubState", "NRestarts"]).shell
    try:
        async with asyncio.timeout(timeout):
            async with asyncssh.connect(
                address, username=OPS_USER, client_keys=[str(key)], known_hosts=str(known_hosts)
            ) as conn:
                result = await conn.run(command, check=False)
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        return UnitState("?", "?", "?", error=f"{type(exc).__name__}: {exc}".strip())
    values = dict(line.split("=", 1) for line in str(result.stdout).splitlines() if "=" in line)
    return UnitState(
        values.get("ActiveState", "?"), values.get("SubState", "?"), values.get("NRestarts", "?")
    )
