"""Search a target's journal on the host, over a chosen scope, with a command a human can re-run.

The seeds' operator ran `journalctl -u sglang-qwen | grep ...` and scrolled. flagbot never
pulls a whole journal: journalctl filters on the host (`--grep`, PCRE2, journalctl's smart
case: a pattern without capitals matches any case) and the scope is a journal match or a time,
so only matching lines cross the wire. Scopes:

* `this` — the unit's current invocation (`INVOCATION_ID=<id> + _SYSTEMD_INVOCATION_ID=<id>`:
  the service's own lines and systemd's about it, e.g. `Main process exited, status=2`);
* `previous` — the invocation before it (from systemd's `Started` messages, newest first);
* `since` — every line of the unit since a journalctl time (`-2h`, `2026-11-29 17:00`);
* `last` — the unit's last N matching lines, whatever the invocation (`-n N`).

Output is bounded: at most `lines` matches are kept (the newest), each clipped, and reading
stops after `max_bytes`; the count says how many matched, and whether it is complete. The
exact command is returned with the result.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.target.errors import TargetError
from bot.target.evidence import JournalExcerpt, clip
from bot.target.journal_read import iter_lines
from bot.target.lines import split_lines
from bot.target.nodestate import NodeLike, NodeState, node_state
from bot.target.privileged import render_params

Scope = Literal["this", "previous", "since", "last"]
SCOPES: tuple[Scope, ...] = ("this", "previous", "since", "last")
DEFAULT_LINES = 50
MAX_LINES = 1000
MAX_BYTES = 4 << 20
_META = frozenset("\\^$.|?*+()[]{}")
_TIME_PREFIX = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d{4}) ")


class GrepError(TargetError):
    """The scope cannot be resolved (no current or previous invocation), named in words."""


@dataclass
class GrepResult:
    """Matches of one pattern on one node, bounded, with the command that produced them."""

    node: str
    pattern: str
    regex: str
    scope: Scope
    command: str
    invocation: str | None = None
    since: str | None = None
    lines: list[str] = field(default_factory=list)
    count: int = 0
    complete: bool = True
    exit_status: int | None = None
    title: str | None = None
    """What the lines are, when they are not matches of a pattern (`logs`: the latest lines)."""

    @property
    def shown(self) -> int:
        return len(self.lines)

    def describe(self) -> str:
        if self.title is not None:
            return self.title
        if self.scope == "last":
            older = "" if self.complete else "; older matches not counted"
            return f"the unit's last {self.shown} line(s) matching {self.pattern!r} on {self.node}{older}"
        where = {
            "this": f"invocation {self.invocation}",
            "previous": f"the previous invocation {self.invocation}",
            "since": f"the unit's journal since {self.since}",
        }[self.scope]
        count = f"{self.count}{'' if self.complete else '+'}"
        return f"{count} line(s) match {self.pattern!r} in {where} on {self.node}; showing {self.shown}"

    def to_evidence(self) -> JournalExcerpt:
        return JournalExcerpt(
            title=self.describe(),
            node=self.node,
            command=self.command,
            lines=tuple(self.lines),
            match_count=self.count,
            complete=self.complete,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pattern": self.pattern,
            "regex": self.regex,
            "scope": self.scope,
            "invocation": self.invocation,
            "since": self.since,
            "command": self.command,
            "count": self.count,
            "complete": self.complete,
            "shown": self.shown,
            "lines": list(self.lines),
        }


def fixed_pattern(text: str) -> str:
    """A PCRE2 pattern matching `text` literally: its regular-expression metacharacters escaped.

    Letters are left alone, so journalctl's smart case still applies (no capital: any case).
    """
    return "".join(f"\\{ch}" if ch in _META else ch for ch in text)


def since_from_duration(seconds: float) -> str:
    """journalctl's relative time for "this long ago" (`-7200s`), evaluated on the host's clock."""
    return f"-{max(1, round(seconds))}s"


async def invocations(node: NodeLike, *, count: int = 20, since: float | None = None) -> list[str]:
    """The unit's most recent InvocationIDs, newest first, from systemd's `Started` messages;
    with `since` (Unix seconds), only starts at or after it."""
    result = await node.run("journal-starts", lines=count, check=False, timeout=30)
    found: list[str] = []
    for line in split_lines(result.stdout.decode("utf-8", "replace")):
        try:
            entry = json.loads(line)
            value = entry.get("INVOCATION_ID")
            stamp = entry.get("__REALTIME_TIMESTAMP")  # journalctl's json always has it
            started = int(stamp) / 1e6 if stamp is not None else None
        except (ValueError, AttributeError, TypeError):
            continue
        if since is not None and started is not None and started < since:
            continue
        if isinstance(value, str) and value not in found:
            found.append(value)
    return found


async def resolve_invocation(node: NodeLike, scope: Scope) -> str:
    """The InvocationID `this` or `previous` means on `node` now."""
    current = (await node_state(node, timeout=30)).invocation
    recent = await invocations(node)
    if scope == "this":
        if current:
            return current
        if recent:
            return recent[0]
        raise GrepError(f"{node.name}: the unit has no current invocation and no start in the journal")
    if current in recent:
        older = recent[recent.index(current) + 1 :]
    else:
        older = [inv for inv in recent if inv != current]
    if not older:
        raise GrepError(f"{node.name}: no start before the current one is left in the journal")
    return older[0]


def _time_key(line: str) -> str:
    match = _TIME_PREFIX.match(line)
    return match.group(1) if match else ""


async def grep(
    node: NodeLike,
    pattern: str,
    *,
    scope: Scope = "this",
    since: str | None = None,
    lines: int = DEFAULT_LINES,
    regex: bool = False,
    invocation: str | None = None,
    max_bytes: int = MAX_BYTES,
    timeout: float = 60.0,
) -> GrepResult:
    """Matching lines of the unit's journal on `node` in `scope` (see the module doc)."""
    if scope not in SCOPES:
        raise GrepError(f"scope {scope!r}: use one of {', '.join(SCOPES)}")
    lines = max(1, min(lines, MAX_LINES))
    compiled = pattern if regex else fixed_pattern(pattern)
    params: dict[str, object] = {"pattern": compiled}
    if scope in ("this", "previous"):
        invocation = invocation or await resolve_invocation(node, scope)
        name = "journal-grep-invocation"
        params["invocation"] = invocation
    else:
        name = "journal-grep"
        params["unit"] = node.unit
        if scope == "since":
            if not since:
                raise GrepError("scope since needs a time (since=2h, or a journalctl time)")
            params["since"] = since
        else:
            params["lines"] = lines
    command = render_params(name, params, sudo=False).shell
    result = GrepResult(node.name, pattern, compiled, scope, command, invocation=invocation, since=since)
    ordered = await _read_bounded(
        node, name, params, result, lines=lines, max_bytes=max_bytes, timeout=timeout
    )
    if scope == "last":  # journalctl 252 prints `-n` with `--grep` newest first
        ordered.sort(key=_time_key)
        result.complete = result.count < lines
    result.lines = ordered
    return result


