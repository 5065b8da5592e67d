"""`observe`, `grep`, `logs`, `rollback`, `reconcile`: the target commands, once for every front end
(`status` is `bot.app.status`).

Each opens the target's SSH session (pooled by `flagbot serve`), does its work and returns a
typed result whose `to_json()` is what `flagbot … --json` prints; the CLI renders it as tables,
Slack as blocks. `rollback` and `reconcile` are mutating: they run under the target's lease
(the caller takes it, see `bot.app.leased`), after a run left behind has been settled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from bot.app.context import AppContext
from bot.app.freeze_state import check_not_frozen
from bot.app.leased import leased
from bot.app.progress import Progress
from bot.app.sessions import open_session
from bot.app.settle import settle_unfinished, settled_text
from bot.commands import CommandError, Invocation
from bot.config.section_base import parse_duration
from bot.target.errors import TargetError
from bot.target.evidence import Evidence, TextBlock
from bot.target.grep import DEFAULT_LINES, GrepResult, Scope, grep, journal_tail, since_from_duration
from bot.target.heal import HealResult, heal_if_diverged
from bot.target.observe import Observation, observe
from bot.target.rollback import RollbackResult, rollback


async def observation(ctx: AppContext, target: str) -> Observation:
    """`observe`: re-read the running server (journal of this start, /server_info), no restart."""
    async with open_session(ctx, target) as ts:
        return await observe(ts, cache_dir=ctx.cache_dir)


@dataclass(frozen=True)
class GrepRequest:
    """`grep PATTERN [scope=this|previous|last|since] [since=DURATION] [lines=N]`, checked."""

    pattern: str
    scope: Scope
    since: str | None
    lines: int

    @classmethod
    def of(cls, invocation: Invocation) -> GrepRequest:
        """The request the words make; CommandError for `scope=since` without `since=`."""
        since_text = invocation.options.get("since")
        scope: Scope = invocation.options.get("scope", "since" if since_text else "this")  # type: ignore[assignment]
        if scope == "since" and not since_text:
            raise CommandError("scope=since needs since=DURATION, e.g. since=2h")
        since = since_from_duration(_seconds(since_text)) if since_text else None
        return cls(
            str(invocation.positionals["pattern"]),
            scope,
            since,
            int(invocation.options.get("lines", DEFAULT_LINES)),
        )


def _seconds(text: str) -> float:
    value = parse_duration(text)
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(str(value))


@dataclass(frozen=True)
class LogsRequest:
    """`logs [lines=N] [since=DURATION]`, checked by the grammar (lines 1-1000, since at most 366d)."""

    since: str | None
    lines: int

    @classmethod
    def of(cls, invocation: Invocation) -> LogsRequest:
        since_text = invocation.options.get("since")
        return cls(
            since_from_duration(_seconds(since_text)) if since_text else None,
            int(invocation.options.get("lines", DEFAULT_LINES)),
        )


@dataclass(frozen=True)
class NodeGrep:
    """One node's matches, or why it could not be searched."""

    node: str
    result: GrepResult | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.result is None:
            return {"node": self.node, "error": self.error}
        return self.result.to_json() | {"title": self.result.describe()}


@dataclass(frozen=True)
class GrepAnswer:
    target: str
    pattern: str
    scope: Scope
    results: list[NodeGrep]

    @property
    def matched(self) -> bool:
        return any(item.result is not None and item.result.count for item in self.results)

    @property
    def ok(self) -> bool:
        """`grep`: something matched; `logs` (no pattern): every node was read."""
        if self.pattern == "":
            return all(item.result is not None for item in self.results)
        return self.matched

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "target": self.target,
            "pattern": self.pattern,
            "scope": self.scope,
            "results": [item.to_json() for item in self.results],
        }


async def grep_target(ctx: AppContext, target: str, request: GrepRequest) -> GrepAnswer:
    """`grep`: the journal of every node, searched at once; a node that fails is said as such."""
    async with open_session(ctx, target) as ts:
        found = await asyncio.gather(
            *(
                grep(node, request.pattern, scope=request.scope, since=request.since, lines=request.lines)
                for node in ts.nodes
            ),
            return_exceptions=True,
        )
        results = [
            NodeGrep(node.name, error=str(item))
            if isinstance(item, BaseException)
            else NodeGrep(node.name, item)
            for node, item in zip(ts.nodes, found, strict=True)
        ]
    return GrepAnswer(target, request.pattern, request.scope, results)


