"""`flagbot status|observe|grep|rollback|reconcile`: the target commands of the CLI, same words as in Slack.

`bot.cli` hands these commands their raw words (parsed by the shared grammar: `target=`,
`--target`, `since=`, `lines=`, `scope=`); this module runs them against the target over SSH
and prints the evidence as rich tables, or as one JSON document with `--json` (taken out of
the words before the grammar sees them: it is about the terminal, not the command). Every
failure is one `error:` line: exit 2 for a usage or config problem, 1 when the target could not
do what was asked, 0 otherwise (grep: 1 when nothing matched, like grep).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from bot.app.context import AppContext, console_actor
from bot.app.target_commands import (
    GrepAnswer,
    GrepRequest,
    LogsRequest,
    TargetChange,
    grep_target,
    logs_target,
    observation,
    rollback_or_reconcile,
)
from bot.app.targets import target_of
from bot.cli.common import fail, run_in_context, usage_errors
from bot.cli.families import TARGET_COMMANDS
from bot.cli.progress import ConsoleProgress
from bot.commands import Invocation
from bot.config import Settings
from bot.loop.console import render_evidence
from bot.store.leases import LeaseHeld
from bot.target.errors import TargetError
from bot.target.evidence import JournalExcerpt, evidence_from_json
from bot.target.observe import Observation

__all__ = ["TARGET_COMMANDS", "run_target_command"]


def _print(name: str, data: dict[str, Any]) -> None:
    console = Console(highlight=False)
    if name in ("grep", "logs"):
        for item in data["results"]:
            if "error" in item:
                console.print(f"{item['node']}: error: {item['error']}", markup=False)
                continue
            excerpt = JournalExcerpt(item["title"], item["node"], item["command"], tuple(item["lines"]))
            render_evidence(console, [excerpt])
    else:
        render_evidence(console, [evidence_from_json(item) for item in data.get("evidence", [])])
        if name == "observe":
            state = (
                "healthy (known-good)"
                if data.get("known_good")
                else ("healthy" if data["healthy"] else "not healthy")
            )
            console.print(f"snapshot #{data.get('snapshot_id')} of invocation {data['invocation']}: {state}")


Answer = Observation | GrepAnswer | TargetChange


async def _answer(ctx: AppContext, name: str, target: str, invocation: Invocation) -> Answer:
    """The use case of `bot.app.target_commands` the command names."""
    if name == "observe":
        return await observation(ctx, target)
    if name == "grep":
        return await grep_target(ctx, target, GrepRequest.of(invocation))
    if name == "logs":
        return await logs_target(ctx, target, LogsRequest.of(invocation))
    progress = ConsoleProgress(sys.stderr)
    return await rollback_or_reconcile(ctx, target, name, actor=console_actor(), progress=progress)


def _exit_code(answer: Answer) -> int:
    if isinstance(answer, GrepAnswer):  # `grep`: a match; `logs`: every node read
        return 0 if answer.ok else 1
    if isinstance(answer, TargetChange):
        return 0 if answer.ok else 1
    return 0


def run_target_command(name: str, invocation: Invocation, config: Settings, *, json_output: bool) -> None:
    """Run one target command and print it; raises `typer.Exit` with the exit code."""
    try:
        with usage_errors():
            target = target_of(config, invocation)
            if name == "grep":
                GrepRequest.of(invocation)  # a usage problem is said before anything connects
            answer = run_in_context(config, lambda ctx: _answer(ctx, name, target, invocation))
    except LeaseHeld as exc:
        raise fail(f"error: {exc}", 1) from None
    except (TargetError, OSError, ValueError, LookupError) as exc:
        raise fail(f"error: {name}: {exc}", 1) from None
    data = answer.to_json()
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        _print(name, data)
    raise typer.Exit(_exit_code(answer))
