"""What a stored start (a snapshot) says of one capacity or status metric, as expectations name it.

Why a module of its own, outside `bot.loop.steps`: the steps, `flagbot baseline show` and Slack's
isolate and re-run buttons all read a start the same way, and importing anything in
`bot.loop.steps` imports the whole package, which registers every built-in action.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.store.models import Snapshot


def snapshot_value(snapshot: Snapshot | Mapping[str, Any] | None, metric: str) -> Any:
    """A capacity or status value of a start, as expectations name it.

    `max_running_requests` is the *effective* value (capacity line, /server_info);
    `parsed.max_running_requests` is what `server_args` printed.
    """
    if snapshot is None:
        return None
    data = snapshot if isinstance(snapshot, Mapping) else snapshot.model_dump()
    effective = data.get("effective") or {}
    if metric.startswith("parsed."):
        return (data.get("server_args") or {}).get(metric.removeprefix("parsed."))
    if metric == "ready":
        return data.get("ready")
    if metric == "startup_error":
        return data.get("startup_error")
    if metric == "startup_seconds":
        return data.get("startup_seconds")
    return effective.get(metric)
