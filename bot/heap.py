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
found nothing to free while costing `status` about 0.15 s of CPU, 15 % of its run
(bench/cli_startup.py; 278 young, 25 middle and 2 full collections, 0.12 s by `gc.callbacks`).
Such a process ends within seconds; reference counting still frees everything that is not in a
cycle, and the cycles it leaves are freed when it exits.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collections_off", "collections_paused", "settle"]

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
