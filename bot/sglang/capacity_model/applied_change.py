"""A flag change applied to a start's `server_args`, as SGLang's parser would see it.

Why apart from the arithmetic: which flags the model computes, what a removed flag falls back to
and what a learned workspace adds are questions about the change, answered once before the
arithmetic runs at every jitter of the band.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.sglang.capacity_model.figures import switched_on
from bot.sglang.change import Change

_FLAG_KEYS: Mapping[str, tuple[str, type]] = {
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--max-running-requests": ("max_running_requests", int),
    "--context-length": ("context_length", int),
    "--chunked-prefill-size": ("chunked_prefill_size", int),
    "--cuda-graph-max-bs": ("cuda_graph_max_bs", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--page-size": ("page_size", int),
    "--max-mamba-cache-size": ("max_mamba_cache_size", int),
    "--disable-radix-cache": ("disable_radix_cache", bool),
    "--max-total-tokens": ("max_total_tokens", int),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", float),
    "--speculative-algorithm": ("speculative_algorithm", str),
    "--speculative-num-draft-tokens": ("speculative_num_draft_tokens", int),
}
"""The flags whose effect on capacity the model computes (docs/commands.md "predict")."""
MODELLED_FLAGS: tuple[str, ...] = tuple(_FLAG_KEYS)
_REMOVED_DEFAULTS: Mapping[str, object] = {
    "mem_fraction_static": None,
    "max_running_requests": None,
    "context_length": None,
    "chunked_prefill_size": None,
    "cuda_graph_max_bs": None,
    "kv_cache_dtype": "auto",
    "page_size": 1,
    "max_mamba_cache_size": None,
    "disable_radix_cache": False,
    "max_total_tokens": None,
    "mamba_full_memory_ratio": 0.9,
    "speculative_algorithm": None,
    "speculative_num_draft_tokens": None,
}
"""`ServerArgs` defaults a removed flag falls back to (0.5.9-0.5.23 `server_args.py`); None is
"derived in post-init" and handled by the step that derives it."""
KV_DTYPE_BYTES: Mapping[str, float] = {
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "fp4_e2m1": 0.5,
    "bf16": 2.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "float32": 4.0,
    "float": 4.0,
}
"""`--kv-cache-dtype` -> bytes per element (`ModelRunner.configure_kv_cache_dtype`); "auto"
means the model's dtype, read from `--dtype` when it names one."""
_SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


class PredictInputError(ValueError):
    """A change the model cannot read (a value that is not a number, an unknown algorithm)."""


@dataclass(frozen=True)
class LearnedCost:
    """Memory a flag SGLang's arithmetic does not know takes before the memory profile (its
    workspace), measured once from two starts of a try (`learn_flag_cost`) and carried by the
    knowledge base; `source` says where it was measured (shown in the step that uses it)."""

    flag: str
    gib: float
    source: str
    value: str | tuple[str, ...] | None = None
    """The flag's value when it was measured (None: a switch): another value may cost another
    workspace, so it is then not used."""


@dataclass(frozen=True)
class AppliedChange:
    """The `server_args` after a change, the keys it touched, the flags the model does not
    compute (their effect is unknown) and the learned workspaces the change adds (+) or frees (-)."""

    args: dict[str, Any]
    touched: frozenset[str]
    unmodelled: tuple[str, ...]
    workspaces: tuple[tuple[LearnedCost, float], ...] = ()


def server_args_key(flag: str) -> str:
    """The `server_args` field of a flag: `--enable-fused-moe-sum-all-reduce` -> `enable_fused_moe_sum_all_reduce`."""
    return flag.lstrip("-").replace("-", "_")


def _learned_workspace(args: Mapping[str, Any], change: Change, cost: LearnedCost) -> float:
    """What a change of a flag with a learned cost does to the memory before the profile: adding
    it to a start that runs without it takes its workspace, removing it from one that runs with
    it frees it; anything else moves nothing (today's start already paid or never paid it)."""
    running = switched_on(args.get(server_args_key(cost.flag)))
    if change.op in ("add", "set") and not running:
        return cost.gib
    if change.op == "remove" and running:
        return -cost.gib
    return 0.0


def apply_change(
    args: Mapping[str, Any], changes: Iterable[Change], learned: Mapping[str, LearnedCost] | None = None
) -> AppliedChange:
    """`args` with `changes` applied; a removed flag returns to its default (None when post-init
    derives it); a flag the model does not compute but whose workspace was `learned` adds or frees
    that workspace. Raises PredictInputError for a value that cannot be the flag's."""
    new = dict(args)
    unmodelled: list[str] = []
    touched: set[str] = set()
    workspaces: list[tuple[LearnedCost, float]] = []
    for change in changes:
        if change.op in ("env-set", "env-unset"):
            unmodelled.append(f"env {change.env_name}")
            continue
        flag = change.flag or ""
        if flag not in _FLAG_KEYS:
            cost = (learned or {}).get(flag)
            if cost is None:
                unmodelled.append(flag)
            elif change.op != "remove" and change.value != cost.value:
                unmodelled.append(f"{flag} at another value than the one its workspace was measured at")
            else:
                workspaces.append((cost, _learned_workspace(args, change, cost)))
            continue
        key, kind = _FLAG_KEYS[flag]
        touched.add(key)
        if change.op == "remove":
            new[key] = _REMOVED_DEFAULTS[key]
            continue
        value = change.value
        if kind is bool:
            if value not in (None, ()):
                raise PredictInputError(f"{flag} takes no value, got {value!r}")
            new[key] = True
            continue
        if not isinstance(value, str):
            raise PredictInputError(f"{flag} needs one value, got {value!r}")
        try:
            new[key] = kind(value)
        except ValueError:
            raise PredictInputError(f"{flag}={value!r} is not a {kind.__name__}") from None
        if key == "speculative_algorithm" and str(value).upper() not in _SPECULATIVE_ALGORITHMS:
            raise PredictInputError(f"{flag}={value!r}: the model knows {', '.join(_SPECULATIVE_ALGORITHMS)}")
        if key == "kv_cache_dtype" and value != "auto" and value not in KV_DTYPE_BYTES:
            raise PredictInputError(f"{flag}={value!r}: the model knows auto, {', '.join(KV_DTYPE_BYTES)}")
    return AppliedChange(new, frozenset(touched), tuple(unmodelled), tuple(workspaces))
