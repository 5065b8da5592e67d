"""Progress of a command that is no playbook, on a terminal: one line on stderr per event."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from rich.console import Console

from bot.loop.console import render_block

if TYPE_CHECKING:
    from bot.bench.loadgen import LevelResult
    from bot.store.leases import LeaseHeld, LeaseInfo
    from bot.target.evidence import Evidence


def number(value: object, digits: int = 1) -> str:
    """A figure for a table cell: `-` for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}"


@dataclass
class ConsoleProgress:
    """Lease waits, takeovers, benchmark levels and notes as lines on `stream` (stderr), so the
    result on stdout stays clean (`--json` included). Steps are not printed: a terminal shows
    the command's result at the end."""

    stream: IO[str]

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    async def step(self, index: int, name: str, status: str) -> None:
        return None

    async def note(self, text: str) -> None:
        self._say(f"note: {text}")

    async def evidence(self, block: Evidence) -> None:
        render_block(Console(file=self.stream, highlight=False), block)

    def lease_wait(self, busy: LeaseHeld, remaining_s: float) -> None:
        self._say(
            f"waiting (up to {remaining_s:.0f} s more) for the lease of {busy.lease.target}: "
            f"{busy.lease.describe()}"
        )

    async def lease_taken_over(self, target: str, expired: LeaseInfo) -> None:
        self._say(
            f"note: took over an expired lease of {target} ({expired.describe()}); "
            "`flagbot reconcile` settles what it left"
        )

    def level_done(self, repeat: int, repeats: int, result: LevelResult) -> None:
        m = result.metrics
        bound = "  CLIENT-BOUND" if result.client_bound else ""
        self._say(
            f"c={result.spec.concurrency} repeat {repeat + 1}/{repeats}: "
            f"{number(m.get('output_throughput'))} tok/s, TTFT p50 {number(m.get('median_ttft_ms'))} ms, "
            f"{m.get('completed')} ok, {m.get('failed')} failed{bound}"
        )
