"""flagbot's drop-in: the one file through which flags and environment change on a node.

Why a drop-in: the vendor unit is never edited, so "what flagbot changed" is one file, and
going back is overwriting that file with a neutral one (flagbot's sudo rules allow writing
exactly this path and its `.bak`, never deleting). The file holds `ExecStart=` (reset, then
the full new line) and, when the environment is managed, `Environment=` (reset, then every
variable), in systemd's quoting (`systemd_quote`).

A write is: refuse a hand-edited unit (its `systemctl cat` differs from what flagbot left,
shown as a unified diff) unless forced; back up the previous content on the host (`.bak`) and
in the store (with its sha256); write; `daemon-reload`; verify by round trip that systemd
loaded exactly the intended argv and environment and `NeedDaemonReload=no`; remember the new
`systemctl cat` as flagbot left it.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.target.errors import TargetError
from bot.target.ledger import Ledger, sha256_text
from bot.target.lines import lines_with_ends
from bot.target.privileged import dropin_path
from bot.target.ssh import NodeSession
from bot.target.systemd_quote import render_environment, render_exec, stored_exec_word
from bot.target.unit import parse_bus_environment, parse_bus_exec, parse_show, parse_state

HEADER = (
    "# Written by flagbot. Do not edit: flagbot compares the unit with what it left and refuses\n"
    "# to change a unit edited by hand. The vendor unit file is never changed.\n"
)
NEUTRAL = HEADER + "# No override: the vendor ExecStart= and Environment= apply.\n"
"""The drop-in that means "the vendor line": flagbot cannot delete the file, so it empties it."""


@dataclass(frozen=True)
class DropinSpec:
    """What the drop-in makes systemd run: the full argv, and the environment if flagbot manages it.

    `env=None` leaves the unit's own `Environment=` in force; a mapping replaces it entirely
    (`Environment=` reset, then one line per variable), so the drop-in alone says what runs.
    """

    argv: list[str]
    env: Mapping[str, str] | None = None


def render_dropin(spec: DropinSpec | None) -> str:
    """The drop-in text for `spec`; None gives the neutral drop-in (the vendor line applies)."""
    if spec is None:
        return NEUTRAL
    lines = [HEADER.rstrip("\n"), "[Service]", "ExecStart=", f"ExecStart={render_exec(spec.argv)}"]
    if spec.env is not None:
        lines.append("Environment=")
        lines.extend(f"Environment={item}" for item in render_environment(spec.env))
    return "\n".join(lines) + "\n"


def stored_argv(argv: Sequence[str]) -> list[str]:
    """The argv as systemd stores it after loading our line: every literal `$` is `$$` there
    (a reference word, `${NAME}` or `--flag=${NAME}`, is stored as written)."""
    return [stored_exec_word(word) for word in argv]


class HandEditError(TargetError):
    """The unit changed since flagbot last left it; the change is refused (unless forced)."""

    def __init__(self, node: str, diff: str, detail: str = "") -> None:
        super().__init__(
            f"{node}: the unit was changed by hand since flagbot last left it"
            + (f" ({detail})" if detail else "")
            + "; refusing to write the drop-in (`force=yes` overwrites it). What differs:\n"
            + diff
        )
        self.node = node
        self.diff = diff


class DropinVerifyError(TargetError):
    """After daemon-reload, systemd did not load what flagbot wrote."""

    def __init__(self, node: str, problem: str) -> None:
        super().__init__(f"{node}: the drop-in did not round-trip through systemd: {problem}")
        self.node = node
        self.problem = problem


@dataclass
class WriteResult:
    """One drop-in write on one node."""

    node: str
    path: str
    previous: str | None
    """The content before the write (None: there was no drop-in)."""
    content: str
    changed: bool
    timings: dict[str, float] = field(default_factory=dict)


async def read_dropin(session: NodeSession) -> str | None:
    """flagbot's drop-in on the node, or None when it does not exist."""
    result = await session.run("read-dropin", check=False)
    if result.exit_status == 0:
        return result.text
    if b"No such file" in result.stderr:
        return None
    result_error = result.stderr.decode("utf-8", "replace").strip()
    raise TargetError(f"{session.name}: cannot read {dropin_path(session.unit)}: {result_error}")


def unit_diff(before: str, after: str, node: str) -> str:
    lines = difflib.unified_diff(
        lines_with_ends(before),
        lines_with_ends(after),
        fromfile="as flagbot left it",
        tofile=f"now on {node}",
        n=1,
    )
    return "".join(lines)[:4000]


