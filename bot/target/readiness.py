"""Is the restarted server ready, still coming up, or dead? Decided from evidence, never a sleep.

Three watchers run at once and feed one decision loop:

* `/health` on node 0 with a short backoff (50 ms growing to 250 ms): connection refused means
  SGLang is still loading (nothing listens until the weights, KV pool and CUDA graphs exist),
  503 means uvicorn is up and warming, 200 means ready (python/sglang/srt/entrypoints/http_server.py). Only node 0's
  `/health` is real; nodes of rank >= 1 serve a dummy that always answers 200.
* node 0's journal, followed from the new invocation's start (`journalctl -u ... -f -o json
  --all`): the ready line, the startup stage, and a fatal line (the foundation parser's
  `fatal`) the moment it is written. The journal lags ~0.3 s behind the process, and `/health`
  can turn 200 before the ready line arrives, so both signals are used and both recorded.
* `systemctl show` on every node: a new InvocationID, `failed` (with `Result=start-limit-hit`
  when systemd's start limit tripped), `auto-restart` or a rising `NRestarts` (a crash loop).
  How the main process ended (`code=exited` or `code=killed`, `bot.target.main_exit`) and the
  unit's `Restart=` decide which of these a dead server shows: SGLang's failed start SIGKILLs
  itself, so `Restart=on-failure` and `Restart=on-abnormal` both loop on it, while an exit
  status loops only under `on-failure` and leaves an `on-abnormal` unit `failed`. Every one is
  a failed start, noticed at the first poll that shows it (`unit_failure`).

The outcome is `ready`, `failed` (with the reason, the node and the fatal line) or `timeout`
(`TargetTimeouts.ready`), with the moments of each phase: loading (refused), warming (503),
ready. A server that answers 503 for longer than `TargetTimeouts.warmup` has a hung warmup
request (SGLang sends one `/generate` after uvicorn starts and stays 503 until it returns):
that is a failure of its own, `warmup-hang`, reported then rather than at the end of the much
longer load bound. With `stall_bounds`, every node's journal is followed and a start that makes
no progress inside one stage (distributed init, weight load, graph capture, warmup) for longer
than that stage's bound is a `stall`, naming the stage and the node behind (`bot.target.stalls`):
a rank whose peer never arrives waits in silence, and so would this wait until `timeout`.
Nothing here changes the target; rollback decides what to do with a failure.

A connection dropped while the host stays up (sshd restarted, a NAT idle cut) is not an
unreachable node: `systemctl show` is re-run by the session on a fresh connection, the follower
resumes from its last entry (`bot.target.journal_follow`), and `Readiness.reconnects` says so.
Only a node that cannot be reconnected to is `unreachable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

import httpx

from bot.aio import stop_tasks
from bot.http import async_client
from bot.sglang import log_events as ev
from bot.sglang.logline import parse_line
from bot.target.errors import ConnectionLostError, UnreachableError
from bot.target.grep import start_limit_hit
from bot.target.journal_follow import RESUMES_IN_A_ROW, Resume, follow_journal
from bot.target.journal_read import JournalEntry
from bot.target.main_exit import explain
from bot.target.nodestate import (
    Backoff,
    NodeLike,
    NodeState,
    journal_since,
    node_state,
    probe_health,
)
from bot.target.readiness_result import Failure, FailureReason, Phase, Readiness
from bot.target.ssh_reconnect import Reconnect
from bot.target.stalls import StallBounds, StallWatch

Progress = Callable[[str, str], Awaitable[None] | None]
"""Called with (phase, detail) at each change, e.g. to update a Slack status card."""
Event = (
    tuple[Literal["health"], int | None, float]
    | tuple[Literal["unit"], tuple[NodeLike, NodeState], float]
    | tuple[Literal["line"], tuple[NodeLike, JournalEntry], float]
    | tuple[Literal["unreachable"], tuple[NodeLike, Exception], float]
)
"""What a watcher tells the decision loop: (kind, what it saw, when in Unix seconds)."""


async def wait_ready(
    nodes: Sequence[NodeLike],
    *,
    base_url: str,
    timeout: float,
    previous: Mapping[str, str | None] | None = None,
    crash_restarts: int = 1,
    confirm_s: float = 1.0,
    warmup_timeout: float | None = None,
    stall_bounds: StallBounds | None = None,
    client: httpx.AsyncClient | None = None,
    on_progress: Progress | None = None,
) -> Readiness:
    """Wait until node 0's server is ready, a node fails, or `timeout` seconds pass.

    `previous` maps node name to the InvocationID before the restart: lines and states of that
    invocation are ignored and the new one must appear. `crash_restarts` is how many automatic
    restarts (`NRestarts` rising) count as a crash loop. After the first ready signal the other
    one (`/health` 200 or the ready line) is awaited up to `confirm_s` so both are recorded.
    `warmup_timeout`: how long `/health` may answer 503 (warming) before the start counts as
    hung in its warmup (None: only `timeout` bounds it). `stall_bounds`: how long each startup
    stage may go without progress on the node behind (None: no stall is looked for, and only
    node 0's journal is followed).
    """
    own = client is None
    http = client or async_client(timeout=2.0)
    waiter = _Waiter(
        nodes,
        base_url.rstrip("/") + "/health",
        http,
        previous or {},
        crash_restarts,
        on_progress,
        warmup_timeout,
        stall_bounds,
    )
    try:
        return await waiter.run(timeout, confirm_s)
    finally:
        if own:
            await http.aclose()


class _Waiter:
    def __init__(
        self,
        nodes: Sequence[NodeLike],
        url: str,
        client: httpx.AsyncClient,
        previous: Mapping[str, str | None],
        crash_restarts: int,
        on_progress: Progress | None,
        warmup_timeout: float | None = None,
        stall_bounds: StallBounds | None = None,
    ) -> None:
        self.nodes, self.url, self.client = nodes, url, client
        self.previous = dict(previous)
        self.crash_restarts = crash_restarts
        self.on_progress = on_progress
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self.result = Readiness("timeout", "starting", None, {node.name: None for node in nodes}, time.time())
        self.result.previous = dict(previous)
        self.baseline: dict[str, int] = {}
        self.states: dict[str, NodeState] = {}
        self.follower: asyncio.Task[None] | None = None
        self.accepted: set[str] = set()
        """Node 0's invocations seen new by `systemctl show`: only their lines count (an older
        crash-loop start that died just before ours must not look like our failure)."""
        self.health_seen = False
        self.health_code: int | None = None
        self.health_at = 0.0
        self.warmup_timeout = warmup_timeout
        self.stalls = (
            None
            if stall_bounds is None
            else StallWatch(stall_bounds, [(n.name, n.index) for n in nodes], time.time())
        )
        self.followed: dict[str, asyncio.Task[None]] = {}
        """The journal followers of nodes of rank >= 1 (node 0's is `follower`)."""

    # -- watchers --------------------------------------------------------------------------

    async def _health(self) -> None:
        backoff = Backoff()
        while True:
            code = await probe_health(self.client, self.url)
            if not self.health_seen or code != self.health_code:
                self.health_seen, self.health_code, self.health_at = True, code, time.time()
                backoff.reset()
                await self.events.put(("health", code, time.time()))
            await backoff.sleep()

    async def _units(self, node: NodeLike) -> None:
        backoff = Backoff(0.05, 1.5, 0.5)
        last: NodeState | None = None
        losses = 0
        while True:
            try:
                state = await node_state(node, timeout=10.0)
            except ConnectionLostError as exc:  # lost again on the session's fresh connection
                losses += 1
                if losses > RESUMES_IN_A_ROW:
                    await self.events.put(("unreachable", (node, exc), time.time()))
                    return
                await backoff.sleep()  # the next poll opens another connection
                continue
            except Exception as exc:  # unreachable, timed out: the decision loop reports it
                await self.events.put(("unreachable", (node, exc), time.time()))
                return
            losses = 0
            if state != last:
                last = state
                backoff.reset()
                await self.events.put(("unit", (node, state), time.time()))
            await backoff.sleep()

    async def _follow(self, node: NodeLike, since: str | None) -> None:
        """Node 0's journal, resumed after a lost connection; a node it cannot reconnect to is
        reported (the follower is the only source of a fatal line: it must not die silently)."""
        params: dict[str, object] = {"output": "json", "all": True}
        params.update({"since": since} if since else {"lines": 1000})

        def resumed(resume: Resume) -> None:
            self.result.reconnects.append(resume.describe())

        try:
            async for entry in follow_journal(node, params, on_resume=resumed):
                if entry.invocation is not None:
                    await self.events.put(("line", (node, entry), time.time()))
        except UnreachableError as exc:
            await self.events.put(("unreachable", (node, exc), time.time()))

    # -- the decision loop -----------------------------------------------------------------

    async def run(self, timeout: float, confirm_s: float) -> Readiness:
        marks = [len(_reconnects(node)) for node in self.nodes]
        try:
            return await self._run(timeout, confirm_s)
        finally:
            for node, mark in zip(self.nodes, marks, strict=True):
                self.result.reconnects.extend(r.describe() for r in _reconnects(node)[mark:])

    async def _run(self, timeout: float, confirm_s: float) -> Readiness:
        tasks = [asyncio.create_task(self._units(node)) for node in self.nodes]
        tasks.append(asyncio.create_task(self._health()))
        try:
            async with asyncio.timeout(timeout):
                while self.result.outcome != "ready" and self.result.failure is None:
                    event = await self._next_event()
                    if event is None:
                        self._deadline_passed()
                    else:
                        await self._handle(event)
                if self.result.outcome == "ready":
                    await self._confirm(confirm_s)
        except TimeoutError:
            if self.result.outcome != "ready" and self.result.failure is None:
                self._fail("timeout", self.nodes[0].name, f"not ready within {timeout:g} s")
        finally:
            if self.follower is not None:
                tasks.append(self.follower)
            tasks.extend(self.followed.values())
            await stop_tasks(tasks)  # re-cancels a watcher whose cancel a finishing wait_for swallowed
        return self.result

    async def _next_event(self) -> Event | None:
        """The next watcher event, or None when the warming phase outlived `warmup_timeout` or
        the node behind outlived its stage's stall bound."""
        deadlines = []
        warming = self.result.phases.get("warming")
        if warming is not None and self.warmup_timeout is not None:
            deadlines.append(warming + self.warmup_timeout)
        stall_at = self.stalls.deadline() if self.stalls is not None and self._known() else None
        if stall_at is not None:
            deadlines.append(stall_at)
        if not deadlines:
            return await self.events.get()
        try:
            async with asyncio.timeout(max(0.0, min(deadlines) - time.time())):
                return await self.events.get()
        except TimeoutError:
            return None

    def _deadline_passed(self) -> None:
        warming = self.result.phases.get("warming")
        now = time.time()
        if warming is not None and self.warmup_timeout is not None and now >= warming + self.warmup_timeout:
            self._warmup_hung()
            return
        stall = self.stalls.stalled(now) if self.stalls is not None else None
        if stall is None:
            return  # something moved just before the deadline: the next wait has a later one
        self._fail("stall", stall.node, stall.describe())
        if self.result.failure is not None:
            self.result.failure.stage = stall.stage
            self.result.failure.invocation = self.result.invocations.get(stall.node)

    def _warmup_hung(self) -> None:
        name = self.nodes[0].name
        last = next((e.message for e in reversed(self.result.lines) if not e.systemd), None)
        self._fail(
            "warmup-hang",
            name,
            f"{name}: /health answered 503 (warming up) for {self.warmup_timeout:g} s without turning "
            "ready: the warmup request hung (timeouts.warmup)"
            + (f"; the last line the server wrote: {last.strip()}" if last else ""),
        )
        if self.result.failure is not None:
            self.result.failure.invocation = self.result.invocation
            self.result.failure.stage = "warmup"

    async def _confirm(self, confirm_s: float) -> None:
        """Give the second ready signal a moment to arrive, so both moments are on record."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(confirm_s):
                while self.result.health_ready_at is None or self.result.ready_line_at is None:
                    await self._handle(await self.events.get())

    async def _progress(self, phase: str, detail: str) -> None:
        if self.on_progress is not None:
            outcome = self.on_progress(phase, detail)
            if outcome is not None:
                await outcome

    async def _phase(self, phase: Phase, at: float, detail: str) -> None:
        if phase in self.result.phases or self.result.phase in ("ready", "failed"):
            return
        self.result.phases[phase] = at
        self.result.phase = phase
        await self._progress(phase, detail)

    def _known(self) -> bool:
        """Node 0 runs a new invocation, so a 200 or a ready line is about the new server."""
        return self.result.invocation is not None

    async def _handle(self, event: Event) -> None:
        match event:
            case ("health", code, at):
                await self._on_health(code, at)
            case ("unit", (node, state), at):
                await self._on_unit(node, state, at)
            case ("line", (node, entry), at):
                if node.index == 0:
                    await self._on_line(entry, at)
                elif self.stalls is not None and entry.invocation in self.accepted and not entry.systemd:
                    self.stalls.line(node.name, parse_line(entry.message).message, at)
            case ("unreachable", (node, exc), at):
                self._fail("unreachable", node.name, f"{node.name}: {exc}")

    async def _on_health(self, code: int | None, at: float) -> None:
        if not self._known():
            return
        if self.stalls is not None:
            self.stalls.health(code, at)
        if code is None:
            await self._phase("loading", at, "port not open yet (loading)")
        elif code == 503:
            await self._phase("loading", at, "")
            await self._phase("warming", at, "/health 503 (warming up)")
        elif code == 200:
            self.result.health_ready_at = self.result.health_ready_at or at
            self._ready(at, "/health 200")

    def _ready(self, at: float, detail: str) -> None:
        if self.result.outcome == "ready":
            return
        self.result.outcome = "ready"
        self.result.noticed_at = at
        self.result.phases.setdefault("ready", at)
        self.result.phase = "ready"

    async def _on_unit(self, node: NodeLike, state: NodeState, at: float) -> None:
        name = node.name
        old = self.previous.get(name)
        if state.invocation is None or (old is not None and state.invocation == old):
            self.states[name] = state
            if old is not None and state.active == "failed":  # never started again
                self._fail("unit-failed", name, f"{name}: unit failed before a new start ({state.result})")
            return
        self.baseline.setdefault(name, state.n_restarts)
        self.states[name] = state
        if self.result.invocations.get(name) is None:
            self.result.invocations[name] = state.invocation
        if self.stalls is not None and state.invocation not in self.accepted:
            self.accepted.add(state.invocation)
            self.stalls.started(name, at)
            if node.index != 0 and name not in self.followed:
                self.followed[name] = asyncio.create_task(self._follow(node, journal_since(state.started)))
        if node.index == 0:
            self.accepted.add(state.invocation)
        if node.index == 0 and self.result.invocation is None:
            self.result.invocation = state.invocation
            await self._phase("loading", at, f"new invocation {state.invocation}")
            self.follower = asyncio.create_task(self._follow(node, journal_since(state.started)))
            if self.health_seen:  # seen before the invocation was known: count it now
                await self._on_health(self.health_code, self.health_at)
        rose = state.n_restarts - self.baseline[name]
        found = unit_failure(state, rose, self.crash_restarts, ready=self.result.outcome == "ready")
        if found is None:
            return
        reason, detail = found
        if reason == "unit-failed" and await start_limit_hit(node, state):
            reason = "start-limit"
        self._fail(reason, name, f"{name}: {detail}", state)

    async def _on_line(self, entry: JournalEntry, at: float) -> None:
        if entry.invocation not in self.accepted:
            return
        self.result.lines.append(entry)
        if entry.systemd:
            return
        line = parse_line(entry.message)
        message = line.message
        if self.stalls is not None:
            self.stalls.line(self.nodes[0].name, message, at)
        if ev.READY_TEXT in message:
            self.result.ready_line_at = self.result.ready_line_at or entry.realtime
            self.result.ready_line_seen_at = self.result.ready_line_seen_at or at
            self._ready(at, "ready line")
            return
        stage = _stage(message)
        if stage is not None and stage != self.result.stage:
            self.result.stage = stage
            await self._progress(self.result.phase, f"journal: {stage}")
        if self.result.outcome != "ready" and ev.fatal(line) == "fatal":
            name = self.nodes[0].name
            self._fail("fatal-line", name, f"{name}: fatal line in the journal", fatal_line=message.strip())
            if self.result.failure is not None:
                self.result.failure.invocation = entry.invocation

    def _fail(
        self,
        reason: FailureReason,
        node: str,
        message: str,
        state: NodeState | None = None,
        fatal_line: str | None = None,
    ) -> None:
        if self.result.failure is not None or self.result.outcome == "ready":
            return
        self.result.outcome = "timeout" if reason == "timeout" else "failed"
        self.result.phase = "failed"
        now = time.time()
        self.result.phases.setdefault("failed", now)
        self.result.noticed_at = now
        self.result.failure = Failure(
            reason,
            node,
            message,
            fatal_line,
            invocation=state.invocation if state else None,
            exit_status=state.exit_status if state else None,
            n_restarts=state.n_restarts if state else None,
            main_exit=state.main_exit.describe() if state and state.main_exit else None,
            restart=state.restart or None if state else None,
        )


def unit_failure(
    state: NodeState, restarts_rose: int, crash_restarts: int, *, ready: bool
) -> tuple[FailureReason, str] | None:
    """Is this `systemctl show` of the new start a failed start, and which kind? None if not.

    `failed`: nothing will restart it (an exit status under `Restart=on-abnormal`, any end under
    `Restart=no`, or the start limit). `auto-restart` (and systemd 254's `auto-restart-queued`)
    or a rising `NRestarts`: a restart loop, reported now rather than waited out. `deactivating`
    after an unclean end is systemd clearing the cgroup before that loop or that `failed`;
    `inactive` / `deactivating` otherwise: stopped (a clean signal such as SIGTERM) before ready.
    """
    detail = f"ActiveState={state.active} SubState={state.sub} Result={state.result}; " + explain(
        state.main_exit, state.restart
    )
    ended = state.main_exit
    if state.active == "failed":
        return ("start-limit" if state.result == "start-limit-hit" else "unit-failed"), detail
    if state.sub.startswith("auto-restart") or restarts_rose >= crash_restarts:
        return "crash-loop", f"{detail}, NRestarts +{restarts_rose}"
    if state.active == "deactivating" and ended is not None and not ended.clean:
        return ("crash-loop" if ended.restarted_by(state.restart or "no") else "unit-failed"), detail
    if state.active in ("inactive", "deactivating") and not ready:
        return "stopped", detail
    return None


def _reconnects(node: NodeLike) -> list[Reconnect]:
    """The session's reconnect records (`NodeSession.reconnects`); a stand-in node has none."""
    found = getattr(node, "reconnects", None)
    return found if isinstance(found, list) else []


def _stage(message: str) -> str | None:
    """The startup step a line shows, with the foundation's extractors."""
    if "server_args=" in message:
        return "server_args"
    if ev.distributed_init(message) is not None:
        return "distributed_init"
    if ev.weights(message) is not None:
        return "weights"
    if ev.kv_cache(message) is not None:
        return "kv_cache"
    if ev.cuda_graph(message) is not None:
        return "cuda_graph"
    if "max_total_num_tokens=" in message and ev.capacity(message):
        return "capacity"
    return None
