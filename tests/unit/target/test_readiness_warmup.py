"""A warmup that never finishes: `/health` stays 503 past `warmup_timeout`, reported as its own failure."""

from __future__ import annotations

import time

import httpx

from bot.target.readiness import wait_ready
from bot.target.readiness_result import Readiness
from tests.unit.target.scripted_node import ScriptedNode, health_transport, journal_json, show_text

OLD, NEW = "a" * 32, "b" * 32
BASE = "http://node0:30000"
UVICORN = "[2026-11-29 20:14:46] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)"
READY = "[2026-11-29 20:14:47] The server is fired up and ready to roll!"


async def _wait(
    health: list[tuple[float, int | None]],
    lines: list[tuple[float, bytes]],
    *,
    warmup_timeout: float | None,
    timeout: float = 5.0,
) -> Readiness:
    node0 = ScriptedNode("n0", 0, states=[(0, show_text(invocation=NEW))], lines=lines)
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])
    async with httpx.AsyncClient(transport=health_transport(health)) as client:
        return await wait_ready(
            [node0, node1],
            base_url=BASE,
            timeout=timeout,
            previous={"n0": OLD, "n1": "e" * 32},
            warmup_timeout=warmup_timeout,
            client=client,
        )


async def test_a_503_that_outlives_the_warmup_bound_is_a_warmup_hang_with_the_last_line() -> None:
    started = time.monotonic()
    result = await _wait(
        [(0, None), (0.1, 503)], [(0.05, journal_json(UVICORN, invocation=NEW))], warmup_timeout=0.4
    )
    waited = time.monotonic() - started
    assert result.outcome == "failed" and result.failure is not None
    assert result.failure.reason == "warmup-hang"
    assert result.failure.invocation == NEW
    assert "503 (warming up) for 0.4 s" in result.failure.message
    assert "Uvicorn running" in result.failure.message
    assert waited >= 0.4  # the warmup bound, not the 5 s load bound: the reason above says which
    assert list(result.phases) == ["loading", "warming", "failed"]


async def test_a_warmup_that_finishes_within_the_bound_is_ready() -> None:
    result = await _wait(
        [(0, None), (0.1, 503), (0.3, 200)], [(0.35, journal_json(READY, invocation=NEW))], warmup_timeout=1.0
    )
    assert result.outcome == "ready" and result.failure is None


async def test_without_a_warmup_bound_only_the_load_bound_ends_the_wait() -> None:
    started = time.monotonic()
    result = await _wait([(0, None), (0.1, 503)], [], warmup_timeout=None, timeout=0.8)
    assert result.outcome == "timeout" and result.failure is not None
    assert result.failure.reason == "timeout"
    assert time.monotonic() - started >= 0.8


async def test_loading_longer_than_the_warmup_bound_is_not_a_hang() -> None:
    """The bound starts at the first 503: a long load (port closed) is the `ready` bound's business."""
    result = await _wait([(0, None), (0.6, 503), (0.8, 200)], [], warmup_timeout=0.4)
    assert result.outcome == "ready"
