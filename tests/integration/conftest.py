"""Integration fixtures: two real nodes (systemd, journald, sshd, sudo) for the whole session.

The nodes are booted once per session on testbed instance 201 (`FLAGBOT_TESTBED_INSTANCE`
overrides it, for two sessions side by side), so a running demo (instance 1) is never touched,
with a base dir under pytest's tmp dir; the finalizer always tears them down and asserts that
nothing is left. A session that finds the instance in use by another live session fails with
that reason instead of tearing the other one down. Without root or the Debian packages the tests are skipped
with the reason; `make test` (as root on CI) installs the packages, so there they run.

The nodes run the SGLang twin (`flagbot_lab.twin.install`) with the `seed-gb10` scenario: two ranks that
rendezvous over the bridge, as the demo runs them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from bot.target.privileged import Rendered
from flagbot_lab.testbed import (
    OPS_USER,
    TEST_INSTANCE,
    Testbed,
    leftovers,
    unavailable_reason,
)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """Two booted nodes with the twin healthy on node 0; torn down (and checked) at the end."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"testbed unavailable: {reason}")
    instance = int(os.environ.get("FLAGBOT_TESTBED_INSTANCE", TEST_INSTANCE))
    bed = Testbed(instance, tmp_path_factory.mktemp("testbed"), nodes=2, scenario="seed-gb10")
    bed.up(replace=True)  # the instance belongs to the tests: replace a crashed session's nodes
    try:
        bed.wait_healthy(timeout=180)
        yield bed
    finally:
        bed.down()
        assert leftovers(instance) == []


class NodeShells:
    """One reused SSH connection per node, as `ops`, with known_hosts verification.

    A login costs ~0.3 s (a user manager starts on each), a command on an open connection ~10 ms.
    A connection found closed is opened again: the SSH drop tests kill every `sshd: ops` session
    of a node, this one's included.
    """

    def __init__(self, bed: Testbed) -> None:
        self.bed = bed
        self._conns: dict[int, Any] = {}

    async def connection(self, k: int) -> Any:
        import asyncssh

        if k not in self._conns or self._conns[k].is_closed():  # a test dropped it (ssh_faults)
            self._conns[k] = await asyncssh.connect(
                self.bed.addresses[k],
                username=OPS_USER,
                client_keys=[str(self.bed.client_key)],
                known_hosts=str(self.bed.known_hosts),
                agent_path=None,
            )
        return self._conns[k]

    async def run(self, k: int, command: Rendered | str, *, input: str = "", timeout: float = 30) -> Any:
        """Run `command` on node k; stdin gets `input` and then EOF, also when `input` is empty
        (asyncssh's `run(input="")` sends no EOF: `tee` would wait for ever)."""
        text = command.shell if isinstance(command, Rendered) else command
        conn = await self.connection(k)

        async def go() -> Any:
            process = await conn.create_process(text)
            if input:
                process.stdin.write(input)
            process.stdin.write_eof()
            return await process.wait(check=False)

        return await asyncio.wait_for(go(), timeout)

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
            await conn.wait_closed()
        self._conns.clear()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ssh_ops(testbed: Testbed) -> AsyncIterator[NodeShells]:
    shells = NodeShells(testbed)
    try:
        yield shells
    finally:
        await shells.close()
