"""A check's change of state on the terminal (`flagbot checks run`): printed, evidence and all."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import IO

from rich.console import Console

from bot.app.notify import Notice
from bot.loop.console import render_evidence


@dataclass
class ConsoleNotifier:
    """Prints the notice and its evidence (a `bot.app.notify.Notifier`)."""

    stream: IO[str] = field(default_factory=lambda: sys.stdout)

    async def notify(self, notice: Notice) -> str | None:
        console = Console(file=self.stream, highlight=False)
        console.print(notice.text, markup=False, soft_wrap=True)
        render_evidence(console, notice.blocks)
        return None
