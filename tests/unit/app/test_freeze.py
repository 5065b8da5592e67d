"""The change freeze (bot/app/freeze.py): which commands it refuses, `until=`, its expiry, the
config window's edges, and the grammar of `freeze` / `unfreeze` / `restart`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.app.context import AppContext
from bot.app.freeze import (
    FreezeInputError,
    changes_target,
    check_invocation_not_frozen,
    freeze,
    parse_until,
    unfreeze,
)
from bot.app.freeze_state import FrozenError, active_freeze, command_freeze, config_freeze
from bot.app.playbooks import builtin_params, effects_of, resolve_playbook
from bot.app.validate import check_invocation
from bot.commands import CommandError, parse_command
from bot.config import Settings, load_settings
from bot.store import AsyncStore, Store
from bot.store.loop_models import AuditEvent
from bot.store.records import FREEZE_ACTION, UNFREEZE_ACTION, audit_events

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
WINDOW = {"start": "2026-12-24T00:00:00Z", "end": "2026-12-27T00:00:00Z", "reason": "holidays"}


def settings(tmp_path: Path, *, windows: list[dict[str, object]] | None = None) -> Settings:
    return Settings.model_validate(
        {
            "default_target": "lab",
            "targets": {
                "lab": {
                    "unit": "sglang.service",
                    "nodes": [{"host": "127.0.0.1", "port": 9}],
                    "freeze": windows or [],
                }
            },
            "database": {"sqlite_path": str(tmp_path / "state" / "flagbot.db")},
        }
    )


@pytest.fixture
def ctx(tmp_path: Path) -> Iterator[AppContext]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    store = AsyncStore(opened)
    yield AppContext(settings(tmp_path, windows=[WINDOW]), store)
    store._executor.shutdown(wait=True)
    opened.close()


CHANGING = [
    "try add --enable-metrics",
    "try env set NCCL_DEBUG=INFO",
    "revert",
    "revert baseline",
    "restart",
    "isolate max_running_requests>=48",
    "rollback",
    "reconcile",
    "run revert",
    "run restart",
]
NOT_CHANGING = [
    "help",
    "status",
    "observe",
    "grep error",
    "logs",
    "log",
    "log 12",
    "playbooks",
    "verify max_running_requests>=48",
    "bench",
    "baseline",
    "baseline pin",
    "baseline diff",
    "hypothesis add fused",
    "hypothesis list",
    "knowledge",
    "checks",
    "checks pause 4",
    "cancel",
    "digest",
    "try add --enable-metrics dry-run=yes",
    "restart dry-run=yes",
    'freeze reason="launch"',
    "unfreeze",
    "run verify expect=max_running_requests>=48",
]


@pytest.mark.parametrize("words", CHANGING)
def test_each_command_that_changes_the_target_is_one_a_freeze_refuses(tmp_path: Path, words: str) -> None:
    assert changes_target(settings(tmp_path), parse_command(words)) is True


@pytest.mark.parametrize("words", NOT_CHANGING)
def test_reads_loads_records_and_dry_runs_go_on_during_a_freeze(tmp_path: Path, words: str) -> None:
    assert changes_target(settings(tmp_path), parse_command(words)) is False


@pytest.mark.parametrize("words", CHANGING)
async def test_a_frozen_target_refuses_each_changing_command_with_reason_who_and_until(
    ctx: AppContext, words: str
) -> None:
    await freeze(ctx, "lab", reason="launch day", until="2h", actor="slack:U1", now=NOW)
    with pytest.raises(FrozenError) as refused:
        await check_invocation_not_frozen(ctx, parse_command(words), now=NOW + timedelta(minutes=5))
    message = refused.value.message
    assert "lab is frozen: 'launch day' (set by slack:U1, until 2026-12-02 14:00 UTC)" in message
    assert message.endswith("`unfreeze` lifts it")


@pytest.mark.parametrize("words", NOT_CHANGING)
async def test_a_frozen_target_lets_every_other_command_go_on(ctx: AppContext, words: str) -> None:
    await freeze(ctx, "lab", reason="launch day", until=None, actor="cli:alice", now=NOW)
    await check_invocation_not_frozen(ctx, parse_command(words), now=NOW)  # no FrozenError


async def test_a_freeze_ends_at_its_until_and_at_unfreeze(ctx: AppContext) -> None:
    await freeze(ctx, "lab", reason="incident", until="30m", actor="cli:alice", now=NOW)
    assert await active_freeze(ctx, "lab", now=NOW + timedelta(minutes=29)) is not None
    assert await active_freeze(ctx, "lab", now=NOW + timedelta(minutes=30)) is None  # until is exclusive
    await freeze(ctx, "lab", reason="again", until=None, actor="cli:alice", now=NOW)
    found = await active_freeze(ctx, "lab", now=NOW + timedelta(days=30))
    assert found is not None and found.until is None and found.reason == "again"
    lifted = await unfreeze(ctx, "lab", actor="slack:UADMIN", now=NOW)
    assert lifted.changed and lifted.lines == ["lab is no longer frozen by cli:alice ('again')."]
    assert await active_freeze(ctx, "lab", now=NOW) is None
    nothing = await unfreeze(ctx, "lab", actor="slack:UADMIN", now=NOW)
    assert not nothing.changed and nothing.lines == ["lab had no freeze set by `freeze`: nothing lifted."]


async def test_freeze_and_unfreeze_are_audit_rows_and_another_target_is_not_frozen(ctx: AppContext) -> None:
    await freeze(ctx, "lab", reason="launch", until="1d", actor="cli:alice", now=NOW)
    await unfreeze(ctx, "lab", actor="cli:bob", now=NOW)
    rows: list[AuditEvent] = await ctx.store.run(audit_events, ctx.store.store, "lab")
    assert [(row.action, row.actor) for row in rows] == [
        (UNFREEZE_ACTION, "cli:bob"),
        (FREEZE_ACTION, "cli:alice"),
    ]
    assert rows[1].detail == {"reason": "launch", "until": (NOW + timedelta(days=1)).isoformat()}
    await freeze(ctx, "lab", reason="launch", until=None, actor="cli:alice", now=NOW)
    assert await active_freeze(ctx, "other", now=NOW) is None


async def test_a_config_window_freezes_from_start_to_end_and_unfreeze_does_not_lift_it(
    ctx: AppContext,
) -> None:
    start, end = datetime(2026, 12, 24, tzinfo=UTC), datetime(2026, 12, 27, tzinfo=UTC)
    assert await active_freeze(ctx, "lab", now=start - timedelta(seconds=1)) is None
    found = await active_freeze(ctx, "lab", now=start)  # start is inclusive
    assert found is not None and (found.source, found.by, found.until) == ("config", "flagbot.toml", end)
    assert await active_freeze(ctx, "lab", now=end - timedelta(seconds=1)) is not None
    assert await active_freeze(ctx, "lab", now=end) is None  # end is exclusive
    with pytest.raises(FrozenError) as refused:
        await check_invocation_not_frozen(ctx, parse_command("restart"), now=start)
    assert (
        "'holidays' (set by a window in flagbot.toml ([targets.lab] freeze), until 2026-12-27 00:00 UTC)"
        in (refused.value.message)
    )
    assert refused.value.message.endswith("edit the config to end it early")
    kept = await unfreeze(ctx, "lab", actor="cli:alice", now=start)
    assert not kept.changed and "does not lift a config window" in kept.lines[-1]
    assert await active_freeze(ctx, "lab", now=start) is not None


def test_config_windows_are_checked_when_the_config_is_read(tmp_path: Path) -> None:
    for bad, says in (
        ({**WINDOW, "end": WINDOW["start"]}, "is not after start"),
        ({**WINDOW, "start": "2026-12-24T00:00:00"}, "timezone"),
        ({**WINDOW, "reason": ""}, "at least 1 character"),
        ({**WINDOW, "why": "x"}, "Extra inputs are not permitted"),
    ):
        with pytest.raises(ValidationError, match=says):
            settings(tmp_path, windows=[bad])
    assert config_freeze(settings(tmp_path), "lab", NOW) is None


def test_until_is_a_duration_or_a_future_time_and_nothing_else() -> None:
    assert parse_until(None, NOW) is None
    assert parse_until("90m", NOW) == NOW + timedelta(minutes=90)
    assert parse_until("2d", NOW) == NOW + timedelta(days=2)
    assert parse_until("2026-12-24T18:00Z", NOW) == datetime(2026, 12, 24, 18, tzinfo=UTC)
    assert parse_until("2026-12-24T18:00", NOW) == datetime(2026, 12, 24, 18, tzinfo=UTC)  # UTC
    for bad, says in (
        ("soon", "neither a duration"),
        ("2026-12-01T00:00Z", "not in the future"),
        ("400d", "more than 366 days away"),
    ):
        with pytest.raises(FreezeInputError, match=says):
            parse_until(bad, NOW)


def test_an_expired_freeze_event_freezes_nothing() -> None:
    event = AuditEvent(
        actor="cli:a", target="lab", action=FREEZE_ACTION, detail={"reason": "x", "until": NOW.isoformat()}
    )
    assert command_freeze(event, NOW) is None
    assert command_freeze(event, NOW - timedelta(seconds=1)) is not None
    lifted = AuditEvent(actor="cli:a", target="lab", action=UNFREEZE_ACTION, detail={})
    assert command_freeze(lifted, NOW) is None


def test_freeze_words_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"freeze needs reason=TEXT"):
        check_invocation(settings(tmp_path), parse_command("freeze until=2h"))
    with pytest.raises(CommandError, match=r"until='tomorrow' is neither a duration"):
        check_invocation(settings(tmp_path), parse_command("freeze reason=x until=tomorrow"))
    with pytest.raises(CommandError, match=r"unknown target 'nope'"):
        check_invocation(settings(tmp_path), parse_command("unfreeze target=nope"))
    check_invocation(settings(tmp_path), parse_command('freeze reason="launch day" until=4h'))


def test_restart_grammar_and_its_playbook(tmp_path: Path) -> None:
    invocation = parse_command("restart --dry-run target=lab")
    assert invocation.tier == "mutating" and invocation.options == {"dry-run": "yes", "target": "lab"}
    assert builtin_params(invocation) == ("restart", {"dry_run": True})
    assert builtin_params(parse_command("restart")) == ("restart", {"dry_run": False})
    with pytest.raises(CommandError, match="unknown option 'flags'"):
        parse_command("restart flags=--x")
    with pytest.raises(CommandError, match=r"unknown target 'nope'; targets: lab"):
        check_invocation(settings(tmp_path), parse_command("restart target=nope"))
    call = resolve_playbook(settings(tmp_path), parse_command("restart"))
    effects = effects_of(call.book, call.params)
    assert effects.restarts and effects.mutating and not effects.executes
    dry = resolve_playbook(settings(tmp_path), parse_command("restart dry-run=yes"))
    assert not effects_of(dry.book, dry.params).restarts  # a dry run restarts nothing: no approval, no budget


def test_a_window_written_with_toml_datetimes_is_read_from_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "flagbot.toml"
    path.write_text(
        """
[targets.lab]
unit = "sglang.service"
nodes = [{ host = "127.0.0.1", port = 9 }]
freeze = [{ start = 2026-12-24T00:00:00Z, end = 2026-12-27T00:00:00+01:00, reason = "holidays" }]
""",
        encoding="utf-8",
    )
    config = load_settings(path, required=True)
    found = config_freeze(config, "lab", datetime(2026, 12, 26, 22, 59, tzinfo=UTC))
    assert found is not None and found.reason == "holidays"
    assert config_freeze(config, "lab", datetime(2026, 12, 26, 23, 0, tzinfo=UTC)) is None  # 00:00+01:00
