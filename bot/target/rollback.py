"""Back to the known-good configuration: after a failed start (automatically) or on demand.

A failed start is the dangerous moment of the loop: the operator in the seeds restarted with a
new flag and, had it been refused, would have found the server down the next morning. Here a
start that fails (crash loop, start limit, fatal line) or is not ready within the target's
`timeouts.ready` is rolled back at once, when the target's policy says so (`on_failed_start =
"rollback"`, the default): every node gets the flags of the last healthy snapshot (the vendor
line when that is what they were, or when no start was ever seen healthy), all ranks restart
together (`apply_and_restart` clears a tripped start limit with `reset-failed`), readiness is
awaited and the new start observed, which makes it known-good again.

The evidence says what happened, on which node, with the fatal line and the journal excerpt of
the failed invocation (with its command), systemd's own lines about the crash loop, and how
the rollback went.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from bot.sglang.flagset import FlagItem, FlagSet
from bot.sglang.log import parse_log_lines
from bot.sglang.log_report import chain_of, chain_text
from bot.store.models import Snapshot
from bot.target.drain import resume_traffic
from bot.target.evidence import Evidence, JournalExcerpt, TextBlock, clip
from bot.target.grep import grep, invocations, since_from_duration
from bot.target.known_good import known_good
from bot.target.lines import split_lines
from bot.target.nodestate import NodeLike
from bot.target.observe import Observation, observe
from bot.target.readiness import Progress, wait_ready
from bot.target.readiness_result import Failure, Readiness
from bot.target.restart import RestartReport, apply_and_restart, flags_for_nodes, restore_vendor_and_restart
from bot.target.session import TargetSession
from bot.target.stalls import StallBounds
from bot.target.unit import read_unit

Trigger = Literal["on-demand", "failed-start", "not-ready"]
SYSTEMD_PATTERN = (
    r"Main process exited|Failed with result|Scheduled restart job|repeated too quickly|Start request"
)
EXCERPT_LINES = 40
RESTART_MARGIN_S = 60.0
"""How long before the readiness wait a restart can have been issued (the apply's own steps)."""


@dataclass
class RollbackResult:
    target: str
    trigger: Trigger
    ok: bool = False
    to: str = ""
    snapshot_id: int | None = None
    fatal_line: str | None = None
    failed: dict[str, Any] | None = None
    restart: RestartReport | None = None
    readiness: Readiness | None = None
    observation: Observation | None = None
    error: str | None = None
    duration_s: float = 0.0
    evidence: list[Evidence] = field(default_factory=list)
    traffic: str | None = None
    """The drain's resume hook, called once the rolled-back server was healthy."""

    def to_json(self) -> dict[str, Any]:
        restart = self.restart
        return {
            "target": self.target,
            "trigger": self.trigger,
            "ok": self.ok,
            "to": self.to,
            "snapshot_id": self.snapshot_id,
            "fatal_line": self.fatal_line,
            "failed": self.failed,
            "restart": None
            if restart is None
            else {"phase": restart.phase, "nodes": [node.__dict__ for node in restart.nodes]},
            "readiness": self.readiness.to_json() if self.readiness else None,
            "observation": None
            if self.observation is None
            else {
                "snapshot_id": self.observation.snapshot_id,
                "healthy": self.observation.healthy,
                "effective": self.observation.effective,
            },
            "error": self.error,
            "duration_s": self.duration_s,
            "evidence": [block.to_json() for block in self.evidence],
            "drain": None if restart is None or restart.drain is None else restart.drain.describe(),
            "traffic": self.traffic,
        }


async def failure_evidence(
    ts: TargetSession, readiness: Readiness
) -> tuple[list[Evidence], str | None, dict[str, Any]]:
    """(blocks, fatal line, summary) of a failed or timed-out start, read from the failed node."""
    failure = readiness.failure
    node: NodeLike = next((n for n in ts.nodes if failure and n.name == failure.node), ts.node0)
    summary = failure.to_json() if failure else {"reason": "unknown"}
    blocks: list[Evidence] = []
    fatal = failure.fatal_line if failure else None
    chain: list[dict[str, Any]] = []
    candidates = [failure.invocation] if failure and failure.invocation else []
    candidates += [inv for inv in await _starts_of_this_attempt(node, readiness) if inv not in candidates]
    for invocation in candidates[:4]:
        result = await node.run(
            "journal-invocation",
            invocation=invocation,
            output="short-iso",
            all=True,
            lines=EXCERPT_LINES,
            check=False,
        )
        text = result.stdout.decode("utf-8", "replace")
        lines = [line for line in split_lines(text) if not line.startswith("-- ")]
        if not lines:
            continue
        # readiness stops at the first fatal line; of a chained traceback that is the first
        # exception, and the one that killed the start is the chain's last (read here, whole)
        chain = chain_of(parse_log_lines(lines), fatal)
        found = str(chain[-1]["text"]) if chain else fatal
        highlight = next((clip(line) for line in lines if found and found in line), None)
        blocks.append(
            JournalExcerpt(
                f"journal of the failed start (invocation {invocation}) on {node.name}",
                node.name,
                result.argv_shell,
                tuple(clip(line) for line in lines),
                highlight=highlight,
            )
        )
        if found:
            fatal = found
            break
    seconds = time.time() - readiness.started_at + 5
    systemd = await grep(
        node, SYSTEMD_PATTERN, regex=True, scope="since", since=since_from_duration(seconds), lines=20
    )
    if systemd.count:
        blocks.append(systemd.to_evidence())
    reason = summary.get("reason")
    what = (
        f"the start failed on {node.name}: {reason}"
        if reason not in ("timeout", "warmup-hang", "stall")
        else str(summary.get("message"))
    )
    if failure is not None and failure.n_restarts is not None:
        ended = _how_it_ended(failure)
        what += f" (NRestarts {failure.n_restarts}, {ended})"
    whole = chain_text(chain)
    if whole:  # readiness recorded the chain's first exception; the start died of its last
        summary = {**summary, "fatal_line": fatal, "first_fatal_line": summary.get("fatal_line")}
    blocks.insert(
        0,
        TextBlock(
            what + (f"\nfatal line: {fatal}" if fatal else "") + (f"\n\n{whole}" if whole else ""),
            "What happened",
        ),
    )
    return blocks, fatal, summary


def _how_it_ended(failure: Failure) -> str:
    """systemd's own words (`main process code=killed, status=9/KILL, Restart=on-failure`) when
    known: a bare "exit status 9" would hide that SGLang's failed start is a death by SIGKILL."""
    if failure.main_exit is None:
        return f"last exit status {failure.exit_status}"
    return f"main process {failure.main_exit}" + (f", Restart={failure.restart}" if failure.restart else "")


async def _starts_of_this_attempt(node: NodeLike, readiness: Readiness) -> list[str]:
    """The node's starts since the restart that failed, newest first (a crash loop has several).

    Never an earlier start: a fatal line of a previous change's failed start (still in the
    journal) must not be blamed on this one, e.g. when this start hung without any fatal line.
    Cut at the invocation that ran before the restart; without one, at the wait's start less
    `RESTART_MARGIN_S` (the restart is issued just before the wait)."""
    recent = await invocations(node, count=8, since=readiness.started_at - RESTART_MARGIN_S)
    before = readiness.previous.get(node.name)
    if before is not None and before in recent:
        recent = recent[: recent.index(before)]
    return recent[:4]


def flagset_of(snapshot: Snapshot) -> FlagSet:
    """The launch flags a snapshot recorded (node 0's, `--node-rank 0` included)."""
    items = []
    for item in snapshot.requested_flags:
        value = item.get("value")
        items.append(FlagItem(str(item["flag"]), tuple(value) if isinstance(value, list) else value))
    return FlagSet(tuple(items))


async def rollback(
    ts: TargetSession,
    *,
    trigger: Trigger = "on-demand",
    readiness: Readiness | None = None,
    cache_dir: Path | None = None,
    client: httpx.AsyncClient | None = None,
    timeout: float | None = None,
    force: bool = False,
    on_progress: Progress | None = None,
) -> RollbackResult:
    """Restart every node with the known-good flags and wait until it serves again.

    `readiness` is the failed start that triggered it (its evidence is collected first).
    Errors of the restart itself are returned in `error`, with the evidence gathered so far.
    """
    started = time.monotonic()
    result = RollbackResult(ts.name, trigger)
    if readiness is not None and not readiness.ready:
        blocks, result.fatal_line, result.failed = await failure_evidence(ts, readiness)
        result.evidence.extend(blocks)
    snapshot = await ts.store.run(known_good, ts.store.store, ts.name) if ts.store is not None else None
    try:
        view = await read_unit(ts.node0)
        if snapshot is None:
            result.to = "the vendor ExecStart (no start of this target was seen healthy yet)"
            result.restart = await restore_vendor_and_restart(ts, force=force)
        else:
            result.snapshot_id = snapshot.id
            flags = flagset_of(snapshot)
            vendor = view.vendor
            env = None if dict(snapshot.environment) == dict(view.env) else dict(snapshot.environment)
            if (
                vendor is not None
                and vendor.flags.argv() == flags.argv()
                and dict(vendor.env) == dict(snapshot.environment)
            ):
                result.to = f"the vendor ExecStart, the flags of known-good snapshot #{snapshot.id}"
                result.restart = await restore_vendor_and_restart(ts, force=force)
            else:
                result.to = f"the flags of known-good snapshot #{snapshot.id}"
                per_node = flags_for_nodes(flags, len(ts.nodes))
                result.restart = await apply_and_restart(
                    ts, per_node, env, force=force, reason=f"rollback ({trigger})"
                )
        previous = {n.node: n.old_invocation for n in result.restart.nodes}
        limit = timeout if timeout is not None else ts.target.timeouts.ready.total_seconds()
        result.readiness = await wait_ready(
            ts.nodes,
            base_url=await ts.http_base(),
            timeout=limit,
            previous=previous,
            warmup_timeout=ts.target.timeouts.warmup.total_seconds(),
            stall_bounds=StallBounds.from_timeouts(ts.target.timeouts),
            client=client,
            on_progress=on_progress,
        )
        if result.readiness.ready:
            result.observation = await observe(
                ts, readiness=result.readiness, cache_dir=cache_dir, client=client
            )
            result.ok = result.observation.healthy
            if result.ok:
                result.traffic = await resume_traffic(ts)
    except Exception as exc:  # the rollback itself failed: say so, with what we have
        result.error = f"{type(exc).__name__}: {exc}"
    result.duration_s = round(time.monotonic() - started, 3)
    result.evidence.append(TextBlock(_outcome(result), "Rollback"))
    return result


def drain_notes(report: RestartReport | None) -> str:
    """What the drain before a restart did, as lines for its evidence ("" without a drain)."""
    if report is None or report.drain is None:
        return ""
    resumed = f"\n{report.resumed}" if report.resumed else ""
    return f"\n{report.drain.describe()}{resumed}"


def _outcome(result: RollbackResult) -> str:
    if result.error:
        return f"rollback to {result.to or 'known-good'} failed: {result.error}"
    timings = result.readiness.timings if result.readiness else {}
    drained = drain_notes(result.restart)
    if result.ok:
        obs = result.observation
        capacity = obs.effective.get("max_running_requests") if obs else None
        traffic = f"\n{result.traffic}" if result.traffic else ""
        return (
            f"rolled back to {result.to}; the server is healthy again after {timings.get('total_s', '?')} s "
            f"(max_running_requests {capacity}, snapshot #{obs.snapshot_id if obs else '?'}){drained}{traffic}"
        )
    reason = result.readiness.failure.message if result.readiness and result.readiness.failure else "unknown"
    return f"rolled back to {result.to}, but the server did not become healthy: {reason}{drained}"


@dataclass
class StartOutcome:
    """A start awaited: ready and observed, or failed and (per policy) rolled back."""

    readiness: Readiness
    observation: Observation | None = None
    rollback: RollbackResult | None = None
    traffic: str | None = None
    """The drain's resume hook, called once the start was healthy (`bot.target.drain`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "readiness": self.readiness.to_json(),
            "observation": self.observation.to_json() if self.observation else None,
            "rollback": self.rollback.to_json() if self.rollback else None,
            "traffic": self.traffic,
        }


async def ensure_ready(
    ts: TargetSession,
    *,
    previous: dict[str, str | None],
    timeout: float | None = None,
    cache_dir: Path | None = None,
    client: httpx.AsyncClient | None = None,
    on_progress: Progress | None = None,
    promote: bool = True,
) -> StartOutcome:
    """After a restart: wait until ready and observe; on failure roll back (`on_failed_start`).

    `promote=False`: a healthy start is stored but not made known-good (its verdict is pending).
    The wait does not stay for the second ready signal: the journal's ready line reaches a
    follower (`journalctl -f`) only when journald announces its changes, which it holds back up to
    0.25 s to batch them, while a plain read, as `observe` does next, sees it as soon as journald
    has it. `observe` records the line's moments in the readiness.
    """
    limit = timeout if timeout is not None else ts.target.timeouts.ready.total_seconds()
    readiness = await wait_ready(
        ts.nodes,
        base_url=await ts.http_base(),
        timeout=limit,
        previous=previous,
        confirm_s=0.0,  # observe reads the journal at once and records the ready line from it
        warmup_timeout=ts.target.timeouts.warmup.total_seconds(),
        stall_bounds=StallBounds.from_timeouts(ts.target.timeouts),
        client=client,
        on_progress=on_progress,
    )
    if readiness.ready:
        observation = await observe(
            ts, readiness=readiness, cache_dir=cache_dir, client=client, promote=promote
        )
        traffic = await resume_traffic(ts) if observation.healthy else None
        return StartOutcome(readiness, observation, traffic=traffic)
    outcome = StartOutcome(readiness)
    if ts.target.policy.on_failed_start == "rollback":
        trigger: Trigger = "not-ready" if readiness.outcome == "timeout" else "failed-start"
        outcome.rollback = await rollback(
            ts,
            trigger=trigger,
            readiness=readiness,
            cache_dir=cache_dir,
            client=client,
            on_progress=on_progress,
        )
    return outcome
