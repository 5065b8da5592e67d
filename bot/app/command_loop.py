"""One event loop and one SSH login per node for a command that reaches its target more than once.

Why: the CLI's `try` (and every loop command whose words name a flag) first reads the target
host's flag list (`bot.app.flag_list.read_flag_list`: an SSH login to node 0, the unit, the
version), then runs its playbook, whose engine logs in to every node again. Each ran in its own
`asyncio.run`, so node 0 saw two logins per command (0.2-0.3 s each: key exchange,
authentication, a user session; issue 16 item 9). Inside `command_loop()`, `run_async` runs every
coroutine of the command on one event loop whose SSH sessions share their connections
(`bot.target.ssh_pool.pooled`, as `flagbot serve` does), closed when the command ends.

A front end opens the block around its whole command; the application layer's helpers the CLI
calls (`bot.cli.common.run_in_context`, `catalog_for`) run through `run_async`, which is
`asyncio.run` outside a block. Host keys are verified as before, when a connection is opened.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator
from typing import TypeVar

from bot.target.ssh_pool import pooled

__all__ = ["command_loop", "run_async"]

T = TypeVar("T")

_runner: asyncio.Runner | None = None
"""The open command loop's runner, or None (then `run_async` is `asyncio.run`)."""


@contextlib.contextmanager
def command_loop() -> Iterator[None]:
    """Run the block's `run_async` calls on one event loop, sharing SSH connections between
    them; the connections and the loop are closed when the block ends (however it ends). A block
    inside another is the outer one's."""
    global _runner
    if _runner is not None:
        yield
        return
    with asyncio.Runner() as runner:
        pool = pooled()
        runner.run(pool.__aenter__())
        _runner = runner
        try:
            yield
        finally:
            _runner = None
            runner.run(pool.__aexit__(None, None, None))


def run_async(work: Coroutine[object, object, T]) -> T:
    """`work`'s result: on the command loop when one is open, else on a fresh one (`asyncio.run`)."""
    if _runner is not None:
        return _runner.run(work)
    return asyncio.run(work)
