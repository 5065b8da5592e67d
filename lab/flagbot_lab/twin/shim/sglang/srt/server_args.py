"""`sglang.srt.server_args` of the twin: `prepare_server_args` and a `ServerArgs` dataclass.

Why: flagbot's preflight resolves a flag change without restarting anything by calling SGLang's
own `prepare_server_args(argv)` on the target host (argparse, then `ServerArgs.__post_init__`)
and reading `repr()` of the result. On a twin node the same call lands here: the twin's argument
surface and post-init, with the node's scenario for the hardware facts. As in SGLang, a bad
command line exits 2 with argparse's message, and post-init WARNINGs go to stderr bare.

The scenario is `/etc/sglang-twin/scenario.json`, or the file named by `SGLANG_TWIN_SCENARIO`.
The engine is the top-level package `sglang_twin` (imported when first needed, because on the
host this file lives in `lab/flagbot_lab/twin/shim/` where no `sglang_twin` exists).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import random
import sys
from functools import cache
from types import ModuleType
from typing import Any

SCENARIO_ENV = "SGLANG_TWIN_SCENARIO"
DEFAULT_SCENARIO = "/etc/sglang-twin/scenario.json"

__all__ = ["DEFAULT_SCENARIO", "SCENARIO_ENV", "prepare_server_args", "scenario_path"]  # + ServerArgs (lazy)


def _engine(module: str) -> ModuleType:
    return importlib.import_module(f"sglang_twin.{module}")


def scenario_path() -> str:
    """Where this node's compiled scenario is."""
    return os.environ.get(SCENARIO_ENV) or DEFAULT_SCENARIO


@cache
def _server_args_class() -> type:
    """A dataclass with SGLang 0.5.10's ServerArgs fields in their order, so its repr is the
    `ServerArgs(model_path=..., ...)` text and `dataclasses.asdict` works as on SGLang."""
    names: tuple[str, ...] = _engine("args").field_names()
    fields = [(name, Any, dataclasses.field(default=None)) for name in names]
    cls = dataclasses.make_dataclass("ServerArgs", fields)
    cls.__module__ = __name__
    return cls


def __getattr__(name: str) -> Any:
    if name == "ServerArgs":
        return _server_args_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def prepare_server_args(argv: list[str]) -> Any:
    """argparse + post-init for `argv`, as SGLang's function of the same name; returns a
    `ServerArgs` instance. `random_seed` is random per call unless `--random-seed` is given."""
    scenario = _engine("scenario").load_scenario(scenario_path())
    seed = random.randrange(1 << 31)  # noqa: S311 - not cryptography
    post = _engine("startup").resolve_args(argv, scenario, seed=seed)
    for line in post.warnings:
        print(line, file=sys.stderr, flush=True)
    return _server_args_class()(**post.server_args)
