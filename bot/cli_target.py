"""`flagbot status|observe|grep|rollback|reconcile`: the target commands of the CLI, same words as in Slack.

`bot.cli` hands these commands their raw words (parsed by the shared grammar: `target=`,
`--target`, `since=`, `lines=`, `scope=`); this module runs them against the target over SSH
and prints the evidence as rich tables, or as one JSON document with `--json` (taken out of
the words before the grammar sees them: it is about the terminal, not the command). Every
failure is one `error:` line: exit 2 for a usage or config problem, 1 when the target could not
do what was asked, 0 otherwise (grep: 1 when nothing matched, like grep).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from bot.commands import Invocation
from bot.config import Secrets, Settings
from bot.config.schema import parse_duration
from bot.loop.console import render_evidence
from bot.target.errors import TargetError
from bot.target.evidence import Evidence, JournalExcerpt, TextBlock, evidence_from_json

if TYPE_CHECKING:  # imported when a command runs: asyncssh and sqlalchemy cost ~0.8 s at start
    from bot.store import Store
    from bot.target.session import TargetSession

__all__ = ["TARGET_COMMANDS", "CliError", "render_evidence", "run_target_command", "split_json"]

TARGET_COMMANDS = frozenset({"status", "observe", "grep", "rollback", "reconcile"})
JSON_SWITCH = "--json"


class CliError(Exception):
    """One line for stderr and the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def split_json(words: list[str]) -> tuple[list[str], bool]:
    """The words without `--json`, and whether it was there."""
    return [word for word in words if word != JSON_SWITCH], JSON_SWITCH in words


def _target(config: Settings, invocation: Invocation) -> tuple[str, Any]:
    name = invocation.options.get("target") or config.default_target
    if name is None:
        raise CliError("no target: give target=NAME or set default_target in flagbot.toml", 2)
    if name not in config.targets:
        known = ", ".join(sorted(config.targets)) or "none"
        raise CliError(f"unknown target {name!r}; targets: {known}", 2)
    return name, config.targets[name]


def open_store(config: Settings) -> Store:
    from bot.store import Store

    url = Secrets().database_url
    store = Store.open(url.get_secret_value() if url else None, sqlite_path=config.database.sqlite_path)
    try:
        store.check_ready()
    except Exception as exc:
        store.close()
        raise CliError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 2) from None
    return store


def cache_dir(config: Settings) -> Path:
    """Where host flag lists are cached per SGLang version: next to the SQLite database."""
    return config.database.sqlite_path.parent / "cache"


