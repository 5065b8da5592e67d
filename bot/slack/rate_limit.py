"""Read commands from Slack, rate-limited per user: `[slack] read_commands_per_minute` (default 10).

Why: a viewer's read runs commands on the nodes (`status`, `grep`, `observe` each open SSH
channels and journal reads), and anyone in the workspace may be a viewer. Reads queue for their
channels rather than take the restart's (`bot.target.ssh_pool.RESERVED_CHANNELS`), but a loop of
`observe`s would still keep every read channel and the nodes' journald busy. So each Slack user
may run `read_commands_per_minute` read-only commands in any 60 s; one more is refused in the
ack, with when to try again, and nothing runs. `help` answers from the bot's own text and does
not count; a command refused before (a usage error, RBAC) is not counted either. Mutating
commands are not limited here: they take the target's lease and need a role.

The window is in this process's memory: a restart of the bot starts every user afresh.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from bot.commands.grammar import Invocation
from bot.slack.rbac import Decision

WINDOW_S = 60.0
UNCOUNTED = frozenset({"help"})
"""Read-only commands that run nothing anywhere (answered from the bot's own text)."""


def counts(invocation: Invocation) -> bool:
    """Does the command count against its user's read budget?"""
    return invocation.tier == "read-only" and invocation.name not in UNCOUNTED


class ReadLimiter:
    """A sliding 60-second window of each user's read commands (`clock`: monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._window = window_s
        self._runs: dict[str, deque[float]] = {}

    def admit(self, user: str, limit: int) -> float | None:
        """Count one read of `user` and return None; or, over `limit` in the window, count
        nothing and return the seconds until the oldest one leaves the window."""
        now = self._clock()
        runs = self._runs.setdefault(user, deque())
        while runs and runs[0] <= now - self._window:
            runs.popleft()
        if len(runs) >= limit:
            return max(runs[0] + self._window - now, 0.0)
        runs.append(now)
        return None

    def forget_idle(self) -> None:
        """Drop users with no read in the window (memory bounded by the users of the last minute)."""
        edge = self._clock() - self._window
        for user in [user for user, runs in self._runs.items() if not runs or runs[-1] <= edge]:
            del self._runs[user]

    def __len__(self) -> int:
        return len(self._runs)


def limit_reads(
    limiter: ReadLimiter, invocation: Invocation, decision: Decision, *, user: str, per_minute: int
) -> Decision:
    """RBAC's `decision`, or a refusal when it allows a read the user has no budget left for."""
    if not decision.allowed or not counts(invocation):
        return decision
    if len(limiter) > 1000:
        limiter.forget_idle()
    wait = limiter.admit(user, per_minute)
    if wait is None:
        return decision
    return Decision(
        False,
        f"you ran {per_minute} read commands in the last minute; try again in {max(1, math.ceil(wait))}s "
        "(a limit per user: `[slack] read_commands_per_minute`)",
        role=decision.role,
    )
