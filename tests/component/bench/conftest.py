"""Twin processes for the load generator tests, and the twin's ground truth read back.

The scenario is the shipped tiny-cpu slowed 4x (`decode_scale`): ~16 ms between tokens and
~100 ms to the first token with 512 prompt tokens, like the peers' reference setting (100 ms /
20 ms), so a millisecond of timer jitter on a shared 2-core machine is a small error.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tests.support.twin_process import Twin, tiny

OUTPUT_LEN = 48
"""Measured requests ask for 48 tokens and warmups for 32: that is how the truth tells them apart."""


def slowed(**faults: Any) -> dict[str, Any]:
    document = copy.deepcopy(tiny(**faults))
    document["timings"]["decode_scale"] = 4.0
    document["noise"]["request_cv"] = 0.0
    return document


def measured_truth(twin: Twin, expected: int) -> list[dict[str, Any]]:
    """The twin's records of the measured requests, once all `expected` are flushed (1 s timer)."""

    def records() -> list[dict[str, Any]]:
        return [
            r
            for r in twin.truth()
            if r.get("kind") == "request" and not r.get("warmup") and r.get("max_new") == OUTPUT_LEN
        ]

    twin.wait_for(lambda: len(records()) >= expected, timeout=20, what=f"{expected} truth records")
    return records()


def twin_config(directory: Path, twin: Twin, profile: str, tables: str, *, top: str = "") -> dict[str, str]:
    """flagbot.toml in `directory` naming `twin` as the default target `twin`, whose benchmark
    profile is `profile` (its `[bench.…]` tables in `tables`; `top`: more top-level keys);
    returns the environment that points the CLI at it."""
    path = directory / "flagbot.toml"
    path.write_text(
        f"""default_target = "twin"
{top}
[targets.twin]
unit = "sglang-qwen.service"
base_url = "{twin.base}"
benchmark_profile = "{profile}"
nodes = [{{ host = "127.0.0.1" }}]
{tables}"""
    )
    return {"FLAGBOT_CONFIG": str(path)}
