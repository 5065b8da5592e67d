"""Read commands from Slack are rate-limited per user (issue 17, item 7), with an injected clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands.grammar import parse_command
from bot.config import load_settings
from bot.config.loader import ConfigError
from bot.config.slack_settings import SlackSettings
from bot.slack.rate_limit import ReadLimiter, counts, limit_reads
from bot.slack.rbac import Decision

ALLOWED = Decision(True, "`status` is read-only", role="viewer")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_default_is_ten_a_minute_and_the_file_sets_it(tmp_path: Path) -> None:
    assert SlackSettings().read_commands_per_minute == 10
    config = tmp_path / "flagbot.toml"
    config.write_text("[slack]\nread_commands_per_minute = 3\n")
    assert load_settings(config).slack.read_commands_per_minute == 3


@pytest.mark.parametrize("value", ["0", "-1", "'lots'", "100000"])
def test_a_limit_that_is_no_limit_is_refused(tmp_path: Path, value: str) -> None:
    config = tmp_path / "flagbot.toml"
    config.write_text(f"[slack]\nread_commands_per_minute = {value}\n")
    with pytest.raises(ConfigError, match="read_commands_per_minute"):
        load_settings(config)


def test_the_eleventh_read_in_a_minute_is_refused_with_when_to_try_again() -> None:
    clock = Clock()
    limiter = ReadLimiter(clock)
    status = parse_command("status")
    for k in range(10):
        clock.now = 1000.0 + k  # one a second
        assert limit_reads(limiter, status, ALLOWED, user="U1", per_minute=10) is ALLOWED
    clock.now = 1015.5
    refused = limit_reads(limiter, status, ALLOWED, user="U1", per_minute=10)
    assert not refused.allowed
    assert refused.reason.startswith("you ran 10 read commands in the last minute; try again in 45s")
    assert "read_commands_per_minute" in refused.reason
    assert limit_reads(limiter, status, ALLOWED, user="U2", per_minute=10) is ALLOWED  # per user
    clock.now = 1060.0  # the first read (at 1000) has left the window: one more fits
    assert limit_reads(limiter, status, ALLOWED, user="U1", per_minute=10) is ALLOWED
    assert not limit_reads(limiter, status, ALLOWED, user="U1", per_minute=10).allowed
    clock.now = 1061.0
    assert limit_reads(limiter, status, ALLOWED, user="U1", per_minute=10) is ALLOWED


def test_a_refused_read_is_not_counted() -> None:
    clock = Clock()
    limiter = ReadLimiter(clock)
    grep = parse_command("grep error")
    assert limiter.admit("U1", 1) is None
    for _ in range(5):
        assert limiter.admit("U1", 1) == pytest.approx(60.0)
    clock.now += 60.0
    assert limiter.admit("U1", 1) is None
    refused_by_rbac = Decision(False, "needs the viewer role")
    assert limit_reads(limiter, grep, refused_by_rbac, user="U9", per_minute=1) is refused_by_rbac
    assert limit_reads(limiter, grep, ALLOWED, user="U9", per_minute=1) is ALLOWED  # U9 had none


def test_help_and_mutating_commands_do_not_count() -> None:
    assert counts(parse_command("status")) and counts(parse_command("grep error"))
    assert counts(parse_command("observe")) and counts(parse_command("log"))
    assert not counts(parse_command("help"))
    assert not counts(parse_command("try add --enable-metrics"))
    limiter = ReadLimiter(Clock())
    for _ in range(20):
        assert limit_reads(limiter, parse_command("help"), ALLOWED, user="U1", per_minute=1) is ALLOWED
    assert len(limiter) == 0


def test_memory_holds_only_the_users_of_the_last_minute() -> None:
    clock = Clock()
    limiter = ReadLimiter(clock)
    for k in range(5):
        limiter.admit(f"U{k}", 10)
    clock.now += 30.0
    limiter.admit("U9", 10)
    clock.now += 31.0
    limiter.forget_idle()
    assert len(limiter) == 1
