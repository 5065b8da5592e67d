"""bot/heap.py: the survivors are frozen, and what an earlier settle froze is collected at the next."""

from __future__ import annotations

import gc
import weakref

import pytest

from bot.heap import collections_paused, exit_status, settle


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


def test_collections_are_paused_inside_the_block_and_back_after_the_last_of_two() -> None:
    assert gc.isenabled()
    with collections_paused():
        assert not gc.isenabled()
        with collections_paused():  # an overlapping build (another thread) ending first
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_block_that_raises_still_turns_collections_back_on() -> None:
    with pytest.raises(RuntimeError), collections_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_collections_stay_off_after_the_block_when_they_were_off_before() -> None:
    gc.disable()
    try:
        with collections_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), ("error: no such target", 1)])
def test_the_exit_status_is_the_one_sys_exit_gives(
    code: str | int | None, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_status(code) == status
    assert capsys.readouterr().err == (f"{code}\n" if isinstance(code, str) else "")
