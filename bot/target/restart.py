"""Restart a target as one operation across its nodes, never leaving it silently half-applied.

Phase 1 writes, reloads and verifies the new drop-in on *every* node; if any node fails, every
node's previous drop-in is restored and nothing is restarted. Phase 2 stops every rank, then
starts every rank (multi-node SGLang: the ranks rendezvous at start, so a rank restarted alone
waits for peers that will never come), clearing a tripped start limit with `reset-failed`.
A node lost in phase 2 (or during a phase-1 restore) marks the target *diverged* in the store:
further applies are refused until `reconcile` brings every node to the drop-in flagbot meant
and restarts the ranks together. Readiness is not waited for here (`bot.target.readiness`).

A connection dropped under a command while the host stays up is not a lost node: the session
reconnects and re-runs the command (`bot.target.ssh_reconnect.RETRY_SAFE`), and each node's report lists
those reconnects for the evidence. Only a failed reconnect makes the node lost (diverged).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from bot.sglang.flagset import FlagItem, FlagSet
from bot.store.models import utcnow
from bot.store.records import RESTART_ACTION, audit
from bot.target.drain import DrainReport, DrainSettings, DrainTimeoutError, drain, resume_traffic
from bot.target.dropin import DropinSpec, WriteResult, check_unedited, read_dropin, write_dropin
from bot.target.errors import CommandFailed, DivergedError, TargetError
from bot.target.session import TargetSession
from bot.target.ssh import NodeSession
from bot.target.ssh_reconnect import Reconnect
from bot.target.systemd_quote import is_reference_word
from bot.target.unit import UnitView, read_state, read_unit

NODE_RANK = "--node-rank"
START_LIMIT_HINTS = (b"start-limit", b"repeated too quickly")
Phase = Literal["written", "restarted", "rolled-back", "diverged", "reconciled"]


@dataclass
class NodeReport:
    """What happened on one node: invocation before and after, timings (s), and any error."""

    node: str
    index: int
    old_invocation: str | None = None
    new_invocation: str | None = None
    written: bool = False
    restored: bool = False
    reset_failed: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    reconnects: list[Reconnect] = field(default_factory=list)
    """Connections to this node lost and reopened during the operation (commands re-run)."""


@dataclass
class RestartReport:
    """The structured result of one apply/restart, for evidence and for the readiness step."""

    target: str
    phase: Phase
    nodes: list[NodeReport]
    started_at: datetime = field(default_factory=utcnow)
    duration_s: float = 0.0
    drain: DrainReport | None = None
    resumed: str | None = None
    """The resume hook's call when the restart was called off after the drain (nothing restarted)."""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.phase in ("restarted", "reconciled") and all(node.error is None for node in self.nodes)

    def connection_notes(self) -> list[str]:
        """One sentence per reconnect on any node, for the evidence of the apply."""
        return [reconnect.describe() for node in self.nodes for reconnect in node.reconnects]


class RestartError(TargetError):
    """An apply or restart that did not complete; `report` says what each node went through."""

    def __init__(self, message: str, report: RestartReport) -> None:
        super().__init__(message)
        self.report = report


def flags_for_nodes(flags: FlagSet, nodes: int) -> list[FlagSet]:
    """The same flags for every rank, `--node-rank k` set on node k (kept in place when present).

    `--node-rank ${NODE_RANK}` is kept as written on every node: each node's `EnvironmentFile=`
    says its rank, and writing a number in its place would undo that layout.
    """
    out = []
    for rank in range(nodes):
        items = list(flags.items)
        position = next((i for i, item in enumerate(items) if item.flag == NODE_RANK), None)
        if position is None:
            if nodes > 1:
                items.append(FlagItem(NODE_RANK, str(rank)))
        else:
            value = items[position].value
            if not (isinstance(value, str) and is_reference_word(value)):
                items[position] = FlagItem(NODE_RANK, str(rank))
        out.append(FlagSet(tuple(items)))
    return out