async def check_unedited(
    session: NodeSession, ledger: Ledger, *, seen: tuple[str, bool] | None = None
) -> str:
    """Refuse a unit changed since flagbot left it; returns the current `systemctl cat` text.

    Never seen before: accepted, unless systemd has not loaded what is on disk
    (`NeedDaemonReload=yes`: flagbot's reload would apply someone's unfinished edit).
    `seen`: (`systemctl cat` text, NeedDaemonReload) from a read of the unit moments ago, used
    instead of reading both again (an apply has just read every node's unit).
    """
    if seen is not None:
        text, need_reload = seen
    else:
        cat, show = await asyncio.gather(
            session.run("cat"), session.run("show", properties=["NeedDaemonReload"])
        )
        text, need_reload = cat.text, parse_show(show.text).get("NeedDaemonReload") == "yes"
    checksum, left = await ledger.unit_as_left(session.name)
    if checksum is None:
        if need_reload:
            raise HandEditError(
                session.name,
                "(the unit files differ from what systemd loaded)",
                "changed on disk and not reloaded",
            )
        return text
    if sha256_text(text) != checksum:
        diff = unit_diff(left, text, session.name) if left is not None else text[:4000]
        detail = "" if left is not None else f"checksum {checksum[:12]} expected; the current unit follows"
        raise HandEditError(session.name, diff, detail)
    return text


async def verify_loaded(session: NodeSession, spec: DropinSpec | None) -> None:
    """Round trip: what systemd loaded is exactly `spec` (argv, environment), nothing pending."""
    show, bus_exec, bus_env = await asyncio.gather(
        session.run("show", properties=["ExecStart", "NeedDaemonReload", "DropInPaths"]),
        session.run("unit-property", bus_property="ExecStart"),
        session.run("unit-property", bus_property="Environment"),
    )
    state = parse_state(show.text)
    if state.need_daemon_reload:
        raise DropinVerifyError(session.name, "NeedDaemonReload=yes after daemon-reload")
    if str(dropin_path(session.unit)) not in state.dropin_paths:
        raise DropinVerifyError(
            session.name, f"systemd does not list {dropin_path(session.unit)} in DropInPaths"
        )
    if spec is None:
        return
    want = stored_argv(spec.argv)
    got = parse_bus_exec(bus_exec.text)
    if got != [want]:
        raise DropinVerifyError(session.name, f"ExecStart is {got!r}, expected [{want!r}]")
    shown = [entry.argv_text for entry in state.exec_start]
    if shown != [" ".join(want)] and shown != [shlex.join(want)]:
        raise DropinVerifyError(session.name, f"`systemctl show -p ExecStart` gives {shown!r}")
    if spec.env is not None:
        env = parse_bus_environment(bus_env.text)
        if env != dict(spec.env):
            raise DropinVerifyError(session.name, f"Environment is {env!r}, expected {dict(spec.env)!r}")


async def write_dropin(
    session: NodeSession,
    ledger: Ledger,
    spec: DropinSpec | None,
    *,
    force: bool = False,
    reason: str = "",
    content: str | None = None,
) -> WriteResult:
    """Write flagbot's drop-in on one node, reload and verify; back up the previous content first.

    `spec=None` writes the neutral drop-in (the vendor line applies). `content` writes a
    given text instead (restoring a backup): then only `NeedDaemonReload=no` is verified.
    Raises `HandEditError` (unless `force`), `DropinVerifyError`, and the SSH errors.
    """
    timings: dict[str, float] = {}
    started = time.monotonic()
    text = content if content is not None else render_dropin(spec)
    path = str(dropin_path(session.unit))
    if not force:
        await check_unedited(session, ledger)
    previous = await read_dropin(session)
    timings["check"] = time.monotonic() - started
    if previous == text:  # already there: no write, but make sure systemd runs it
        with contextlib.suppress(DropinVerifyError):
            await verify_loaded(session, spec if content is None else None)
            await remember_unit(session, ledger)
            timings["total"] = time.monotonic() - started
            return WriteResult(session.name, path, previous, text, False, timings)
    await ledger.backup(session.name, path, previous or "", reason or "before write")
    if previous is None:
        await session.run("make-dropin-dir")
    else:
        await session.run("write-dropin-backup", input=previous)
    await session.run("write-dropin", input=text)
    written = await read_dropin(session)
    if written != text:
        raise DropinVerifyError(session.name, f"{path} reads back differently from what was written")
    timings["write"] = time.monotonic() - started - timings["check"]
    await session.run("daemon-reload")
    await verify_loaded(session, spec if content is None else None)
    await remember_unit(session, ledger)
    timings["total"] = time.monotonic() - started
    return WriteResult(session.name, path, previous, text, True, timings)


async def remember_unit(session: NodeSession, ledger: Ledger) -> None:
    """Record the unit as it is now as "what flagbot left" (after an operator-approved change)."""
    cat = await session.run("cat")
    await ledger.record_unit(session.name, cat.text, path=f"systemctl cat {session.unit}")
