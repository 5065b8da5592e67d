"""Run a `flagbot` subprocess with a deadline; on timeout, ask it where it is before killing it.

A command that hangs in CI otherwise leaves only "TimeoutError" behind. flagbot prints its
thread and asyncio task stacks on SIGUSR1 (`bot/diagnostics.py`); this helper sends it, gives the
process a moment to write, kills it, and fails with the tail of what it printed.
"""

from __future__ import annotations

import asyncio
import signal

from bot.diagnostics import DUMP_SIGNAL

DUMP_GRACE_S = 5.0
TAIL_CHARS = 12_000


class CommandTimeoutError(AssertionError):
    """The command outlived its deadline; the message carries its stack dump and output tail."""


async def communicate(process: asyncio.subprocess.Process, timeout: float) -> tuple[bytes, bytes]:
    """`process.communicate()` with a deadline that dumps the process's state when it passes."""
    reading = asyncio.ensure_future(process.communicate())
    done, _ = await asyncio.wait({reading}, timeout=timeout)
    if done:
        return reading.result()
    if process.returncode is None:
        process.send_signal(DUMP_SIGNAL)
        await asyncio.wait({reading}, timeout=DUMP_GRACE_S)
    if not reading.done() and process.returncode is None:
        process.send_signal(signal.SIGKILL)
    out, err = await reading
    raise CommandTimeoutError(
        f"no answer after {timeout:.0f} s (pid {process.pid}, killed)\n"
        f"--- stdout tail ---\n{out.decode(errors='replace')[-TAIL_CHARS:]}\n"
        f"--- stderr tail ---\n{err.decode(errors='replace')[-TAIL_CHARS:]}"
    )
