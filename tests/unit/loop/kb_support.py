"""A knowledge observation as plain data, shaped like a `kb_observation` row, for the loop's unit tests."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass
class Obs:
    flag: str
    kind: str
    text: str
    compute_capability: str | None = "12.1"
    target: str = "twin"
    gpu_name: str | None = "NVIDIA GB10"
    sglang_version: str | None = "0.5.10"
    experiment_id: int | None = 7
    observed_at: datetime = datetime(2026, 3, 9, 21, 45, tzinfo=UTC)
    detail: dict[str, Any] | None = None