def check_lockstep(flags_per_node: Sequence[FlagSet]) -> None:
    """Refuse flag sets that differ between nodes in anything but `--node-rank`."""

    def without_rank(flags: FlagSet) -> list[FlagItem]:
        return [item for item in flags.items if item.flag != NODE_RANK]

    first = without_rank(flags_per_node[0])
    for index, flags in enumerate(flags_per_node[1:], start=1):
        if without_rank(flags) != first:
            raise ValueError(
                f"node {index}'s flags differ from node 0's in more than --node-rank: multi-node "
                "SGLang needs the same flags on every rank"
            )


@contextmanager
def _reconnects_into(ts: TargetSession, report: RestartReport) -> Iterator[None]:
    """Put the reconnects each node's session makes inside the block into its report, also on failure."""
    marks = [len(node.reconnects) for node in ts.nodes]
    try:
        yield
    finally:
        for node, mark in zip(ts.nodes, marks, strict=True):
            report.nodes[node.index].reconnects.extend(node.reconnects[mark:])


async def _guard(ts: TargetSession) -> None:
    diverged = await ts.ledger.divergence()
    if diverged is not None:
        raise DivergedError(ts.name, diverged.nodes, diverged.reason)


async def _timed(report: NodeReport, key: str, action: Awaitable[object]) -> None:
    """Await `action`, recording its duration under `key` even when it fails."""
    started = time.monotonic()
    try:
        await action
    finally:
        report.timings[key] = round(time.monotonic() - started, 3)


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def apply_and_restart(
    ts: TargetSession,
    new_flags_per_node: Sequence[FlagSet],
    env: Mapping[str, str] | None = None,
    *,
    drain: DrainSettings | None = None,
    force: bool = False,
    reason: str = "",
) -> RestartReport:
    """Write the new flags (and environment) on every node, then restart all ranks together.

    `new_flags_per_node[k]` is node k's flag set (use `flags_for_nodes`); `env=None` keeps the
    unit's environment as it is now, a mapping is node 0's whole environment, and the other nodes
    get the same change on their own (`env_per_node`). Returns after the starts
    were issued. Raises `DivergedError` when the target is diverged, `RestartError` (with the
    report) when phase 1 failed and was rolled back or phase 2 left the target diverged, and
    `HandEditError` (via phase 1) for a hand-edited unit unless `force`. With `force`, a
    daemon-reload left pending (a flagbot killed between its write and its reload) is done first.
    """
    if len(new_flags_per_node) != len(ts.nodes):
        raise ValueError(f"{len(new_flags_per_node)} flag sets for {len(ts.nodes)} nodes")
    check_lockstep(new_flags_per_node)
    await _guard(ts)
    if force:
        await _finish_pending_reloads(ts)
    views = await _read_all(ts)
    several = [view.node for view in views if view.exec_count > 1]
    if several:
        raise ValueError(
            f"{', '.join(several)}: ExecStart= runs several commands; flagbot's drop-in would replace "
            "them all with one line. Keep only the SGLang command in ExecStart= on the host"
        )
    specs: list[DropinSpec | None] = [
        dropin_spec(view, flags, node_env)
        for view, flags, node_env in zip(views, new_flags_per_node, env_per_node(views, env), strict=True)
    ]
    return await _apply(ts, specs, drain=drain, force=force, reason=reason or "apply", views=views)


async def restore_vendor_and_restart(
    ts: TargetSession, *, drain: DrainSettings | None = None, force: bool = False
) -> RestartReport:
    """Go back to the vendor `ExecStart=`/`Environment=` on every node (neutral drop-in), restart."""
    await _guard(ts)
    return await _apply(ts, [None] * len(ts.nodes), drain=drain, force=force, reason="restore vendor line")


async def restart_target(ts: TargetSession, *, drain: DrainSettings | None = None) -> RestartReport:
    """Stop every rank, then start every rank, with the unit as it is (no drop-in change)."""
    await _guard(ts)
    report = RestartReport(ts.name, "written", [NodeReport(n.name, n.index) for n in ts.nodes])
    started = time.monotonic()
    with _reconnects_into(ts, report):
        await _drain_first(ts, report, drain)
        return await _restart_phase(ts, report, started)


