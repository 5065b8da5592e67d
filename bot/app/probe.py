"""What a verification check saw of its target: the record the check's probe returns.

Why a module of its own: the scheduler's runtime names the probe's type (tests replace the probe),
and the check logic that judges it imports the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Probe:
    """What a check saw of the running start (and the benchmark it ran, if any)."""

    healthy: bool
    health: int | None
    invocation: str | None
    flags: list[dict[str, Any]]
    effective: dict[str, Any]
    snapshot_id: int | None = None
    set_id: int | None = None
    notes: list[str] = field(default_factory=list)
