"""bot/heap.py: the survivors are frozen, and what an earlier settle froze is collected at the next."""

from __future__ import annotations

import gc
import weakref

from bot.heap import settle


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_settle_freezes_survivors_and_collects_what_it_froze_before() -> None:
    try:
        alive = _Cycle()
        ref = weakref.ref(alive)
        settle()
        assert gc.get_freeze_count() > 0
        del alive  # now garbage, but frozen: an ordinary collection leaves it
        gc.collect()
        assert ref() is not None
        settle()
        assert ref() is None
    finally:
        gc.unfreeze()
