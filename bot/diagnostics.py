"""`kill -USR1 <pid>` makes a running flagbot print where it is, without stopping it.

A command that seems stuck (a rollback waiting on a node, a benchmark that never ends) is
otherwise a black box: an operator, or a test whose `flagbot` call ran out of time, sends
SIGUSR1 and gets every thread's stack and every asyncio task's stack on stderr. The handler
only reads and prints; the command goes on.
"""

from __future__ import annotations

import asyncio
import faulthandler
import signal
import sys
from types import FrameType
from typing import TextIO

DUMP_SIGNAL = signal.SIGUSR1


def dump_state(stream: TextIO | None = None) -> None:
    """Write the stacks of all threads and of the running loop's tasks to `stream`."""
    out = stream or sys.stderr
    out.write("=== flagbot: thread stacks ===\n")
    out.flush()
    try:
        faulthandler.dump_traceback(file=out, all_threads=True)
    except (ValueError, OSError):  # a stream without a file descriptor (tests)
        out.write("(thread stacks need a real file)\n")
    loop = asyncio._get_running_loop()  # the signal runs on the loop's thread, between bytecodes
    if loop is None:
        out.write("=== flagbot: no event loop running ===\n")
        out.flush()
        return
    tasks = asyncio.all_tasks(loop)
    out.write(f"=== flagbot: {len(tasks)} asyncio task(s) ===\n")
    for task in sorted(tasks, key=lambda t: t.get_name()):
        out.write(f"--- {task.get_name()}: {task.get_coro()!r}\n")
        task.print_stack(file=out)
    out.flush()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    dump_state()


def install_dump_on_signal() -> None:
    """Print state on SIGUSR1 (only from the main thread, where Python handles signals)."""
    signal.signal(DUMP_SIGNAL, _on_signal)
