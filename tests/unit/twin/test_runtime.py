"""The runtime reads the scheduling arguments as post-init left them into the scheduler's knobs."""

from __future__ import annotations

from flagbot_lab.twin.engine.runtime import serving_of
from flagbot_lab.twin.engine.sched import Serving


def test_scheduling_arguments_become_the_schedulers_serving_knobs() -> None:
    args = {
        "disable_radix_cache": True,
        "chunked_prefill_size": 512,
        "enable_mixed_chunk": True,
        "schedule_policy": "lpm",
        "schedule_conservativeness": 0.3,
    }
    assert serving_of(args) == Serving(
        radix_cache=False, chunked_prefill_size=512, mixed_chunk=True, schedule_policy="lpm",
        schedule_conservativeness=0.3,
    )  # fmt: skip


def test_sglang_defaults_and_chunking_off() -> None:
    args = {"disable_radix_cache": False, "chunked_prefill_size": -1, "enable_mixed_chunk": False,
            "schedule_policy": "fcfs", "schedule_conservativeness": 1.0}  # fmt: skip
    assert serving_of(args) == Serving()