def env_per_node(views: Sequence[UnitView], env: Mapping[str, str] | None) -> list[Mapping[str, str] | None]:
    """Each node's environment for `env`, which is what node 0 is to run (None: as it is).

    Why not `env` everywhere: nodes may differ in their environment (`-e NODE_RANK=1` in node 1's
    `docker run`, a NIC name in `Environment=`), and an `env set` on one variable must not copy
    node 0's values of the others onto them. So node 0 gets `env`, and every other node gets the
    same change applied to its own environment: each variable `env` sets to a value node 0 does
    not have now is set, each node 0 has that `env` drops is removed, everything else stays as
    that node has it."""
    if env is None:
        return [None] * len(views)
    now = views[0].env
    changed = {name: value for name, value in env.items() if now.get(name) != value}
    dropped = now.keys() - env.keys()
    out: list[Mapping[str, str] | None] = [dict(env)]
    for view in views[1:]:
        own = {name: value for name, value in view.env.items() if name not in dropped}
        out.append({**own, **changed})
    return out


def dropin_spec(view: UnitView, flags: FlagSet, env: Mapping[str, str] | None) -> DropinSpec:
    """What the drop-in holds for `flags` and `env` (None: the environment as it is).

    A container launcher's environment is its `docker run -e` options, so an `env` that differs
    from them rewrites them inside the argument list (one the same leaves the options as written);
    the unit's own `Environment=` (the runtime's, not the container's) is left as it is.
    Otherwise `env` replaces `Environment=`.
    """
    if view.launch.kind == "docker":
        changed = env is not None and dict(env) != dict(view.launch.env)  # unchanged: options as written
        container_env = dict(env) if env is not None and changed else None
        return DropinSpec(view.argv_with(flags, container_env=container_env), _effective_env(view, None))
    return DropinSpec(view.argv_with(flags), _effective_env(view, env))