async def logs_target(ctx: AppContext, target: str, request: LogsRequest) -> GrepAnswer:
    """`logs`: the unit's latest journal lines on node 0, read-only, bounded like `grep` (and
    masked like it on the way out: the front ends' redaction)."""
    async with open_session(ctx, target) as ts:
        node = ts.nodes[0]
        try:
            item = NodeGrep(node.name, await journal_tail(node, since=request.since, lines=request.lines))
        except (TargetError, OSError) as exc:  # said as the node's error, as `grep` says it
            item = NodeGrep(node.name, error=str(exc))
    return GrepAnswer(target, "", "since" if request.since else "last", [item])


@dataclass(frozen=True)
class TargetChange:
    """What `rollback` or `reconcile` did: the reconcile of a diverged target (if it was), then
    the rollback (rollback only)."""

    command: str
    target: str
    healed: HealResult | None
    rolled_back: RollbackResult | None = None
    notes: list[Evidence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.rolled_back is not None:
            return self.rolled_back.ok
        return True if self.healed is None else self.healed.ok

    @property
    def evidence(self) -> list[Evidence]:
        healed = list(self.healed.evidence) if self.healed is not None else []
        return [*healed, *(self.rolled_back.evidence if self.rolled_back is not None else []), *self.notes]

    def to_json(self) -> dict[str, Any]:
        if self.rolled_back is None:
            if self.healed is not None:
                return self.healed.to_json()
            return {
                "target": self.target,
                "ok": True,
                "diverged_nodes": [],
                "evidence": [block.to_json() for block in self.notes],
            }
        data = self.rolled_back.to_json()
        if self.healed is not None:
            healed = self.healed.to_json()
            data["reconciled"] = healed
            data["evidence"] = healed["evidence"] + data["evidence"]
        return data

    def summary(self) -> str:
        """One line for a status card."""
        if self.command == "reconcile":
            nodes = self.healed.nodes if self.healed is not None else []
            return f"reconciled {', '.join(nodes)}" if nodes else "not diverged: nothing to do"
        assert self.rolled_back is not None
        if self.rolled_back.error:
            return f"rollback failed: {self.rolled_back.error}"
        return f"back on {self.rolled_back.to or 'the known-good flags'} in {float(self.rolled_back.duration_s or 0):.0f} s"


async def change_target(ctx: AppContext, target: str, command: str) -> TargetChange:
    """`reconcile` (every node back on the flags flagbot meant) or `rollback` (that, then back to
    the last verified start). The caller holds the target's lease."""
    async with open_session(ctx, target) as ts:
        # rollback and reconcile are restarts themselves: a front end runs them on a production
        # target only once approved (Slack), or for the bot host's own user (the CLI)
        healed = await heal_if_diverged(ts, cache_dir=ctx.cache_dir, restart_approved=True)
        if command == "reconcile":
            if healed is not None:
                return TargetChange(command, target, healed)
            text = f"{target} is not diverged: every node runs the drop-in flagbot left; nothing to do."
            return TargetChange(command, target, None, notes=[TextBlock(text)])
        done = await rollback(ts, trigger="on-demand", cache_dir=ctx.cache_dir)
    return TargetChange(command, target, healed, done)


SETTLE_STEP = "settle unfinished runs"
LEASE_STEP = "take the target's lease"


def change_steps(command: str) -> list[str]:
    """The steps `rollback`/`reconcile` report, in order (a status card shows them up front)."""
    return [SETTLE_STEP, LEASE_STEP, command]


async def rollback_or_reconcile(
    ctx: AppContext, target: str, command: str, *, actor: str, progress: Progress
) -> TargetChange:
    """`rollback` or `reconcile` as every front end runs it: first settle what a flagbot that
    stopped left on the target, then take the target's lease (refused at once when it is held:
    LeaseHeld), then change the target. FrozenError (nothing run) on a frozen target."""
    await check_not_frozen(ctx, target, f"`{command}` (it restarts {target})")
    await progress.step(0, SETTLE_STEP, "running")
    for outcome in await settle_unfinished(ctx, target):
        await progress.note(settled_text(outcome))
    await progress.step(0, SETTLE_STEP, "ok")
    await progress.step(1, LEASE_STEP, "running")
    async with leased(ctx, target, purpose=command, actor=actor, wait_s=0.0, progress=progress):
        await progress.step(1, LEASE_STEP, "ok")
        await progress.step(2, command, "running")
        change = await change_target(ctx, target, command)
    await progress.step(2, command, "ok" if change.ok else "failed")
    return change
