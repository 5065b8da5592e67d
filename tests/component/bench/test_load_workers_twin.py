"""A plan's load workers are kept for all its runs (bot/bench/loadgen.py `LoadWorkers`), against a twin.

What keeping them must not change: every run's requests are measured as before, with the prompt
length calibrated once. What it must change: the warmup runs once per worker, not once per run.
And a kept worker must never hide a server that stopped answering, or outlive a failed run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from bot.bench.loadgen import LoadError, LoadSpec, LoadWorkers
from tests.component.bench.conftest import OUTPUT_LEN, measured_truth, slowed
from tests.support.twin_process import Twin, TwinFactory

FULL_WARMUP = 32
"""min(output_len, 32): the max_tokens of a first run's warmup request."""


def spec(base: str, **overrides: Any) -> LoadSpec:
    values: dict[str, Any] = {"base_url": base, "input_len": 512, "output_len": OUTPUT_LEN, "seed": 5}
    return LoadSpec(**{**values, **overrides})


def requests_by_max_tokens(twin: Twin) -> dict[int, int]:
    counts: dict[int, int] = {}
    for record in twin.truth():
        if record.get("kind") == "request" and not record.get("warmup"):  # not the server's own warmup
            counts[record["max_new"]] = counts.get(record["max_new"], 0) + 1
    return counts


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_workers_are_kept_across_runs_and_warm_only_once(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    with LoadWorkers() as workers:
        first = workers.run(spec(twin.base, concurrency=1, num_requests=3, warmup_requests=1))
        pids_first = workers.pids
        # a level split over two workers: the kept one skips its warmup, the new one warms lightly
        second = workers.run(
            spec(twin.base, concurrency=2, num_requests=4, workers=2, warmup_requests=1, warmup_max_tokens=1)
        )
        pids_second = workers.pids
        third = workers.run(
            spec(twin.base, concurrency=2, num_requests=4, workers=2, warmup_requests=1, warmup_max_tokens=1)
        )
        assert workers.pids == pids_second
    assert len(pids_first) == 1 and len(pids_second) == 2 and pids_second[0] == pids_first[0]
    measured_truth(twin, 3 + 4 + 4)
    counts = requests_by_max_tokens(twin)
    assert counts == {FULL_WARMUP: 1, 1: 1, OUTPUT_LEN: 11}, counts
    for result, requests in ((first, 3), (second, 4), (third, 4)):
        assert result.metrics["completed"] == requests and result.metrics["failed"] == 0
        assert result.metrics["total_input_tokens"] == requests * 512  # still calibrated
    assert first.health.figures["warmup_s"] > 0
    assert third.health.figures["warmup_s"] == 0.0
    assert not any(alive(pid) for pid in pids_second)  # closed with the plan


def test_a_server_that_stops_answering_fails_the_run_and_discards_the_workers(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    with LoadWorkers() as workers:
        first = workers.run(spec(twin.base, concurrency=1, num_requests=2, warmup_requests=1))
        kept = workers.pids
        twin.proc.kill()
        twin.wait_exit()
        with pytest.raises(LoadError, match="every request of the run failed"):
            workers.run(
                spec(twin.base, model=first.spec.model, concurrency=1, num_requests=2, warmup_requests=1)
            )
        assert workers.pids == []
        assert not any(alive(pid) for pid in kept)


def test_close_from_another_thread_ends_a_run_in_progress(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    workers = LoadWorkers()
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            workers.run(spec(twin.base, concurrency=2, num_requests=None, duration_s=30.0, warmup_requests=1))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while not any(r.get("max_new") == OUTPUT_LEN for r in twin.truth()) and time.monotonic() < deadline:
        time.sleep(0.05)  # polls the twin's record of a measured request: the run is under way
    pids = workers.pids
    assert pids, "the run never started"
    workers.close()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert isinstance(outcome[0], LoadError), outcome  # closed mid-run: not the 30 s run completing
    assert workers.pids == [] and not any(alive(pid) for pid in pids)
    with pytest.raises(LoadError, match="closed"):
        workers.run(spec(twin.base, concurrency=1, num_requests=1))


def test_a_worker_that_died_between_runs_is_replaced(twins: TwinFactory) -> None:
    twin = twins.start(scenario=slowed())
    twin.wait_ready()
    with LoadWorkers() as workers:
        workers.run(spec(twin.base, concurrency=1, num_requests=2, warmup_requests=1))
        (dead,) = workers.pids
        os.kill(dead, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(dead) and time.monotonic() < deadline:
            time.sleep(0.01)  # polls until the process is gone (its reaper is the fork server)
        result = workers.run(spec(twin.base, concurrency=1, num_requests=2, warmup_requests=1))
        assert result.metrics["completed"] == 2
        assert workers.pids and dead not in workers.pids
