"""A load worker's prompt stream (bot/bench/worker.py): seeded, continued across the runs of a
plan, and apart from other plans', so a server's prefix cache never answers a measured prompt."""

from __future__ import annotations

from typing import Any

from bot.bench.worker import WorkerPlan, _Kept, _Worker


def plan(**overrides: Any) -> WorkerPlan:
    values: dict[str, Any] = {
        "index": 0,
        "url": "http://127.0.0.1:9/v1/completions",
        "endpoint": "completions",
        "model": "m",
        "input_len": 64,
        "output_len": 8,
        "num_requests": 4,
        "duration_s": None,
        "concurrency": 1,
        "request_rate": None,
        "warmup_requests": 1,
        "warmup_max_tokens": 8,
        "seed": 3,
        "request_timeout_s": 5.0,
        "level_timeout_s": 5.0,
    }
    return WorkerPlan(**{**values, **overrides})


def prompts(kept: _Kept, worker_plan: WorkerPlan) -> list[bytes]:
    worker = _Worker(worker_plan, None, kept)  # type: ignore[arg-type]  # no pipe needed to make bodies
    return [worker._body() for _ in range(4)]


def test_a_kept_worker_sends_new_prompts_in_every_run() -> None:
    kept = _Kept()
    first, second = prompts(kept, plan()), prompts(kept, plan())
    assert not set(first) & set(second)
    assert len(set(first)) == 4


def test_the_stream_is_seeded_and_set_apart_by_the_plans_salt() -> None:
    assert prompts(_Kept(), plan()) == prompts(_Kept(), plan())
    assert not set(prompts(_Kept(), plan())) & set(prompts(_Kept(), plan(prompt_salt=7)))
    assert not set(prompts(_Kept(), plan())) & set(prompts(_Kept(), plan(index=1)))
