"""Drain a server before it is restarted: stop new work reaching it, wait for what runs to finish.

Why: a restart kills the requests in flight; on a shared server an operator wants them to finish.
`[targets.X.drain]` turns it on for every restart of the target (`bot.target.restart`): first the
`stop_hook` (an HTTP call from the bot host, e.g. removing the worker from SGLang's router or a load
balancer, or a command run on one of the target's nodes as the login: `hook-command` in the node
command table), then
a wait until node 0 runs and queues no request, at most `grace`. Once the server is healthy again,
`resume_hook` lets work back in (`bot.target.rollback.resume_traffic`). The ledger remembers that
flagbot stopped the traffic, so a run killed in between leaves the resume to the next command
that sees the server healthy.

Two signals for "idle", best first: node 0's Prometheus `/metrics` (`sglang:num_running_reqs` +
`sglang:num_queue_reqs`, only with `--enable-metrics`), else the scheduler's batch lines in the
journal (`#running-req: N, #queue-req: M`; no batch line for `quiet` seconds means idle). Polled
with a growing interval bounded by the deadline; never a fixed sleep. A server that is down has
nothing to drain.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import httpx

from bot.config.drain import CommandHook, DrainPolicy, Hook, HttpHook
from bot.http import async_client
from bot.redaction import redact
from bot.target.errors import CommandTimeout, TargetError, UnreachableError

if TYPE_CHECKING:
    from bot.target.session import TargetSession

_METRIC = re.compile(
    r"^sglang:(num_running_reqs|num_queue_reqs)(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.MULTILINE
)
_RUNNING = re.compile(r"#running-req: (\d+)")
_QUEUED = re.compile(r"#queue-req: (\d+)")
_NEW_SEQ = re.compile(r"#new-seq: (\d+)")
Source = Literal["metrics", "journal", "down"]


@dataclass(frozen=True)
class DrainSettings:
    """`limit_s`: longest wait; `quiet_s`: journal window without batch lines that counts as idle."""

    limit_s: float = 120.0
    quiet_s: float = 5.0
    first_poll_s: float = 0.2
    max_poll_s: float = 2.0
    stop_hook: Hook | None = None
    resume_hook: Hook | None = None
    abort_on_timeout: bool = False

    @classmethod
    def of(cls, policy: DrainPolicy) -> DrainSettings:
        """The settings `[targets.X.drain]` asks for."""
        return cls(
            limit_s=policy.grace.total_seconds(),
            quiet_s=policy.quiet.total_seconds(),
            stop_hook=policy.stop_hook,
            resume_hook=policy.resume_hook,
            abort_on_timeout=policy.on_timeout == "abort",
        )


@dataclass(frozen=True)
class DrainReport:
    drained: bool
    waited_s: float
    source: Source
    last_running: int | None
    in_flight_at_start: int | None = None
    """Running + queued requests when the drain began (what it waited for)."""
    last_queued: int | None = None
    stop_hook: str | None = None
    """The stop hook's call and answer, e.g. `POST http://router:30000/remove_worker -> 200` or
    `node 0: /usr/local/bin/lb-drain (+1 argument(s)) -> exit 0`."""

    def describe(self) -> str:
        """One sentence for the thread: how many requests were drained and how long it took."""
        hook = f"{self.stop_hook}; " if self.stop_hook else ""
        started = self.in_flight_at_start or 0
        if self.source == "down":
            return f"{hook}drain: the server was not answering, nothing to drain"
        if self.drained:
            what = f"{started} request(s) in flight finished" if started else "no request was in flight"
            return f"{hook}drain: {what} after {self.waited_s:.1f} s (from {self.source})"
        left = (self.last_running or 0) + (self.last_queued or 0)
        return (
            f"{hook}drain: {left} of {started} request(s) still in flight after the {self.waited_s:.1f} s "
            f"grace (from {self.source})"
        )


class DrainHookError(TargetError):
    """A drain hook that failed (no answer, or not 2xx): before a restart, nothing was changed."""


class DrainTimeoutError(TargetError):
    """`on_timeout = "abort"` and requests still ran at the end of the grace: nothing was changed."""

    def __init__(self, message: str, report: DrainReport) -> None:
        super().__init__(message)
        self.report = report


def load_from_metrics(text: str) -> tuple[int, int] | None:
    """(running, queued), each summed over its series (one per DP rank); None without the running
    gauge (metrics off, or not SGLang's)."""
    sums = {"num_running_reqs": 0.0, "num_queue_reqs": 0.0}
    seen = set()
    for name, value in _METRIC.findall(text):
        sums[name] += float(value)
        seen.add(name)
    if "num_running_reqs" not in seen:
        return None
    return int(sums["num_running_reqs"]), int(sums["num_queue_reqs"])


def load_from_journal(text: str) -> tuple[int, int]:
    """(running, queued) of the newest batch line (a line with `#running-req`; its `#queue-req`
    may come anywhere on it, or be absent: 0); (0, 0) when the window has none (idle). A prefill
    line counts the requests it admits (`#new-seq`) as running: its `#running-req` is the batch
    they join, so a lone request's prefill line says `#running-req: 0`."""
    for line in reversed(text.splitlines()):
        running = _RUNNING.search(line)
        if running is not None:
            queued = _QUEUED.search(line)
            admitted = _NEW_SEQ.search(line)
            return (
                int(running.group(1)) + (int(admitted.group(1)) if admitted else 0),
                int(queued.group(1)) if queued else 0,
            )
    return 0, 0


async def run_hook(ts: TargetSession, hook: Hook, client: httpx.AsyncClient) -> str:
    """Make the hook's call or run its command; its description with the outcome, or DrainHookError."""
    if isinstance(hook, CommandHook):
        return await _run_command_hook(ts, hook)
    return await _call_http_hook(hook, client)


async def _run_command_hook(ts: TargetSession, hook: CommandHook) -> str:
    """Run the hook's command on its node, as the login (never through sudo). The message of a
    failure shows the program and the last line it printed, masked, never its arguments (they
    may carry a token and the message is posted)."""
    shown = hook.shown()
    limit = hook.timeout.total_seconds()
    try:
        result = await ts.nodes[hook.node].run(
            "hook-command", hook_argv=hook.command, timeout=limit, check=False
        )
    except CommandTimeout:
        raise DrainHookError(f"{shown} did not finish within {limit:g} s (terminated)") from None
    except UnreachableError as exc:
        raise DrainHookError(f"{shown} failed: {exc.reason}") from None
    if result.exit_status != 0:
        said = (result.stderr or result.stdout).decode("utf-8", "replace").strip().splitlines()
        last = redact(said[-1])[:200] if said else ""
        raise DrainHookError(f"{shown} exited {result.exit_status}" + (f": {last!r}" if last else ""))
    return f"{shown} -> exit 0"


async def _call_http_hook(hook: HttpHook, client: httpx.AsyncClient) -> str:
    """Make the hook's HTTP call; its description with the status, or DrainHookError."""
    shown = hook.shown()
    headers = {"content-type": hook.content_type} if hook.body is not None else {}
    try:
        response = await client.request(
            hook.method,
            hook.url,
            content=hook.body,
            headers=headers,
            timeout=hook.timeout.total_seconds(),
        )
    except httpx.HTTPError as exc:
        raise DrainHookError(f"{shown} failed: {type(exc).__name__}: {exc}") from None
    if not response.is_success:
        raise DrainHookError(f"{shown} answered {response.status_code}: {response.text[:200]!r}")
    return f"{shown} -> {response.status_code}"


async def _probe(
    ts: TargetSession, client: httpx.AsyncClient, settings: DrainSettings
) -> tuple[Source, int, int]:
    route = await ts.http_route()
    try:
        response = await client.get(f"{route.base_url}/metrics")
        if response.status_code == 200:
            load = load_from_metrics(response.text)
            if load is not None:
                return "metrics", *load
    except httpx.ConnectError:
        return "down", 0, 0
    except httpx.RemoteProtocolError:
        if route.way == "ssh":  # a forward to a closed port: accepted here, closed at once on node 0
            return "down", 0, 0
    except httpx.HTTPError:
        pass
    since = f"-{max(1, round(settings.quiet_s))}s"
    result = await ts.node0.run("journal", output="cat", since=since, lines=200)
    return "journal", *load_from_journal(result.text)


async def drain(ts: TargetSession, settings: DrainSettings) -> DrainReport:
    """Run the stop hook (when set), then poll until node 0 runs and queues no request or
    `settings.limit_s` passes; says which signal it used and how many requests it waited for.
    DrainHookError when the stop hook fails (nothing was stopped or changed)."""
    started = time.monotonic()
    deadline = started + settings.limit_s
    interval = settings.first_poll_s
    async with async_client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
        hook = await run_hook(ts, settings.stop_hook, client) if settings.stop_hook is not None else None
        at_start: int | None = None
        while True:
            source, running, queued = await _probe(ts, client, settings)
            at_start = running + queued if at_start is None else at_start
            waited = round(time.monotonic() - started, 3)
            if running + queued == 0:
                return DrainReport(True, waited, source, running, at_start, queued, hook)
            if time.monotonic() + interval > deadline:
                return DrainReport(False, waited, source, running, at_start, queued, hook)
            await asyncio.sleep(interval)  # a poll interval with backoff, bounded by the deadline
            interval = min(settings.max_poll_s, interval * 1.6)


async def resume(ts: TargetSession, hook: Hook) -> str:
    """Make the resume hook's call or run its command (DrainHookError when it fails)."""
    async with async_client(timeout=httpx.Timeout(5.0, connect=2.0)) as client:
        return await run_hook(ts, hook, client)


async def resume_traffic(ts: TargetSession) -> str | None:
    """Once the server serves again (or was never stopped): let work back in, if flagbot's stop
    hook took it out. None when it had not; else one sentence for the evidence. A failed resume
    hook keeps the mark, so the next healthy start tries again, and says so."""
    if await ts.ledger.traffic_stopped_at() is None:
        return None
    hook = ts.target.drain.resume_hook if ts.target.drain is not None else None
    if hook is None:
        await ts.ledger.clear_traffic_stopped()
        return "resume: no resume_hook is configured; the server stays as the stop hook left it"
    try:
        shown = await resume(ts, hook)
    except DrainHookError as exc:
        return f"resume hook failed ({exc}); the server is still out of service, retried at the next healthy start"
    await ts.ledger.clear_traffic_stopped()
    return f"resume: {shown}"
