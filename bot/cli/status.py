"""`flagbot status`: one target's table, or the fleet's (`target=all`, or none named with several
configured), or `--json`.

Why apart from the other target commands (`bot.cli.target`): `status` is the command an on-call
engineer types first, and it imports only `bot.app.status` and `bot.app.fleet`, not rollback,
the run settler or the journal readers (issue 22, `bench/cli_startup.py`).
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console

from bot.app.fleet import fleet_status, wants_fleet
from bot.app.status import status
from bot.app.targets import target_of
from bot.cli.common import fail, run_in_context, usage_errors
from bot.commands import Invocation
from bot.config import Settings
from bot.loop.console import print_table, render_evidence
from bot.target.errors import TargetError

__all__ = ["print_status", "run_status_command"]


def print_status(console: Console, data: dict[str, Any]) -> None:
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


def _run_fleet_status(config: Settings, *, json_output: bool) -> None:
    """`status` of every target (`target=all`, or none named with several configured): one table;
    exit 1 when a target could not be read (its line says why), 0 when all were."""
    fleet = run_in_context(config, fleet_status)
    if json_output:
        typer.echo(json.dumps({"ok": not fleet.unreachable, **fleet.to_json()}, indent=2, default=str))
    else:
        render_evidence(Console(highlight=False), fleet.blocks())
    raise typer.Exit(1 if fleet.unreachable else 0)


def run_status_command(invocation: Invocation, config: Settings, *, json_output: bool) -> None:
    """Run `status` and print it; raises `typer.Exit`: 0 once node 0's unit is read (a node that
    could not be read says so in its row), 1 when it could not be."""
    if wants_fleet(config, invocation):
        _run_fleet_status(config, json_output=json_output)
    try:
        with usage_errors():
            target = target_of(config, invocation)
            answer = run_in_context(config, lambda ctx: status(ctx, target))
    except (TargetError, OSError, ValueError, LookupError) as exc:
        raise fail(f"error: status: {exc}", 1) from None
    data = answer.to_json()
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        print_status(Console(highlight=False), data)
    raise typer.Exit(0)
