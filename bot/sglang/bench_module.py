"""Which module runs SGLang's benchmark client in a given release.

SGLang 0.5.15 moved the client from `sglang/bench_serving.py` to `sglang/benchmark/serving.py`;
the old path still runs in 0.5.23 but warns (`FutureWarning`: "`sglang.bench_serving` is
deprecated and will be removed in a future release"), and a release that drops it will refuse
`python -m sglang.bench_serving`. Releases before 0.5.15 have only the old path.
"""

from __future__ import annotations

import re
from typing import Final

OLD_MODULE: Final = "sglang.bench_serving"
NEW_MODULE: Final = "sglang.benchmark.serving"
MOVED_IN: Final = (0, 5, 15)
_LEADING = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")

__all__ = ["MOVED_IN", "NEW_MODULE", "OLD_MODULE", "bench_module_for", "release_tuple"]


def release_tuple(version: str | None) -> tuple[int, int, int] | None:
    """`"0.5.23"` -> `(0, 5, 23)`, `"0.5.10.post1"` -> `(0, 5, 10)`; None when it is no version."""
    match = _LEADING.match(version or "")
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def bench_module_for(version: str | None) -> str:
    """The module `python -m` runs the client with on `version`: the new path from 0.5.15, the
    old one before, and the old one when the version is unknown (every release so far runs it)."""
    parsed = release_tuple(version)
    return NEW_MODULE if parsed is not None and parsed >= MOVED_IN else OLD_MODULE
