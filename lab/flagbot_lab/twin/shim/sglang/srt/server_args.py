"""`sglang.srt.server_args` of the twin: `prepare_server_args` and a `ServerArgs` dataclass.

Why: flagbot's preflight resolves a flag change without restarting anything by calling SGLang's
own `prepare_server_args(argv)` on the target host (argparse, then `ServerArgs.__post_init__`)
and reading `repr()` of the result. On a twin node the same call lands here: the twin's argument
surface and post-init, with the node's scenario for the hardware facts. As in SGLang, a bad
command line exits 2 with argparse's message, and post-init WARNINGs go to stderr bare.

From 0.5.23 (`ServerArgs.__post_init__` does nothing there) `prepare_server_args` returns the
raw input, as the release does: `repr()` shows what the command line gave, and the resolved
values come from `resolve_once()` then `resolved_dict()`, the dict the startup line prints.

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
import time
from functools import cache
from types import ModuleType
from typing import Any

from .._version import __version__

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
    """A dataclass with the release's ServerArgs fields in their order, so its repr is the
    `ServerArgs(model_path=..., ...)` text and `dataclasses.asdict` works as on SGLang (0.5.23's
    repr leaves the watermark secrets out)."""
    names: tuple[str, ...] = _engine("args").field_names(__version__)
    hidden: tuple[str, ...] = _engine("adjust").HIDDEN_FIELDS if _deferred() else ()
    fields = [(name, Any, dataclasses.field(default=None, repr=name not in hidden)) for name in names]
    methods = {"resolve_once": _resolve_once, "resolved_dict": _resolved_dict} if _deferred() else {}
    cls = dataclasses.make_dataclass("ServerArgs", fields, namespace=methods)
    cls.__module__ = __name__
    return cls


def _deferred() -> bool:
    return bool(_engine("releases").release(__version__).deferred_resolution)


def _resolve_once(self: Any) -> None:
    """0.5.23 `ServerArgs.resolve_once`: run the resolution on the raw input, once."""
    if getattr(self, "_twin_resolved", None) is None:
        post = _post_init(getattr(self, "_twin_argv", []))
        for line in post.logged_warnings:  # logging is configured by now: `[time] ` prefixed
            print(_engine("logfmt").line(time.time(), line), file=sys.stderr, flush=True)
        self._twin_resolved = post.server_args


def _resolved_dict(self: Any) -> dict[str, Any]:
    """0.5.23 `ServerArgs.resolved_dict` (after `resolve_once`)."""
    _resolve_once(self)
    resolved: dict[str, Any] = _engine("adjust").resolved_dict(self._twin_resolved)
    return resolved


def __getattr__(name: str) -> Any:
    if name == "ServerArgs":
        return _server_args_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _post_init(argv: list[str]) -> Any:
    scenario = _engine("scenario").load_scenario(scenario_path())
    seed = random.randrange(1 << 31)  # noqa: S311 - not cryptography
    return _engine("startup").resolve_args(argv, scenario, seed=seed)


def prepare_server_args(argv: list[str]) -> Any:
    """argparse + post-init for `argv`, as SGLang's function of the same name; returns a
    `ServerArgs` instance. `random_seed` is random per call unless `--random-seed` is given.
    From 0.5.23 the instance holds the raw input (argparse only); `resolve_once()` resolves."""
    if _deferred():
        parsed = _engine("args").parse(argv, __version__)
        for line in parsed.warnings:
            print(line, file=sys.stderr, flush=True)
        record = _server_args_class()(**parsed.values)
        record._twin_argv = list(argv)
        record._twin_resolved = None
        return record
    post = _post_init(argv)
    for line in post.warnings:
        print(line, file=sys.stderr, flush=True)
    if post.refused is not None:  # `ServerArgs.__post_init__` raised (0.5.10 `_handle_mamba_radix_cache`)
        raise ValueError(post.refused)
    return _server_args_class()(**post.server_args)
