"""A failed start's evidence never borrows a fatal line from an earlier change's failed start.

Found on the testbed: a start that hung in its warmup (no fatal line of its own) was reported
with the "Not enough memory" line of the previous test's failed start, still in the journal.
"""

from __future__ import annotations

import json
import time

from bot.target.readiness_result import Readiness
from bot.target.rollback import _starts_of_this_attempt
from tests.unit.target.scripted_node import ScriptedNode, show_text

HUNG, BASELINE, OOM = "a" * 32, "b" * 32, "c" * 32


def _node(now: float) -> ScriptedNode:
    starts = ((HUNG, now - 5), (BASELINE, now - 40), (OOM, now - 55))  # newest first
    return ScriptedNode(
        "n0",
        states=[(0, show_text(invocation=HUNG))],
        outputs={
            "journal-starts": b"".join(
                json.dumps({"INVOCATION_ID": inv, "__REALTIME_TIMESTAMP": str(int(at * 1e6))}).encode()
                + b"\n"
                for inv, at in starts
            )
        },
    )


def _readiness(now: float, previous: str | None) -> Readiness:
    result = Readiness("failed", "failed", HUNG, {"n0": HUNG}, now - 3)
    result.previous = {"n0": previous}
    return result


async def test_only_the_starts_after_the_one_that_ran_before_the_restart() -> None:
    now = time.time()
    assert await _starts_of_this_attempt(_node(now), _readiness(now, BASELINE)) == [HUNG]


async def test_without_the_previous_start_the_restart_time_bounds_them() -> None:
    now = time.time()
    node = _node(now)
    far = _readiness(now, None)
    far.started_at = now + 10  # the wait began 15 s after the hung start, 50 s after the baseline one
    assert await _starts_of_this_attempt(node, far) == [HUNG, BASELINE]  # within RESTART_MARGIN_S (60 s)
    far.started_at = now + 200
    assert await _starts_of_this_attempt(node, far) == []
