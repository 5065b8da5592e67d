"""A load worker serves its plan's runs on one event loop, without collecting its whole heap
between them (bot/bench/worker.py `worker_main`).

A new loop per run and an unfreeze with a full collection after it cost ~16-30 ms between two
runs of a plan, which the next run waited for. The pipe here is a list of messages and a run is
a stand-in that notes its loop, so the test needs no server; the collector's calls are recorded
instead of made, which also leaves the test process's own heap alone.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from bot.bench import worker

PLAN = worker.WorkerPlan(
    index=0,
    url="http://127.0.0.1:9/v1/completions",
    endpoint="completions",
    model="m",
    input_len=64,
    output_len=8,
    num_requests=4,
    duration_s=None,
    concurrency=1,
    request_rate=None,
    warmup_requests=1,
    warmup_max_tokens=8,
    seed=3,
    request_timeout_s=5.0,
    level_timeout_s=5.0,
)


class Pipe:
    """The parent's end as `worker_main` sees it: these messages, then EOF."""

    def __init__(self, *messages: tuple[str, Any]) -> None:
        self.messages = list(messages)
        self.sent: list[tuple[str, Any]] = []
        self.closed = False

    def recv(self) -> tuple[str, Any]:
        if not self.messages:
            raise EOFError
        return self.messages.pop(0)

    def send(self, message: tuple[str, Any]) -> None:
        self.sent.append(message)

    def close(self) -> None:
        self.closed = True


def test_the_runs_share_one_loop_and_only_young_objects_are_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    loops: list[asyncio.AbstractEventLoop] = []

    async def run(self: worker._Worker) -> None:
        calls.append("run")
        loops.append(asyncio.get_running_loop())

    monkeypatch.setattr(worker._Worker, "main", run)

    def noted(name: str) -> Any:
        def call(*_: object) -> int:
            calls.append(name)
            return 0

        return call

    for name in ("freeze", "unfreeze", "collect"):
        monkeypatch.setattr(gc, name, noted(name))
    pipe = Pipe(("run", PLAN), ("run", PLAN), ("run", PLAN))

    worker.worker_main(pipe)  # type: ignore[arg-type]  # the pipe's three methods are all it uses

    assert len(loops) == 3 and loops[0] is loops[1] is loops[2]
    assert calls == ["freeze", *["run", "collect", "freeze"] * 3]  # never "unfreeze": no full-heap scan
    assert loops[0].is_closed()  # the loop ends with the process's runs
    assert pipe.closed and pipe.sent == []
