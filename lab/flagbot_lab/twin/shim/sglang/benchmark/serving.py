"""`python -m sglang.benchmark.serving` on a twin node: the benchmark client's path from 0.5.15.

Installed only for a release that has it (`install.py`); the client is the engine's
`sglang_twin.bench_client`, imported by name at run time.
"""

from __future__ import annotations

import importlib


def main() -> None:
    importlib.import_module("sglang_twin.bench_client").main()


if __name__ == "__main__":
    main()
