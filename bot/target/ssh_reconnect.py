"""Which commands survive a dropped SSH connection, and how a reconnect is put on record.

`NodeSession.run` re-runs a command from `RETRY_SAFE` once on a fresh connection when the
connection is lost under it, and records a `Reconnect`; restart reports and readiness quote
them as evidence (docs/crash-safety.md, "SSH connection dropped mid-restart").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

RETRY_SAFE: Final = frozenset(
    {
        # systemd: a start of a started unit and a stop of a stopped one are no-ops, a job the
        # first run queued runs whatever became of the client, and the re-run waits for that job
        "start",
        "stop",
        "daemon-reload",
        "reset-failed",
        # files: the same full content again, a directory that may exist, a file that may be gone
        "write-dropin",
        "write-dropin-backup",
        "make-dropin-dir",
        "remove-bench-output",
        # reads
        "cat",
        "show",
        "unit-property",
        "read-dropin",
        "read-dropin-backup",
        "read-bench-output",
        "journal",
        "journal-invocation",
        "journal-grep",
        "journal-grep-invocation",
        "journal-starts",
        "gpu-query",
        "gpu-list",
        "sglang-help",
        "sglang-version",
        "sglang-dry-run",
        "container-sglang-help",
        "container-sglang-version",
        "container-sglang-dry-run",
        "read-env-file",
    }
)
"""Table commands re-run once on a fresh connection when the connection is lost under them,
because running them twice cannot do anything the first run would not have done. Not here:
`restart` (a second restart is a second restart), `bench-serving` (a benchmark run twice is not
the same benchmark), `journal-follow` (a stream; its reader resumes it from the last entry)."""


@dataclass(frozen=True)
class Reconnect:
    """One reconnect of a session, as evidence: which command the loss hit and what was said."""

    node: str
    command: str | None
    """The command the loss hit (`argv_shell`), re-run on the new connection; None when the
    connection was found closed between commands (an idle cut) and no command was hit."""
    error: str
    at: float
    """Unix seconds of the reconnect."""

    def describe(self) -> str:
        if self.command is None:
            return f"connection to {self.node} found closed ({self.error}); reconnected"
        return f"connection to {self.node} lost during `{self.command}` ({self.error}); reconnected, command re-run"
