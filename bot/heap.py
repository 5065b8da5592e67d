"""Keep Python's cyclic garbage collector off the bot's critical path.

A long-running bot holds a large heap of long-lived objects (SQLAlchemy, pydantic, matplotlib,
asyncssh, Slack's clients). CPython's oldest-generation collection scans every one of them and
took 90-150 ms each time it ran, at moments nobody chose: measured in the middle of an
experiment's observation, right after the server turned ready. `settle` does that work at a
moment when the bot only waits (the server is loading), and then freezes the survivors, so the
collections that come later only look at objects made since. Whatever was frozen is unfrozen at
the next `settle` and collected with the rest, so frozen garbage does not pile up (objects that
become cyclic garbage after a freeze wait for the next `settle`, one experiment later). The
collection holds the GIL in whichever thread runs it; it runs while the server loads, when the
event loop has nothing urgent to do.

`collections_paused` serves the other case: a bulk read that builds many long-lived objects at
once (the weekly digest of 100,000 experiments). Each young collection it triggers promotes them,
and the oldest generation is scanned again and again as it grows, finding nothing to free: in a
profile of bench/digest_scale.py's 100,000 experiments it was the largest single cost.

`collections_off` serves a console command that reads and exits (`flagbot status`, `log`,
`explain`): importing the store, the settings, SSH and its own modules makes some hundred
thousand objects that live as long as the process, and the collections their creation triggers
found nothing to free while costing `status` about 0.12 s of CPU (278 young, 25 middle and 2
full collections, timed by `gc.callbacks`).
Such a process ends within seconds; reference counting still frees everything that is not in a
cycle, and the cycles it leaves are freed when it exits.

`exit_without_teardown` ends such a process once its command is done. After the last `atexit`
handler, the interpreter's teardown collects and frees every object and module one by one:
about 0.3 s of CPU for `flagbot status` (0.9 s to its last `atexit` call, 1.25 s to its exit, on
the two-node testbed), spent after the answer is printed and before the shell's prompt returns.
The operating system frees the process's memory and files at once; what must happen before the
exit still does (the `atexit` handlers, logging's flush, the console streams' flush).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import NoReturn

__all__ = ["collections_off", "collections_paused", "exit_status", "exit_without_teardown", "settle"]

_pause_lock = threading.Lock()
_pauses = 0
_was_enabled = False


def settle() -> None:
    """Collect all garbage now, then exempt what survives from later collections."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@contextmanager
def collections_paused() -> Iterator[None]:
    """Automatic collections off while the block runs (in any thread: the switch is the
    process's), back as they were when the last overlapping block ends. For a block that makes
    records, not garbage: its cyclic garbage, if any, waits for the next collection."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


def collections_off() -> None:
    """Automatic collections off for the rest of the process: only for one that reads and exits."""
    gc.disable()


def exit_status(code: str | int | None) -> int:
    """The status `sys.exit(code)` gives the process: None is 0, an int itself, anything else is
    printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_without_teardown(code: str | int | None) -> NoReturn:
    """End the process now, with `sys.exit(code)`'s status: the `atexit` handlers run (logging's
    flush among them), the console streams are flushed, the interpreter's teardown is skipped. Only for a process
    whose work is done: no other thread may still be writing."""
    status = exit_status(code)
    atexit._run_exitfuncs()  # logging registers its flush (logging.shutdown) here at import
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(status)