async def journal_tail(
    node: NodeLike,
    *,
    since: str | None = None,
    lines: int = DEFAULT_LINES,
    max_bytes: int = MAX_BYTES,
    timeout: float = 60.0,
) -> GrepResult:
    """`logs`: the unit's latest `lines` journal lines on `node` (whatever the start), `since` a
    journalctl time when given; bounded like `grep` (each line clipped, reading stops after
    `max_bytes`), with the exact command. journalctl prints them oldest first."""
    lines = max(1, min(lines, MAX_LINES))
    params: dict[str, object] = {
        "unit": node.unit,
        "output": "short-iso",
        "all": True,
        "lines": lines,
    }
    if since:
        params["since"] = since
    command = render_params("journal", params, sudo=False).shell
    result = GrepResult(node.name, "", "", "since" if since else "last", command, since=since)
    result.lines = await _read_bounded(
        node, "journal", params, result, lines=lines, max_bytes=max_bytes, timeout=timeout
    )
    window = f" since {since}" if since else ""
    cut = "" if result.complete else " (cut short: output bound reached)"
    result.title = f"the unit's last {result.shown} journal line(s){window} on {node.name}{cut}"
    return result


async def _read_bounded(
    node: NodeLike,
    name: str,
    params: dict[str, object],
    result: GrepResult,
    *,
    lines: int,
    max_bytes: int,
    timeout: float,
) -> list[str]:
    """The last `lines` lines table command `name` streams, each clipped, journalctl's `-- ... --`
    marks skipped; counted into `result`, which is marked incomplete when reading stops after
    `max_bytes` or `timeout` (what `grep` and `logs` both promise)."""
    kept: deque[str] = deque(maxlen=lines)
    size = 0
    stream = node.stream(name, **params)
    try:
        async with asyncio.timeout(timeout):
            async for raw in iter_lines(stream):
                text = raw.decode("utf-8", "replace")
                if text.startswith("-- ") and text.endswith(" --"):  # "-- No entries --", boot marks
                    continue
                result.count += 1
                kept.append(clip(text))
                size += len(raw) + 1
                if size > max_bytes:
                    result.complete = False
                    break
    except TimeoutError:
        result.complete = False
    finally:
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()
    return list(kept)


async def start_limit_hit(node: NodeLike, state: NodeState) -> bool:
    """Did systemd refuse further restarts? `Result=start-limit-hit` is set only when a start
    job is refused; when the automatic restart is the one refused (systemd 252) the Result stays
    `exit-code` and only the journal says `Start request repeated too quickly.`"""
    since = f"@{int(state.started or time.time()) - 1}"
    try:
        found = await grep(node, "Start request repeated too quickly", scope="since", since=since, lines=1)
    except Exception:
        return False
    return found.count > 0
