"""`python -m sglang.bench_serving` on a twin node: SGLang's benchmark client module path up to 0.5.14.

From 0.5.15 the client lives in `sglang.benchmark.serving` and this path still works but warns
on import (0.5.23 `sglang/bench_serving.py`: a module-level `FutureWarning` through
`warnings.warn`, `stacklevel=1`); the twin warns the same when its release has the new path. The client itself
is the engine's `sglang_twin.bench_client`, imported by name at run time (on the host this file
is `flagbot_lab.twin.shim.sglang.bench_serving`, where no `sglang_twin` exists).
"""

from __future__ import annotations

import importlib
import warnings

from ._version import __version__

MOVED = (
    "`sglang.bench_serving` is deprecated and will be removed in a future "
    "release; use `sglang.benchmark.serving` instead "
    "(e.g. `python -m sglang.benchmark.serving`)."
)


def _moved() -> bool:
    """Whether this node's release has the client at `sglang.benchmark.serving` (False on the host)."""
    try:
        releases = importlib.import_module("sglang_twin.releases")
    except ModuleNotFoundError:
        return False
    modules: tuple[str, ...] = releases.release(__version__).bench_modules
    return modules[0] != "sglang.bench_serving"


def main() -> None:
    importlib.import_module("sglang_twin.bench_client").main()


if _moved():  # on import, as 0.5.23's module does
    warnings.warn(
        MOVED,
        FutureWarning,
        stacklevel=1,
    )

if __name__ == "__main__":
    main()
