"""Ask the host's own SGLang what it would make of a flag set, without restarting anything.

Why: SGLang adjusts its arguments after parsing them (`ServerArgs.__post_init__`), mostly in
silence (python/sglang/srt/server_args.py: `__post_init__` logs before logging is configured): a flag can switch another one on or off, and an unknown flag
kills the start with argparse's exit 2. Learning that from a restart costs a model load (up to
fifteen minutes on the seeds' nodes). SGLang's `prepare_server_args` does the parsing and the
adjustments without loading a model, so flagbot runs it with the unit's interpreter through the
table command `sglang-dry-run` and reads the printed `server_args=` with the same parser as the
startup line.

Outcomes are values, never exceptions, for anything the host does: resolved arguments (with the
bare post-init warnings from stderr), argparse's refusal (exit 2, its message), or "not
available here" with the reason (no SGLang for that interpreter, no GPU to probe, a timeout, an
unreachable node). Only a caller's own mistake raises: a word the table refuses (`ParamError`) or,
when a catalog is given, a flag the host's SGLang does not have (`UnknownFlagError`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from bot.sglang.catalog import FlagCatalog
from bot.sglang.server_args import parse_server_args
from bot.target.errors import TargetError
from bot.target.launcher import SglangInvoker
from bot.target.lines import split_lines
from bot.target.nodestate import NodeLike
from bot.target.privileged import LIST_PARAMS, render_params

ARGPARSE_EXIT = 2
MAX_WARNINGS = 50
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NEGATIVE = re.compile(r"^-\.?[0-9]")
_NO_SGLANG = re.compile(r"No module named '?sglang")


@dataclass(frozen=True)
class DryRunResult:
    """What the host's SGLang said about an argv.

    `available` is False when the host could not answer (then `reason` says why); an argparse
    refusal is an answer (`error`, `exit_status` 2). `server_args` is the post-init dict.
    """

    available: bool
    command: str
    exit_status: int | None = None
    server_args: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    reason: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """The flags resolved: SGLang printed its post-init arguments."""
        return self.available and self.error is None and self.server_args is not None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def check_flag_names(argv: Sequence[str], catalog: FlagCatalog) -> None:
    """Raise `UnknownFlagError`/`AmbiguousFlagError` for a flag word the catalog does not have."""
    for word in argv:
        if word.startswith("-") and not _NEGATIVE.match(word):
            catalog.resolve(word.partition("=")[0])


def _clean(line: str) -> str:
    return _ANSI.sub("", line).strip()


def _stderr_lines(stderr: bytes) -> list[str]:
    return [text for line in split_lines(stderr.decode("utf-8", "replace")) if (text := _clean(line))]


def _warnings(lines: Sequence[str]) -> list[str]:
    """Post-init warnings are bare lines on stderr; Python's own warning plumbing is not one."""
    skip = ("warnings.warn(", "Traceback", "  File ")
    return [line for line in lines if not line.startswith(skip)][:MAX_WARNINGS]


def _last_server_args(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(split_lines(stdout.decode("utf-8", "replace"))):
        if "server_args=" in line:
            return parse_server_args(line)
    return None


def interpret(
    command: str, exit_status: int, stdout: bytes, stderr: bytes, *, python: str, duration_s: float = 0.0
) -> DryRunResult:
    """Classify one run of the dry-run program (pure: the unit tests feed it recorded output)."""
    lines = _stderr_lines(stderr)
    base: dict[str, Any] = {"command": command, "exit_status": exit_status, "duration_s": duration_s}
    text = "\n".join(lines)
    if _NO_SGLANG.search(text):
        return DryRunResult(available=False, reason=f"SGLang is not importable by {python}", **base)
    if exit_status in (126, 127):
        reason = lines[-1] if lines else f"{python} cannot be run"
        return DryRunResult(available=False, reason=f"cannot run {python}: {reason}", **base)
    if exit_status == ARGPARSE_EXIT:
        refusal = next((line for line in reversed(lines) if "error:" in line), None)
        if refusal is not None:
            return DryRunResult(available=True, error=refusal, warnings=_warnings(lines[:-1]), **base)
    if exit_status != 0:
        reason = lines[-1] if lines else "no message"
        return DryRunResult(
            available=False, reason=f"the dry run failed (exit {exit_status}): {reason}", **base
        )
    server_args = _last_server_args(stdout)
    if server_args is None:
        return DryRunResult(available=False, reason="the dry run printed no server_args= line", **base)
    return DryRunResult(available=True, server_args=server_args, warnings=_warnings(lines), **base)


async def dry_run(
    node: NodeLike,
    *,
    python: str | SglangInvoker,
    argv: Sequence[str],
    timeout: float = 60,
    catalog: FlagCatalog | None = None,
) -> DryRunResult:
    """Resolve `argv` with SGLang's `prepare_server_args` on `node`, using interpreter `python`
    (a path on the host, or an `SglangInvoker` naming the unit's container runtime and image).

    `argv` is the flag part of the launch line (node 0's). With `catalog` (the host's flag list)
    an unknown flag is refused here, before anything runs.
    """
    invoker = SglangInvoker(python) if isinstance(python, str) else python
    words = LIST_PARAMS["argv"](list(argv))
    if catalog is not None:
        check_flag_names(words, catalog)
    name, params = invoker.command("sglang-dry-run")
    command = render_params(name, {**params, "argv": words}, sudo=False).shell
    started = time.monotonic()
    try:
        result = await node.run(name, argv=words, check=False, timeout=timeout, **params)
    except TargetError as exc:  # timeout, unreachable: the host gave no answer
        return DryRunResult(
            available=False, command=command, reason=str(exc), duration_s=time.monotonic() - started
        )
    return interpret(
        command,
        int(result.exit_status),
        bytes(result.stdout),
        bytes(getattr(result, "stderr", b"") or b""),
        python=str(invoker),
        duration_s=time.monotonic() - started,
    )
