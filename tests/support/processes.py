"""Run a `flagbot` subprocess with a deadline; on timeout, ask it where it is before killing it.

A command that hangs in CI otherwise leaves only "TimeoutError" behind. flagbot prints its
thread and asyncio task stacks on SIGUSR1 (`bot/diagnostics.py`); this helper sends it, gives the
process a moment to write, kills it, and fails with the tail of what it printed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from bot.diagnostics import DUMP_SIGNAL

DUMP_GRACE_S = 5.0
TAIL_CHARS = 12_000
FLAGBOT = str(Path(sys.executable).parent / "flagbot")
"""The installed console script of this environment."""


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


async def run_flagbot(config: Path, *words: str, timeout: float = 120) -> tuple[int, str, str]:
    """`flagbot --config CONFIG WORDS...` as a user runs it: (exit code, stdout, stderr). Awaited,
    so the event loop keeps serving what the test runs in process (a fake SSH node, an HTTP server).
    `FLAGBOT_CONFIG` and `FLAGBOT_DATABASE_URL` of the test's environment are left out: the config
    given, and its store, are the ones used."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    process = await asyncio.create_subprocess_exec(
        FLAGBOT,
        "--config",
        str(config),
        *words,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await communicate(process, timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()
