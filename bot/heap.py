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
"""

from __future__ import annotations

import gc

__all__ = ["settle"]


def settle() -> None:
    """Collect all garbage now, then exempt what survives from later collections."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
