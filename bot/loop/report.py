"""Where a run's progress goes: the terminal, a Slack thread, or a test's memory.

The engine talks to a `Reporter` only, so the same run shows up live in whichever front end
started it; everything it reports is also in the store, so a reporter that fails or a front
end that goes away loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console

from bot.loop.console import render_block, verdict_style
from bot.target.evidence import Evidence


@dataclass(frozen=True)
class RunStart:
    """What is known when a run starts (or resumes after an interruption)."""

    experiment_id: int
    playbook: str
    target: str
    actor: str
    params: dict[str, Any]
    resumed: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """How a run ended, as the engine returns it and a front end prints it."""

    experiment_id: int
    playbook: str
    target: str
    status: str
    verdict: str | None
    summary: str | None
    steps: list[dict[str, Any]] = field(default_factory=list)
    evidence: int = 0
    """How many evidence blocks the run stored."""

    def to_json(self) -> dict[str, Any]:
        return {
            "experiment_id": self.experiment_id,
            "playbook": self.playbook,
            "target": self.target,
            "status": self.status,
            "verdict": self.verdict,
            "summary": self.summary,
            "steps": list(self.steps),
            "evidence": self.evidence,
        }


class Reporter(Protocol):
    """What the engine tells the outside world; every method must return promptly."""

    async def started(self, info: RunStart) -> None: ...

    async def step(self, experiment_id: int, index: int, name: str, status: str, detail: str) -> None: ...

    async def evidence(self, block: Evidence, experiment_id: int) -> None: ...

    async def finished(self, outcome: RunOutcome) -> None: ...


@dataclass
class MemoryReporter:
    """Keeps every report in order (tests assert on it; `events` interleaves all four kinds)."""

    starts: list[RunStart] = field(default_factory=list)
    steps: list[tuple[int, int, str, str, str]] = field(default_factory=list)
    blocks: list[tuple[Evidence, int]] = field(default_factory=list)
    outcomes: list[RunOutcome] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)

    async def started(self, info: RunStart) -> None:
        self.starts.append(info)
        self.events.append(("started", info))

    async def step(self, experiment_id: int, index: int, name: str, status: str, detail: str) -> None:
        entry = (experiment_id, index, name, status, detail)
        self.steps.append(entry)
        self.events.append(("step", entry))

    async def evidence(self, block: Evidence, experiment_id: int) -> None:
        self.blocks.append((block, experiment_id))
        self.events.append(("evidence", block))

    async def finished(self, outcome: RunOutcome) -> None:
        self.outcomes.append(outcome)
        self.events.append(("finished", outcome))


class ConsoleReporter:
    """Live progress in a terminal: one line per step, evidence as it arrives, the outcome last."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False)

    async def started(self, info: RunStart) -> None:
        verb = "resuming" if info.resumed else "running"
        self.console.print(
            f"experiment #{info.experiment_id}: {verb} playbook {info.playbook} on {info.target} for {info.actor}",
            markup=False,
        )

    async def step(self, experiment_id: int, index: int, name: str, status: str, detail: str) -> None:
        style = {"ok": "green", "failed": "bold red", "stopped": "yellow", "running": "dim"}.get(status)
        text = f"  step {index + 1} {name}: {status}" + (f" - {detail}" if detail else "")
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    async def evidence(self, block: Evidence, experiment_id: int) -> None:
        render_block(self.console, block)
        self.console.print()

    async def finished(self, outcome: RunOutcome) -> None:
        word = outcome.verdict or outcome.status
        self.console.print(f"experiment #{outcome.experiment_id} {outcome.status}", end="", markup=False)
        if outcome.verdict:
            self.console.print(": ", end="")
            self.console.print(word, style=verdict_style(word), end="", markup=False)
        self.console.print(f" - {outcome.summary}" if outcome.summary else "", markup=False, highlight=False)
