"""The one error a use case raises for what the user must know, beside the grammar's CommandError.

Why a flag instead of two classes: the front ends need one decision only, whose fault it is.
`usage=True` means the words or the configuration (the CLI exits 2, Slack answers ephemerally);
otherwise the target or the stored state said no (the CLI exits 1).
"""

from __future__ import annotations


class AppError(Exception):
    """A command that cannot go on, said in one line."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage

    @property
    def exit_code(self) -> int:
        return 2 if self.usage else 1
