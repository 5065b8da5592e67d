"""What the load generator asks the server itself after a level, beside the load it sends: the
speculative accept length of `/server_info`, as bench_serving reads it.

Why apart from `bot.bench.loadgen`: these are reads of the server's own figures, with their own
rules for when to ask (`AcceptLengthReads`), not part of driving the load.
"""

from __future__ import annotations

import httpx

from bot.http import get as http_get

__all__ = ["AcceptLengthReads", "read_accept_length"]


def read_accept_length(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> float | None:
    """The server's mean speculative accept length after a level, as bench_serving reads it:
    `/server_info` `internal_states[0].avg_spec_accept_length` (the decode side's under PD
    disaggregation). SGLang (0.5.9, 0.5.10: `Scheduler.get_internal_state`) sets it only with
    speculative decoding on and after a decode step; None then, or when it cannot be read (the
    level's figures do not depend on it)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = http_get(f"{base_url.rstrip('/')}/server_info", headers=headers, timeout=timeout)
        response.raise_for_status()
        info = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if isinstance(info, dict) and isinstance(info.get("decode"), list) and info["decode"]:
        info = info["decode"][0]
    states = info.get("internal_states") if isinstance(info, dict) else None
    if not isinstance(states, list) or not states or not isinstance(states[0], dict):
        return None
    value = states[0].get("avg_spec_accept_length")
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


class AcceptLengthReads:
    """The accept length after each level of one plan (one server start), asked only while the
    start reports one. SGLang reports it after any decode step when speculative decoding is on,
    so a level that completed requests and found none (no speculation, or no `/server_info`)
    means none will come from this start: the later levels skip the read, one HTTP round trip
    and a ~6 KB answer each (issue 16 item 9)."""

    def __init__(self) -> None:
        self.asking = True

    def after_level(self, base_url: str, *, completed: int, api_key: str | None = None) -> float | None:
        if not self.asking:
            return None
        value = read_accept_length(base_url, api_key=api_key)
        if value is None and completed > 0:
            self.asking = False
        return value
