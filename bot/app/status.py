"""`status`: what runs on a target, for every front end (and `bot.app.fleet`, which asks each
target of a fleet).

Read-only: no lease. It reads each node's unit state, node 0's unit and flags, /health by the
session's route, the last snapshot and known-good one, the ledger's divergence, the change freeze
in effect and the commands queued for the lease.

Why a module of its own, apart from the other target commands (`bot.app.target_commands`):
`status` is what an on-call engineer runs first, and importing rollback, heal, the run settler
and the journal readers with it cost `flagbot status` about 0.2 s before its first call
(issue 22, `bench/cli_startup.py`); this module imports only what a status reads.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from bot.app.context import AppContext
from bot.app.freeze_state import Freeze, active_freeze
from bot.app.sessions import open_session
from bot.app.waiters import waiting_queue
from bot.http import async_client
from bot.store.lease_queue import WaiterInfo
from bot.store.models import Snapshot
from bot.target.errors import HostKeyError, LocalFileError, TargetError
from bot.target.known_good import known_good
from bot.target.ledger import Divergence
from bot.target.nodestate import NodeState, node_state, probe_health
from bot.target.session import TargetSession
from bot.target.snapshot_facts import is_release_difference
from bot.target.unit import read_unit


@dataclass(frozen=True)
class NodeStatus:
    """One node's unit state, or why it could not be read."""

    node: str
    state: NodeState | None = None
    error: str | None = None
    kind: str = "unreachable"
    """What the error is: `unreachable`, or `not connected` (a key file, known_hosts or host key
    problem: flagbot did not connect, the node may well be up)."""
    unit: str = ""
    """The service this node runs (`Target.unit_of`): head and worker may differ."""

    def to_json(self) -> dict[str, Any]:
        if self.state is None:
            return {"node": self.node, "unit": self.unit, "error": self.error, "kind": self.kind}
        return {"node": self.node, "unit": self.unit, **self.state.__dict__}


def _error_kind(exc: BaseException) -> str:
    """`not connected` for a problem on flagbot's side of the connection, else `unreachable`."""
    return "not connected" if isinstance(exc, LocalFileError | HostKeyError) else "unreachable"


@dataclass(frozen=True)
class TargetStatus:
    """What runs on a target: the unit on each node, /health, the flags, the last snapshot."""

    target: str
    unit: str
    health: int | None
    nodes: list[NodeStatus]
    flags: list[dict[str, Any]]
    environment: dict[str, str]
    diverged: Divergence | None
    known_good_snapshot_id: int | None
    latest_snapshot: Snapshot | None
    freeze: Freeze | None = None
    """The change freeze in effect (`bot.app.freeze`), None when the target is not frozen."""
    http_way: str = ""
    """How /health was reached: `direct` or `through an SSH forward on node 0` (`bot.target.http_route`)."""
    waiting: list[WaiterInfo] = field(default_factory=list)
    """The commands queued for the target's lease (`wait=`), oldest first: `cancel waiter=ID`."""
    references: dict[str, str] = field(default_factory=dict)
    """Each `${NAME}` in node 0's flags -> its value from the unit's `EnvironmentFile=` (secrets
    masked), or why it is not known; the flags themselves show the reference as written."""

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "unit": self.unit,
            "health": self.health,
            "http_way": self.http_way,
            "nodes": [node.to_json() for node in self.nodes],
            "flags": self.flags,
            "environment": self.environment,
            "references": self.references,
            "diverged": None if self.diverged is None else self.diverged.__dict__,
            "known_good_snapshot_id": self.known_good_snapshot_id,
            "latest_snapshot": None
            if self.latest_snapshot is None
            else _snapshot_summary(self.latest_snapshot),
            "freeze": None if self.freeze is None else self.freeze.to_json(),
            "waiting": [
                {
                    "waiter": waiter.id,
                    "requested_by": waiter.requested_by,
                    "purpose": waiter.purpose,
                    "command": waiter.command,
                    "since": waiter.created_at.isoformat(),
                    "until": waiter.deadline.isoformat(),
                    "text": waiter.describe(),
                }
                for waiter in self.waiting
            ],
        }


def _snapshot_summary(snapshot: Snapshot) -> dict[str, Any]:
    effective = snapshot.effective or {}
    return {
        "id": snapshot.id,
        "captured_at": snapshot.captured_at.isoformat(),
        "invocation_id": snapshot.invocation_id,
        "ready": snapshot.ready,
        "startup_error": snapshot.startup_error,
        "parsed_max_running_requests": effective.get("parsed_max_running_requests"),
        "effective_max_running_requests": effective.get("max_running_requests"),
        "implied": sorted(k for k, e in (snapshot.implied or {}).items() if not is_release_difference(e)),
    }


async def _health(ts: TargetSession, client: httpx.AsyncClient) -> tuple[int | None, str]:
    """/health by the session's route, and the route's words (why not, when there is none)."""
    try:
        route = await ts.http_route()
    except TargetError as exc:
        return None, f"not reached: {exc}"
    return await probe_health(client, route.base_url + "/health"), route.described


async def status_of(ts: TargetSession) -> TargetStatus:
    """The status of a target whose session is open."""
    async with async_client(timeout=3.0) as client:
        view, states, (health, http_way) = await asyncio.gather(
            read_unit(ts.node0),
            asyncio.gather(*(node_state(node) for node in ts.nodes), return_exceptions=True),
            _health(ts, client),
        )
    store = ts.store
    good = await store.run(known_good, store.store, ts.name) if store else None
    latest = await store.run(store.store.latest_snapshot, ts.name) if store else None
    diverged = await ts.ledger.divergence()
    nodes = [
        NodeStatus(node.name, error=str(state), kind=_error_kind(state), unit=node.unit)
        if isinstance(state, BaseException)
        else NodeStatus(node.name, state, unit=node.unit)
        for node, state in zip(ts.nodes, states, strict=True)
    ]
    return TargetStatus(
        target=ts.name,
        unit=ts.unit,
        health=health,
        http_way=http_way,
        nodes=nodes,
        flags=view.flags.to_json(),
        environment=dict(view.env),
        references=view.shown_references(view.flags),
        diverged=diverged,
        known_good_snapshot_id=good.id if good else None,
        latest_snapshot=latest,
    )


async def status(ctx: AppContext, target: str) -> TargetStatus:
    """`status`: read-only, no lease; with the target's change freeze, if one holds, and the
    commands queued for its lease."""
    async with open_session(ctx, target) as ts:
        found = await status_of(ts)
    return replace(found, freeze=await active_freeze(ctx, target), waiting=await waiting_queue(ctx, target))