def _effective_env(view: UnitView, env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    if env is None:
        dropin = view.flagbot_dropin
        managed = dropin is not None and "\nEnvironment=\n" in f"\n{dropin.text}"
        return dict(view.environment) if managed else None
    return view.unmask_env(dict(env))


async def _finish_pending_reloads(ts: TargetSession) -> None:
    """A forced apply (a restore) after a write whose daemon-reload never ran (flagbot was killed
    in between): reload first, or the unit cannot be read (its files and what systemd runs differ)."""

    async def reload(node: NodeSession) -> None:
        if (await read_state(node)).need_daemon_reload:
            await node.run("daemon-reload")

    for result in await ts.each(reload):
        if isinstance(result, BaseException):
            raise result


async def _read_all(ts: TargetSession) -> list[UnitView]:
    results = await ts.each(read_unit)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [result for result in results if isinstance(result, UnitView)]


async def _apply(
    ts: TargetSession,
    specs: list[DropinSpec | None],
    *,
    drain: DrainSettings | None,
    force: bool,
    reason: str,
    views: list[UnitView] | None = None,
) -> RestartReport:
    """`views`: every node's unit as read just before, when the caller has it (no second read)."""
    started = time.monotonic()
    report = RestartReport(ts.name, "written", [NodeReport(n.name, n.index) for n in ts.nodes])
    with _reconnects_into(ts, report):
        return await _apply_reported(
            ts, specs, report, started, drain=drain, force=force, reason=reason, views=views
        )


async def _apply_reported(
    ts: TargetSession,
    specs: list[DropinSpec | None],
    report: RestartReport,
    started: float,
    *,
    drain: DrainSettings | None,
    force: bool,
    reason: str,
    views: list[UnitView] | None,
) -> RestartReport:
    states = [view.state for view in views] if views is not None else await ts.each(read_state)
    for node_report, state in zip(report.nodes, states, strict=True):
        if not isinstance(state, BaseException):
            node_report.old_invocation = state.invocation_id
    previous: list[str | None] = [None] * len(ts.nodes)

    async def check(node: NodeSession) -> None:
        if not force:
            view = views[node.index] if views is not None else None
            seen = (view.cat_text, view.state.need_daemon_reload) if view is not None else None
            await check_unedited(node, ts.ledger, seen=seen)
        previous[node.index] = await read_dropin(node)

    checked = await ts.each(check)
    refused = [r for r in checked if isinstance(r, BaseException)]
    if refused:  # nothing was written anywhere yet
        raise refused[0]
    await _drain_first(ts, report, drain)

    async def write(node: NodeSession) -> WriteResult:
        node_report = report.nodes[node.index]
        began = time.monotonic()
        try:
            return await write_dropin(node, ts.ledger, specs[node.index], force=True, reason=reason)
        finally:
            node_report.timings["write"] = round(time.monotonic() - began, 3)

    results = await ts.each(write)
    for node_report, result in zip(report.nodes, results, strict=True):
        node_report.written = not isinstance(result, BaseException)
    failures = [(k, r) for k, r in enumerate(results) if isinstance(r, BaseException)]
    if failures:
        for k, exc in failures:
            report.nodes[k].error = _describe(exc)
        await _roll_back(ts, report, previous)
        if report.phase != "diverged":  # the server runs on as before: let its work back in
            report.resumed = await resume_traffic(ts)
        report.duration_s = round(time.monotonic() - started, 3)
        first = failures[0][1]
        if report.phase == "diverged":
            raise RestartError(
                f"{ts.name}: drop-in write failed ({first}) and could not be undone on every node; "
                "the target is marked diverged, run reconcile",
                report,
            )
        raise RestartError(
            f"{ts.name}: drop-in write failed; every node restored, nothing restarted: {first}", report
        )
    await ts.ledger.set_intended(
        {
            node.name: result.content
            for node, result in zip(ts.nodes, results, strict=True)
            if isinstance(result, WriteResult)
        }
    )
    return await _restart_phase(ts, report, started)


async def _roll_back(ts: TargetSession, report: RestartReport, previous: list[str | None]) -> None:
    """Phase-1 failure: put back every node's drop-in as it was (nodes never written need nothing)."""
    report.phase = "rolled-back"
    intended: dict[str, str] = {}

    async def restore(node: NodeSession) -> None:
        old = previous[node.index]
        content = old if old is not None else ""
        intended[node.name] = content
        await write_dropin(node, ts.ledger, None, force=True, reason="roll back", content=content)
        report.nodes[node.index].restored = True

    results = await ts.each(restore)
    lost = [ts.nodes[k].name for k, r in enumerate(results) if isinstance(r, BaseException)]
    for k, result in enumerate(results):
        if isinstance(result, BaseException):
            note = f"restore failed: {_describe(result)}"
            current = report.nodes[k].error
            report.nodes[k].error = f"{current}; {note}" if current else note
    if lost:
        await ts.ledger.set_intended(intended)
        report.phase = "diverged"
        await ts.ledger.mark_diverged(lost, "drop-in restore after a failed write did not complete")


async def _drain_first(ts: TargetSession, report: RestartReport, explicit: DrainSettings | None) -> None:
    """Before anything is written or stopped: drain as `explicit` says, else as the target's
    `[targets.X.drain]` says (nothing when neither). The ledger notes a stop hook before it is
    called, so a run that dies after it leaves the resume to whoever next sees the server healthy.
    `on_timeout = "abort"` with requests left: the resume hook runs and DrainTimeoutError is raised,
    nothing changed."""
    policy = ts.target.drain
    settings = explicit if explicit is not None else DrainSettings.of(policy) if policy is not None else None
    if settings is None:
        return
    if settings.stop_hook is not None and await ts.ledger.traffic_stopped_at() is not None:
        # already out of service (a failed start being rolled back, a run that died): calling the
        # hook again could fail on a router that no longer knows the worker, and block the rescue
        settings = replace(settings, stop_hook=None)
    if settings.stop_hook is not None:
        await ts.ledger.mark_traffic_stopped()
    try:
        report.drain = await drain(ts, settings)
    except Exception:
        if settings.stop_hook is not None:  # the stop hook failed: it took nothing out of service
            await ts.ledger.clear_traffic_stopped()
        raise
    if not report.drain.drained and settings.abort_on_timeout:
        report.resumed = await resume_traffic(ts)
        raise DrainTimeoutError(
            f'{ts.name}: {report.drain.describe()}; on_timeout = "abort": nothing was changed'
            + (f" ({report.resumed})" if report.resumed else ""),
            report.drain,
        )


async def _restart_phase(ts: TargetSession, report: RestartReport, started: float) -> RestartReport:
    """Phase 2: stop every rank, then start every rank (drained first by the caller, `_drain_first`)."""
    stop_timeout = ts.target.timeouts.stop.total_seconds()  # the configured upper bound of a stop
    if ts.store is not None:  # what `policy.max_restarts_per_hour` counts (bot.loop.restart_budget)
        nodes = [node.name for node in ts.nodes]
        await ts.store.run(
            audit,
            ts.store.store,
            actor="flagbot",
            target=ts.name,
            action=RESTART_ACTION,
            detail={"nodes": nodes},
        )

    async def stop(node: NodeSession) -> None:
        await _timed(report.nodes[node.index], "stop", node.run("stop", timeout=stop_timeout))

    await _phase(ts, report, stop, "stop")

    async def start(node: NodeSession) -> None:
        await _timed(report.nodes[node.index], "start", _start(node, report.nodes[node.index]))
        state = await read_state(node)
        report.nodes[node.index].new_invocation = state.invocation_id

    await _phase(ts, report, start, "start")
    report.phase = "restarted"
    report.duration_s = round(time.monotonic() - started, 3)
    return report


async def _start(node: NodeSession, node_report: NodeReport) -> None:
    """`systemctl start`; when systemd's start limit has tripped, `reset-failed` and start again."""
    state = await read_state(node)
    if state.active_state == "failed" or state.result == "start-limit-hit":
        await node.run("reset-failed")
        node_report.reset_failed = True
    try:
        await node.run("start")
    except CommandFailed as exc:
        if not any(hint in exc.result.stderr for hint in START_LIMIT_HINTS):
            raise
        await node.run("reset-failed")
        node_report.reset_failed = True
        await node.run("start")


async def _phase(
    ts: TargetSession, report: RestartReport, action: Callable[[NodeSession], Awaitable[None]], what: str
) -> None:
    results = await ts.each(action)
    bad = [(k, r) for k, r in enumerate(results) if isinstance(r, BaseException)]
    if not bad:
        return
    for k, exc in bad:
        report.nodes[k].error = f"{what}: {_describe(exc)}"
    nodes = [ts.nodes[k].name for k, _ in bad]
    reason = f"{what} failed on {', '.join(nodes)}: {_describe(bad[0][1])}"
    report.phase = "diverged"
    await ts.ledger.mark_diverged(nodes, reason)
    raise RestartError(f"{ts.name}: {reason}; the target is marked diverged, run reconcile", report)


async def reconcile(ts: TargetSession, *, drain: DrainSettings | None = None) -> RestartReport:
    """Bring a diverged target back: every node gets the drop-in flagbot meant, then all ranks restart.

    A node still unreachable raises `RestartError` and the target stays diverged.
    """
    started = time.monotonic()
    report = RestartReport(ts.name, "written", [NodeReport(n.name, n.index) for n in ts.nodes])
    with _reconnects_into(ts, report):
        await _drain_first(ts, report, drain)
        return await _reconcile(ts, report, started)


async def _reconcile(ts: TargetSession, report: RestartReport, started: float) -> RestartReport:
    intended = await ts.ledger.intended()

    async def align(node: NodeSession) -> None:
        want = intended.get(node.name)
        state = await read_state(node)
        report.nodes[node.index].old_invocation = state.invocation_id
        if want is None or await read_dropin(node) == want:
            return
        await write_dropin(node, ts.ledger, None, force=True, reason="reconcile", content=want)
        report.nodes[node.index].written = True

    results = await ts.each(align)
    bad = [(k, r) for k, r in enumerate(results) if isinstance(r, BaseException)]
    if bad:
        for k, exc in bad:
            report.nodes[k].error = _describe(exc)
        report.phase = "diverged"
        nodes = ", ".join(ts.nodes[k].name for k, _ in bad)
        raise RestartError(f"{ts.name}: reconcile could not reach {nodes}; still diverged", report)
    await _restart_phase(ts, report, started)
    await ts.ledger.clear_diverged()
    report.phase = "reconciled"
    return report
