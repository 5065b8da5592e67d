"""`[replicas]`: how several `flagbot serve` on one PostgreSQL share the work (docs/operations.md,
"Two replicas"), and the health endpoint each of them answers.

Why a section of its own and not part of `[schedules]`: these keys are about the process (which
port it listens on, how often it asks for the scheduler's lock), not about what is scheduled; a
single-host SQLite bot reads them too (it is always the leader, its health endpoint still answers).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_validator

from bot.config.section_base import Duration, Strict

LOOPBACK = "127.0.0.1"


class ReplicaSettings(Strict):
    health_host: str = Field(LOOPBACK, min_length=1, max_length=253)
    """Where the health endpoint listens: loopback by default (a probe on the same host, a
    Kubernetes kubelet through the pod's own address when set to 0.0.0.0)."""
    health_port: int = Field(8686, ge=0, le=65535)
    """0: no health endpoint."""
    election_interval: Duration = timedelta(seconds=5)
    """How often a standing-by replica asks PostgreSQL for the scheduler's lock, and the leader
    checks it still holds it. A dead leader's lock is free as soon as PostgreSQL sees its
    connection close; the next ask after that takes over."""

    @field_validator("election_interval", mode="after")
    @classmethod
    def _within_failover_budget(cls, value: timedelta) -> timedelta:
        """A takeover must come within 30 s of the leader's death (issue 25): the interval is
        most of that budget, so anything above 20 s would break the promise."""
        if not timedelta(seconds=1) <= value <= timedelta(seconds=20):
            raise ValueError("election_interval must be between 1s and 20s (a takeover comes within 30 s)")
        return value

    @field_validator("health_host", mode="after")
    @classmethod
    def _plain_host(cls, value: str) -> str:
        """An address or a host name, nothing a URL or a shell could read more into."""
        if not all(char.isalnum() or char in ".-:_" for char in value):
            raise ValueError(
                f"health_host {value!r}: give an address (127.0.0.1, ::1, 0.0.0.0) or a host name"
            )
        return value
