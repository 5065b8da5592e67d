"""`policy.max_restarts_per_hour` as arithmetic over recorded restart times, on fixed clocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.loop.isolate import probe_bound, restart_bound
from bot.loop.restart_budget import WINDOW, allowance

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def ago(minutes: int) -> datetime:
    return NOW - timedelta(minutes=minutes)


def test_only_restarts_within_the_last_hour_count() -> None:
    found = allowance([ago(90), ago(61), ago(60), ago(59), ago(1)], limit=6, needed=1, now=NOW)
    assert found.used == 2  # the one exactly an hour ago has left the window
    assert found.allowed and found.next_allowed is None and found.refusal("lab", "`try`") is None


def test_a_full_hour_refuses_and_says_when_the_oldest_restart_leaves_the_window() -> None:
    found = allowance([ago(50), ago(20), ago(5)], limit=3, needed=1, now=NOW)
    assert not found.allowed
    assert found.next_allowed == ago(50) + WINDOW == datetime(2026, 12, 2, 12, 10, tzinfo=UTC)
    why = found.refusal("lab", "`try`")
    assert why == (
        "lab: `try` needs 1 restart and the target had 3 restarts in the last hour "
        "(policy.max_restarts_per_hour = 3); the next restart is allowed at 2026-12-02 12:10:00 UTC"
    )


def test_several_restarts_wait_until_enough_have_left_the_window() -> None:
    recent = [ago(5), ago(40), ago(20), ago(55)]  # unordered, as a caller may give them
    found = allowance(recent, limit=6, needed=4, now=NOW)
    # 4 used + 4 needed = 8 > 6: the two oldest (55 and 40 min ago) must leave first
    assert found.next_allowed == ago(40) + WINDOW
    assert allowance(recent, limit=6, needed=2, now=NOW).allowed


def test_more_restarts_than_the_limit_can_never_fit() -> None:
    found = allowance([], limit=3, needed=5, now=NOW)
    assert not found.allowed and found.next_allowed is None
    why = found.refusal("lab", "isolate of 9 changes")
    assert why is not None and "needs 5 restarts, more than policy.max_restarts_per_hour = 3" in why


def test_a_limit_of_zero_refuses_every_restart() -> None:
    found = allowance([], limit=0, needed=1, now=NOW)
    assert not found.allowed and "policy.max_restarts_per_hour = 0" in (found.refusal("lab", "`try`") or "")


def test_isolate_worst_case_is_the_probe_bound_plus_unmeasured_premises_plus_the_settle() -> None:
    assert [restart_bound(n) for n in (0, 1, 2, 3, 4, 8, 9, 16)] == [0, 2, 3, 4, 4, 5, 6, 6]
    assert all(restart_bound(n) == probe_bound(n) + 1 for n in range(1, 40))
    assert restart_bound(4, unknown_premises=2) == probe_bound(4) + 3
