"""What a readiness wait found: the outcome, the moments of each phase, and the failure if any.

Kept apart from the watchers that find it (`bot.target.readiness`): rollback, observe and the
loop read these records and their JSON without caring how they were gathered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bot.target.journal_read import JournalEntry

Outcome = Literal["ready", "failed", "timeout"]
Phase = Literal["starting", "loading", "warming", "ready", "failed"]
FailureReason = Literal[
    "start-limit",
    "unit-failed",
    "crash-loop",
    "fatal-line",
    "stopped",
    "unreachable",
    "warmup-hang",
    "stall",
    "timeout",
]


@dataclass
class Failure:
    reason: FailureReason
    node: str
    message: str
    fatal_line: str | None = None
    invocation: str | None = None
    exit_status: int | None = None
    n_restarts: int | None = None
    main_exit: str | None = None
    """How the main process ended, as systemd words it (`code=killed, status=9/KILL`)."""
    restart: str | None = None
    """The unit's `Restart=`: it decides whether that end became a restart loop or a failed unit."""
    stage: str | None = None
    """For a `stall` (and a `warmup-hang`): the startup stage it stopped in (`bot.target.stalls`)."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Readiness:
    """What happened between the restart and ready (or the failure), with its moments.

    Times ending in `_at` are Unix seconds (comparable with the host's journal and the twin's
    ground truth); `timings` are seconds from the start of the wait.
    """

    outcome: Outcome
    phase: Phase
    invocation: str | None
    invocations: dict[str, str | None]
    started_at: float
    noticed_at: float | None = None
    health_ready_at: float | None = None
    ready_line_at: float | None = None
    """The ready line's journal timestamp (when the server wrote it)."""
    ready_line_seen_at: float | None = None
    phases: dict[str, float] = field(default_factory=dict)
    """First moment (Unix seconds) each phase was seen: loading, warming, ready, failed."""
    stage: str | None = None
    """Last startup step node 0's journal showed (server_args, distributed_init, weights, kv_cache,
    cuda_graph, capacity)."""
    failure: Failure | None = None
    previous: dict[str, str | None] = field(default_factory=dict)
    """Each node's InvocationID before the restart: starts up to it belong to earlier changes."""
    lines: list[JournalEntry] = field(default_factory=list, repr=False)
    """Node 0's journal lines of the new invocation(s) that the follower saw."""
    reconnects: list[str] = field(default_factory=list)
    """Connections lost and reopened during the wait (the session's and the follower's)."""

    @property
    def ready(self) -> bool:
        return self.outcome == "ready"

    @property
    def timings(self) -> dict[str, float]:
        """loading_s (to the first 503), warming_s (503 -> ready), total_s (to ready or failure)."""
        out: dict[str, float] = {}
        start, warm = self.started_at, self.phases.get("warming")
        end = self.phases.get("ready") or self.phases.get("failed")
        if warm is not None:
            out["loading_s"] = round(warm - start, 3)
            if self.phases.get("ready") is not None:
                out["warming_s"] = round(self.phases["ready"] - warm, 3)
        elif self.phases.get("ready") is not None:
            out["loading_s"] = round(self.phases["ready"] - start, 3)
        if end is not None:
            out["total_s"] = round(end - start, 3)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "phase": self.phase,
            "invocation": self.invocation,
            "invocations": dict(self.invocations),
            "started_at": self.started_at,
            "noticed_at": self.noticed_at,
            "health_ready_at": self.health_ready_at,
            "ready_line_at": self.ready_line_at,
            "ready_line_seen_at": self.ready_line_seen_at,
            "phases": dict(self.phases),
            "timings": self.timings,
            "stage": self.stage,
            "previous": dict(self.previous),
            "failure": self.failure.to_json() if self.failure else None,
            "reconnects": list(self.reconnects),
        }