async def _with_target(
    config: Settings, invocation: Invocation, action: Callable[[TargetSession], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    from bot.store import AsyncStore
    from bot.target.session import TargetSession

    name, target = _target(config, invocation)
    store = AsyncStore(open_store(config))
    try:
        async with TargetSession.open(name, target, store=store) as ts:
            return await action(ts)
    finally:
        await store.aclose()


# --- the commands -------------------------------------------------------------------------


async def status_of(ts: TargetSession) -> dict[str, Any]:
    from bot.http import async_client
    from bot.target.known_good import known_good
    from bot.target.nodestate import node_state, probe_health
    from bot.target.unit import read_unit

    async with async_client(timeout=3.0) as client:
        view, states, health = await asyncio.gather(
            read_unit(ts.node0),
            asyncio.gather(*(node_state(node) for node in ts.nodes), return_exceptions=True),
            probe_health(client, ts.target.http_base() + "/health"),
        )
    store = ts.store
    good = await store.run(known_good, store.store, ts.name) if store else None
    latest = await store.run(store.store.latest_snapshot, ts.name) if store else None
    diverged = await ts.ledger.divergence()
    nodes = []
    for node, state in zip(ts.nodes, states, strict=True):
        if isinstance(state, BaseException):
            nodes.append({"node": node.name, "error": str(state)})
        else:
            nodes.append({"node": node.name, **state.__dict__})
    return {
        "target": ts.name,
        "unit": ts.unit,
        "health": health,
        "nodes": nodes,
        "flags": view.flags.to_json(),
        "environment": dict(view.env),
        "diverged": None if diverged is None else diverged.__dict__,
        "known_good_snapshot_id": good.id if good else None,
        "latest_snapshot": None if latest is None else _snapshot_summary(latest),
    }


def _snapshot_summary(snapshot: Any) -> dict[str, Any]:
    effective = snapshot.effective or {}
    return {
        "id": snapshot.id,
        "captured_at": snapshot.captured_at.isoformat(),
        "invocation_id": snapshot.invocation_id,
        "ready": snapshot.ready,
        "startup_error": snapshot.startup_error,
        "parsed_max_running_requests": effective.get("parsed_max_running_requests"),
        "effective_max_running_requests": effective.get("max_running_requests"),
        "implied": sorted(snapshot.implied or {}),
    }


def observer(config: Settings) -> Callable[[TargetSession], Awaitable[dict[str, Any]]]:
    async def run(ts: TargetSession) -> dict[str, Any]:
        from bot.target.observe import observe

        return (await observe(ts, cache_dir=cache_dir(config))).to_json()

    return run


def grepper(invocation: Invocation) -> Callable[[TargetSession], Awaitable[dict[str, Any]]]:
    from bot.target.grep import DEFAULT_LINES, Scope, grep, since_from_duration

    pattern = str(invocation.positionals["pattern"])
    since_text = invocation.options.get("since")
    scope: Scope = invocation.options.get("scope", "since" if since_text else "this")  # type: ignore[assignment]
    if scope == "since" and not since_text:
        raise CliError("scope=since needs since=DURATION, e.g. since=2h", 2)
    since = since_from_duration(_seconds(since_text)) if since_text else None
    lines = int(invocation.options.get("lines", DEFAULT_LINES))

    async def run(ts: TargetSession) -> dict[str, Any]:
        found = await asyncio.gather(
            *(grep(node, pattern, scope=scope, since=since, lines=lines) for node in ts.nodes),
            return_exceptions=True,
        )
        results = []
        for node, item in zip(ts.nodes, found, strict=True):
            if isinstance(item, BaseException):
                results.append({"node": node.name, "error": str(item)})
            else:
                results.append(item.to_json() | {"title": item.describe()})
        return {"target": ts.name, "pattern": pattern, "scope": scope, "results": results}

    return run


def _seconds(text: str) -> float:
    value = parse_duration(text)
    return float(value.total_seconds()) if hasattr(value, "total_seconds") else float(str(value))


def _rollback(config: Settings) -> Callable[[TargetSession], Awaitable[dict[str, Any]]]:
    async def run(ts: TargetSession) -> dict[str, Any]:
        from bot.target.heal import heal_if_diverged
        from bot.target.rollback import rollback

        healed = await heal_if_diverged(ts, cache_dir=cache_dir(config))
        data = (await rollback(ts, trigger="on-demand", cache_dir=cache_dir(config))).to_json()
        if healed is not None:
            data["reconciled"] = healed.to_json()
            data["evidence"] = healed.to_json()["evidence"] + data["evidence"]
        return data

    return run


def _reconcile(config: Settings) -> Callable[[TargetSession], Awaitable[dict[str, Any]]]:
    async def run(ts: TargetSession) -> dict[str, Any]:
        from bot.target.heal import heal_if_diverged

        healed = await heal_if_diverged(ts, cache_dir=cache_dir(config))
        if healed is None:
            text = f"{ts.name} is not diverged: every node runs the drop-in flagbot left; nothing to do."
            return {
                "target": ts.name,
                "ok": True,
                "diverged_nodes": [],
                "evidence": [TextBlock(text).to_json()],
            }
        return healed.to_json()

    return run


# --- output --------------------------------------------------------------------------------


def _blocks(data: list[dict[str, Any]]) -> list[Evidence]:
    return [evidence_from_json(item) for item in data]


def _print_status(console: Console, data: dict[str, Any]) -> None:
    table = Table(title=f"{data['target']}: {data['unit']} (/health {data['health']})", title_justify="left")
    for column in ("node", "state", "invocation", "NRestarts", "result"):
        table.add_column(column, overflow="fold")
    for node in data["nodes"]:
        if "error" in node:
            table.add_row(node["node"], "unreachable", node["error"], "", "")
        else:
            state = f"{node['active']}/{node['sub']}"
            table.add_row(
                node["node"], state, str(node["invocation"]), str(node["n_restarts"]), node["result"]
            )
    console.print(table)
    flags = " ".join(
        f"{f['flag']} {' '.join(f['value']) if isinstance(f['value'], list) else f['value'] or ''}".strip()
        for f in data["flags"]
    )
    console.print(f"flags (node 0): {flags}", markup=False, soft_wrap=True)
    latest = data["latest_snapshot"]
    if latest:
        console.print(
            f"latest snapshot #{latest['id']} ({latest['captured_at']}): ready={latest['ready']}, "
            f"max_running_requests parsed {latest['parsed_max_running_requests']} / effective "
            f"{latest['effective_max_running_requests']}",
            highlight=False,
        )
    console.print(f"known-good snapshot: {data['known_good_snapshot_id'] or 'none yet (run observe)'}")
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
    elif name == "grep":
        for item in data["results"]:
            if "error" in item:
                console.print(f"{item['node']}: error: {item['error']}", markup=False)
                continue
            excerpt = JournalExcerpt(item["title"], item["node"], item["command"], tuple(item["lines"]))
            render_evidence(console, [excerpt])
    else:
        render_evidence(console, _blocks(data.get("evidence", [])))
        if name == "observe":
            state = (
                "healthy (known-good)"
                if data.get("known_good")
                else ("healthy" if data["healthy"] else "not healthy")
            )
            console.print(f"snapshot #{data.get('snapshot_id')} of invocation {data['invocation']}: {state}")


def run_target_command(name: str, invocation: Invocation, config: Settings, *, json_output: bool) -> None:
    """Run one target command and print it; raises `typer.Exit` with the exit code."""
    try:
        if name == "status":
            action: Callable[[TargetSession], Awaitable[dict[str, Any]]] = status_of
        elif name == "observe":
            action = observer(config)
        elif name == "grep":
            action = grepper(invocation)
        elif name == "reconcile":
            action = _reconcile(config)
        else:
            action = _rollback(config)
        data = asyncio.run(_with_target(config, invocation, action))
    except CliError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.code) from None
    except (TargetError, OSError, ValueError) as exc:
        typer.echo(f"error: {name}: {exc}", err=True)
        raise typer.Exit(1) from None
    if json_output:
        typer.echo(json.dumps(data, indent=2, default=str))
    else:
        _print(name, data)
    code = 0
    if name == "grep":
        code = 0 if any(item.get("count") for item in data["results"]) else 1
    elif name in ("rollback", "reconcile"):
        code = 0 if data["ok"] else 1
    raise typer.Exit(code)
