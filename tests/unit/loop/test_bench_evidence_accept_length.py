"""The benchmark table in the evidence names the server's speculative accept length per level."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from bot.loop.steps.measure_steps import _emit_set
from bot.target.evidence import TableBlock


def emitted(levels: list[dict[str, Any]]) -> TableBlock:
    blocks: list[TableBlock] = []

    async def emit(block: TableBlock) -> None:
        blocks.append(block)

    ctx = SimpleNamespace(emit=emit)
    mset = SimpleNamespace(id=7, summary={"levels": levels})
    plan = SimpleNamespace(profile_name="quick", backend="builtin")
    asyncio.run(_emit_set(ctx, "after", mset, plan, "means over repeats"))  # type: ignore[arg-type]
    return blocks[0]


def level(concurrency: int, accept: float | None) -> dict[str, Any]:
    return {"concurrency": concurrency, "repeats": 2, "completed": 8, "failed": 0, "accept_length": accept}


def test_the_note_carries_the_accept_length_of_each_level() -> None:
    table = emitted([level(1, 2.65), level(64, 2.5)])
    assert table.note == "means over repeats; server's speculative accept length c=1: 2.65, c=64: 2.50"


def test_without_speculation_the_note_is_unchanged() -> None:
    assert emitted([level(1, None)]).note == "means over repeats"
