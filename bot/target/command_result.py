"""What one table command did on one node: the record SSH sessions return and errors carry.

Why a module of its own: `bot.target.ssh` runs commands and raises `bot.target.errors`, and the
errors hold the failed command's result; with the record here neither imports the other back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommandResult:
    """What one table command did on one node. `argv_shell` is the exact text a human can re-run."""

    command: str
    argv_shell: str
    exit_status: int
    stdout: bytes
    stderr: bytes
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def text(self) -> str:
        """stdout as text; undecodable bytes replaced (journal lines may hold anything)."""
        return self.stdout.decode("utf-8", "replace")
