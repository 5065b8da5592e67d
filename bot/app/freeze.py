"""A target's change freeze: while it holds, every command that would change the target is
refused with the freeze's reason, who set it and until when; reads go on.

Why here: the CLI, Slack (typed commands, mentions, buttons, approved requests) and the
scheduler reach a change of a target through `bot.app.runs.run_playbook` (try, revert, restart,
isolate, `run NAME`, the card's buttons) and `bot.app.target_commands.rollback_or_reconcile`; both
ask `check_not_frozen` (a run: `bot.app.runs.check_call_gates`) before anything runs, so the
rule is written once. Slack also asks before its acknowledgement (`bot.slack.dispatch.check_stored`),
so a refusal is an ephemeral answer.

What changes a target: a playbook run whose steps restart the ranks or write the drop-in
(`PlaybookEffects.restarts` / `forces`: a `try dry-run=yes` or a `restart dry-run=yes` does not),
`rollback` and `reconcile`. Not refused: reads, `bench` and `verify` without a restart (they load
the server, they do not change it), records (`hypothesis`, `knowledge`, `baseline pin`, which
measures without a restart), `checks`, and `cancel` (stopping a run and rolling it back must never
wait). A run already going when the freeze is set goes on to its end (`cancel` stops it).

Two sources, both in effect: a `freeze` command (stored as an audit event `freeze`, lifted by an
`unfreeze` event or by its `until`: it survives a restart of the bot), and the windows of
`[targets.NAME] freeze` in flagbot.toml (`bot.config.schema.FreezeWindow`), which `unfreeze` does
not lift (edit the config).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.app.context import AppContext
from bot.app.errors import AppError
from bot.app.freeze_state import (
    CONFIG_SOURCE,
    Freeze,
    active_freeze,
    aware_utc,
    check_not_frozen,
    command_freeze,
    config_freeze,
    frozen_error,
)
from bot.app.playbooks import PlaybookCall, effects_of, resolve_playbook, runs_playbook
from bot.app.targets import target_of
from bot.commands import Invocation
from bot.config import Settings
from bot.store.loop_models import AuditEvent
from bot.store.models import utcnow
from bot.store.records import FREEZE_ACTION, UNFREEZE_ACTION, audit, latest_freeze_event

MAX_FREEZE = timedelta(days=366)
"""The longest `until=` a `freeze` command takes (a longer one belongs in the config)."""
CHANGING_COMMANDS = frozenset({"rollback", "reconcile"})
"""Commands that change the target and run no playbook (a playbook run is judged by its steps)."""
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class FreezeInputError(AppError):
    """A `freeze` with a missing reason or an `until=` that is no duration or future time."""

    def __init__(self, message: str) -> None:
        super().__init__(message, usage=True)


def call_changes_target(call: PlaybookCall) -> bool:
    """Does the playbook run change the target (restart the ranks, write over a hand edit)?"""
    effects = effects_of(call.book, call.params)
    return effects.restarts or effects.forces


def changes_target(settings: Settings, invocation: Invocation) -> bool:
    """Would the parsed command change its target (what a freeze refuses)? A playbook run by its
    steps and parameters (`try dry-run=yes`, `restart dry-run=yes`, `verify`, `baseline pin` do
    not restart); `rollback` and `reconcile`; nothing else. CommandError as `resolve_playbook`."""
    if runs_playbook(invocation):
        return call_changes_target(resolve_playbook(settings, invocation))
    return invocation.name in CHANGING_COMMANDS


async def check_invocation_not_frozen(
    ctx: AppContext, invocation: Invocation, *, now: datetime | None = None
) -> None:
    """FrozenError when the parsed command would change a frozen target (Slack asks this before
    its acknowledgement; the runs ask `bot.app.runs.check_call_gates` / `check_not_frozen` again)."""
    if changes_target(ctx.settings, invocation):
        target = target_of(ctx.settings, invocation)
        label = f"{invocation.name} {invocation.sub}" if invocation.sub else invocation.name
        await check_not_frozen(ctx, target, f"`{label}` (it restarts {target})", now=now)


def check_call_not_frozen_by(
    settings: Settings, call: PlaybookCall, event: AuditEvent | None, *, now: datetime
) -> None:
    """FrozenError when a playbook run that changes its target meets a freeze: the command's
    (`event`, the target's newest freeze or unfreeze, read by the caller) or a config window.
    A no-op for a run that does not change its target."""
    if not call_changes_target(call):
        return
    found = command_freeze(event, now) or config_freeze(settings, call.target, now)
    if found is not None:
        raise frozen_error(found, f"`{call.book.name}` (it restarts {call.target})")


def parse_until(text: str | None, now: datetime) -> datetime | None:
    """`until=`: a duration from now (`90m`, `4h`, `2d`) or a time (`2026-12-24T18:00Z`; without
    an offset it is UTC); FreezeInputError naming the rule for anything else or a past time."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    match = _DURATION.match(value)
    if match:
        until = now + timedelta(seconds=float(match.group(1)) * _SECONDS[match.group(2)])
    else:
        try:
            until = aware_utc(datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00")))
        except ValueError:
            raise FreezeInputError(
                f"until={value!r} is neither a duration (90m, 4h, 2d) nor a time (2026-12-24T18:00Z)"
            ) from None
    if until <= now:
        raise FreezeInputError(f"until={value!r} is not in the future (now {now:%Y-%m-%d %H:%M} UTC)")
    if until - now > MAX_FREEZE:
        raise FreezeInputError(
            f"until={value!r} is more than {MAX_FREEZE.days} days away; plan a long freeze as a window "
            "in flagbot.toml ([targets.NAME] freeze)"
        )
    return until


def check_freeze_words(
    reason: str | None, until: str | None, *, now: datetime | None = None
) -> datetime | None:
    """FreezeInputError for a `freeze` without a reason or with a bad `until=`; else its end."""
    if reason is None or not reason.strip():
        raise FreezeInputError(
            'freeze needs reason=TEXT: every refusal shows it (freeze reason="launch day" until=4h)'
        )
    return parse_until(until, now or utcnow())


@dataclass(frozen=True)
class FreezeAnswer:
    """What `freeze` / `unfreeze` did, and the freeze in effect afterwards."""

    target: str
    lines: list[str]
    freeze: Freeze | None
    changed: bool

    def to_json(self) -> dict[str, object]:
        return {
            "ok": True,
            "target": self.target,
            "changed": self.changed,
            "freeze": self.freeze.to_json() if self.freeze else None,
            "lines": self.lines,
        }


async def freeze(
    ctx: AppContext,
    target: str,
    *,
    reason: str | None,
    until: str | None,
    actor: str,
    now: datetime | None = None,
) -> FreezeAnswer:
    """Freeze `target` (replacing a freeze set by command); the audit event is the freeze."""
    at = now or utcnow()
    ends = check_freeze_words(reason, until, now=at)
    assert reason is not None  # check_freeze_words refused a missing one
    before = await active_freeze(ctx, target, now=at)
    detail = {"reason": reason.strip(), "until": ends.isoformat() if ends else None}
    await ctx.store.run(
        audit, ctx.store.store, actor=actor, target=target, action=FREEZE_ACTION, detail=detail
    )
    made = Freeze(target, reason.strip(), actor, "command", at, ends)
    lines = [f"{made.describe()}: commands that change it are refused; reads go on."]
    if before is not None and before.source == "command":
        lines.append(f"it replaces the freeze {before.by} set ({before.reason!r}).")
    window = config_freeze(ctx.settings, target, at)
    if window is not None:
        lines.append(f"a window in {CONFIG_SOURCE} also freezes it: {window.describe()}.")
    return FreezeAnswer(target, lines, made, True)


async def unfreeze(ctx: AppContext, target: str, *, actor: str, now: datetime | None = None) -> FreezeAnswer:
    """Lift the freeze a `freeze` command set (an audit event `unfreeze`); a config window stays."""
    at = now or utcnow()
    event = await ctx.store.run(latest_freeze_event, ctx.store.store, target)
    lifted = command_freeze(event, at)
    lines: list[str] = []
    if lifted is not None:
        await ctx.store.run(
            audit,
            ctx.store.store,
            actor=actor,
            target=target,
            action=UNFREEZE_ACTION,
            detail={"lifted": lifted.to_json()},
        )
        lines.append(f"{target} is no longer frozen by {lifted.by} ({lifted.reason!r}).")
    else:
        lines.append(f"{target} had no freeze set by `freeze`: nothing lifted.")
    window = config_freeze(ctx.settings, target, at)
    if window is not None:
        lines.append(f"still frozen: {window.describe()}; `unfreeze` does not lift a config window.")
    return FreezeAnswer(target, lines, window, lifted is not None)
