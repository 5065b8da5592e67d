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
from bot.app.fleet import fleet_status, wants_fleet
from bot.app.target_commands import (
    GrepAnswer,
    GrepRequest,
    LogsRequest,
    TargetChange,
    TargetStatus,
    grep_target,
    logs_target,
    observation,
    rollback_or_reconcile,
    status,
)
from bot.app.targets import target_of
from bot.cli.common import fail, run_in_context, usage_errors
from bot.cli.families import TARGET_COMMANDS
from bot.cli.progress import ConsoleProgress
from bot.commands import Invocation
from bot.config import Settings
from bot.loop.console import print_table, render_evidence
from bot.store.leases import LeaseHeld
from bot.target.errors import TargetError
from bot.target.evidence import JournalExcerpt, evidence_from_json
from bot.target.observe import Observation

__all__ = ["TARGET_COMMANDS", "run_target_command"]


def _print_status(console: Console, data: dict[str, Any]) -> None:
    rows = [
        (node["node"], node.get("unit", ""), node.get("kind", "unreachable"), node["error"], "", "")
        if "error" in node
        else (
            node["node"],
            node.get("unit", ""),
            f"{node['active']}/{node['sub']}",
            str(node["invocation"]),
            str(node["n_restarts"]),
            node["result"],
        )
        for node in data["nodes"]
    ]
    title = f"{data['target']}: node 0 {data['unit']} (/health {data['health']})"
    print_table(console, title, ("node", "unit", "state", "invocation", "NRestarts", "result"), rows)
    flags = " ".join(
        f"{f['flag']} {' '.join(f['value']) if isinstance(f['value'], list) else f['value'] or ''}".strip()
        for f in data["flags"]
    )
    console.print(f"flags (node 0): {flags}", markup=False, soft_wrap=True)
    if data.get("references"):  # `${NAME}` from an EnvironmentFile=, expanded (secrets masked)
        shown = ", ".join(f"{name} = {value}" for name, value in data["references"].items())
        console.print(f"references (EnvironmentFile=): {shown}", markup=False, soft_wrap=True)
    if data.get("http_way"):
        console.print(f"HTTP endpoint: {data['http_way']}", markup=False, soft_wrap=True)
    latest = data["latest_snapshot"]
    if latest:
        console.print(
            f"latest snapshot #{latest['id']} ({latest['captured_at']}): ready={latest['ready']}, "
            f"max_running_requests parsed {latest['parsed_max_running_requests']} / effective "
            f"{latest['effective_max_running_requests']}",
            highlight=False,
        )
    console.print(f"known-good snapshot: {data['known_good_snapshot_id'] or 'none yet (run observe)'}")
    if data.get("freeze"):
        console.print(f"[bold]frozen[/bold]: {data['freeze']['text']}; commands that change it are refused")
    for waiter in data.get("waiting", []):  # the queue for the lease, oldest first (`wait=`)
        console.print(
            f"queued: {waiter['text']}; `flagbot cancel waiter={waiter['waiter']}` stops it", markup=False
        )
    if data["diverged"]:
        diverged = data["diverged"]
        console.print(
            f"[bold red]diverged[/bold red]: {', '.join(diverged['nodes'])}: {diverged['reason']}; "
            "`flagbot reconcile` (or any mutating command) brings the nodes back together once they answer"
        )


def _print(name: str, data: dict[str, Any]) -> None:
    console = Console(highlight=False)
    if name == "status":
        _print_status(console, data)
    elif name in ("grep", "logs"):
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


Answer = TargetStatus | Observation | GrepAnswer | TargetChange


async def _answer(ctx: AppContext, name: str, target: str, invocation: Invocation) -> Answer:
    """The use case of `bot.app.target_commands` the command names."""
    if name == "status":
        return await status(ctx, target)
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


def _run_fleet_status(config: Settings, *, json_output: bool) -> None:
    """`status` of every target (`target=all`, or none named with several configured): one table;
    exit 1 when a target could not be read (its line says why), 0 when all were."""
    fleet = run_in_context(config, fleet_status)
    if json_output:
        typer.echo(json.dumps({"ok": not fleet.unreachable, **fleet.to_json()}, indent=2, default=str))
    else:
        render_evidence(Console(highlight=False), fleet.blocks())
    raise typer.Exit(1 if fleet.unreachable else 0)


def run_target_command(name: str, invocation: Invocation, config: Settings, *, json_output: bool) -> None:
    """Run one target command and print it; raises `typer.Exit` with the exit code."""
    if name == "status" and wants_fleet(config, invocation):
        _run_fleet_status(config, json_output=json_output)
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
