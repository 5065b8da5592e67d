"""What one recorded start printed that the capacity arithmetic reads, and the shapes its answers take.

Why a module of its own: `observe` stores these figures with every start's snapshot long before
anyone predicts from them, so reading them (`figures_json`, `start_figures`) must not pull in the
arithmetic; the answer's shapes (`Band`, `Unknown`, `Step`) are shared by every later stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from bot.sglang.catalog import version_key
from bot.sglang.log_report import StartReport, lowest_rank

GIB = 1 << 30
PRINT_ROUNDING_GIB = 0.01
"""The startup lines print GB with two decimals: each printed figure is off by up to 0.005."""

RuleSet = Literal["0.5.9", "0.5.10", "0.5.23"]


@dataclass(frozen=True)
class Unknown:
    """A figure the rules cannot decide without a restart, and why."""

    why: str

    def __str__(self) -> str:
        return f"unknown: needs a restart ({self.why})"


def shown_number(number: float) -> str:
    """A figure as the answer shows it: whole numbers whole, others to four significant digits."""
    return f"{number:.4g}" if not float(number).is_integer() else f"{int(number)}"


@dataclass(frozen=True)
class Band:
    """A predicted figure: `value` at today's free memory, `low`..`high` across the jitter."""

    value: float
    low: float
    high: float

    def shown(self) -> str:
        if self.low == self.high:
            return shown_number(self.value)
        return f"{shown_number(self.value)} ({shown_number(self.low)}..{shown_number(self.high)})"


Figure = Band | Unknown


@dataclass(frozen=True)
class Step:
    """One step of the arithmetic: what, the formula with its numbers, and the source it follows."""

    name: str
    formula: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "formula": self.formula, "source": self.source}


@dataclass(frozen=True)
class StartFigures:
    """What one recorded start printed that the arithmetic needs (GiB unless named otherwise).

    `explicit` holds the `server_args` keys the launch line set (a default derived in post-init,
    such as `mem_fraction_static`, moves when its inputs move; an explicit one does not).
    """

    version: str | None
    server_args: Mapping[str, Any]
    explicit: frozenset[str]
    pre_model_load_gib: float | None
    post_model_load_gib: float | None
    weight_gib: float | None
    kv_tokens: int | None
    kv_gib: float | None
    mamba_cache_size: int | None
    mamba_state_gib: float | None
    max_total_num_tokens: int | None
    max_running_requests: int | None
    context_len: int | None
    available_gpu_mem_gb: float | None
    gpu_total_mib: float | None = None
    kv_dtype: str | None = None
    """The KV pool's printed element type (`torch.bfloat16`), None when not printed."""
    swa_tokens: int | None = None
    """A hybrid sliding-window model's window pool (tokens); `kv_tokens` is then its full pool and
    `kv_gib` both pools together (the `SWAKVPool` line), so the cell is per full-pool token."""

    @property
    def hybrid(self) -> bool:
        return self.mamba_cache_size is not None

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["server_args"] = dict(self.server_args)
        data["explicit"] = sorted(self.explicit)
        return data


def figures_json(start: StartReport) -> dict[str, Any]:
    """The memory figures of one parsed start, lowest rank first, as stored with its snapshot:
    `Load weight begin/end` avail mem and usage, the KV pool (tokens and GB), the hybrid state
    pool (slots and GB) and the capacity line."""

    def lowest(entries: Sequence[dict[str, Any]], **match: object) -> dict[str, Any] | None:
        chosen = [e for e in entries if all(e.get(k) == v for k, v in match.items())]
        label = lowest_rank([str(e.get("rank", "")) for e in chosen])
        return next((e for e in chosen if e.get("rank", "") == label), None)

    begin = lowest(start.weights, phase="begin") or {}
    end = lowest(start.weights, phase="end") or {}
    # a hybrid sliding-window model's pool is the SWAKVPool line (both pools, the full one's size),
    # not its first KV line (the window layers' pool)
    kv = (
        lowest([e for e in start.kv_cache if e.get("state") == "hybrid_swa"])
        or lowest([e for e in start.kv_cache if e.get("state") is None])
        or {}
    )
    sizing_end = _last_end_before(start.weights, end, kv)
    kv_gib: float | None = None
    if isinstance(kv.get("k_size_gb"), int | float) and isinstance(kv.get("v_size_gb"), int | float):
        kv_gib = float(kv["k_size_gb"]) + float(kv["v_size_gb"])
    elif isinstance(kv.get("kv_size_gb"), int | float):
        kv_gib = float(kv["kv_size_gb"])
    state = start.state_cache or {}
    state_gib: float | None = None
    if isinstance(state.get("conv_state_gb"), int | float) and isinstance(
        state.get("ssm_state_gb"), int | float
    ):
        state_gib = float(state["conv_state_gb"]) + float(state["ssm_state_gb"])
    effective = start.effective
    return {
        "pre_model_load_gib": begin.get("avail_mem_gb"),
        "post_model_load_gib": sizing_end.get("avail_mem_gb"),
        "weight_gib": end.get("mem_usage_gb"),
        "kv_tokens": kv.get("tokens"),
        "kv_gib": kv_gib,
        "swa_tokens": kv.get("swa_tokens"),
        "mamba_cache_size": state.get("max_mamba_cache_size"),
        "mamba_state_gib": state_gib,
        "max_total_num_tokens": effective.get("max_total_num_tokens"),
        "max_running_requests": effective.get("max_running_requests"),
        "context_len": effective.get("context_len"),
        "available_gpu_mem_gb": effective.get("available_gpu_mem_gb"),
        "kv_dtype": start.kv_dtype or (str(kv["dtype"]) if kv.get("dtype") else None),
    }


def _last_end_before(
    weights: Sequence[dict[str, Any]], first_end: dict[str, Any], pool: dict[str, Any]
) -> dict[str, Any]:
    """The free memory the KV pool was sized from: the last `Load weight end` of the same rank
    before the pool's line. SGLang measures it when it sizes the pool (model_runner_kv_cache_mixin.py
    `profile_max_num_token`), so a draft model loaded before the pool (DFLASH) is already taken off;
    an EAGLE draft loads after the target's pool and does not count. The first end when the
    pool's line is not known."""
    if not first_end or not isinstance(pool.get("line"), int):
        return first_end
    ends = [
        e
        for e in weights
        if e.get("phase") == "end"
        and e.get("rank", "") == first_end.get("rank", "")
        and isinstance(e.get("line"), int)
        and e["line"] < pool["line"]
    ]
    return ends[-1] if ends else first_end


def as_float(value: object) -> float | None:
    """A recorded or printed number as a float; None for anything else (a bool is not a number)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def as_int(value: object) -> int | None:
    """A recorded or printed whole number; None for anything else (a bool is not a number)."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def start_figures(
    recorded: Mapping[str, Any],
    server_args: Mapping[str, Any],
    *,
    version: str | None,
    explicit: Iterable[str],
    gpu_total_mib: float | None,
) -> StartFigures:
    """`StartFigures` from `figures_json`'s record (as stored), the start's `server_args`, its
    SGLang version and the `server_args` keys its launch line set."""
    return StartFigures(
        version=version,
        server_args=dict(server_args),
        explicit=frozenset(explicit),
        pre_model_load_gib=as_float(recorded.get("pre_model_load_gib")),
        post_model_load_gib=as_float(recorded.get("post_model_load_gib")),
        weight_gib=as_float(recorded.get("weight_gib")),
        kv_tokens=as_int(recorded.get("kv_tokens")),
        kv_gib=as_float(recorded.get("kv_gib")),
        mamba_cache_size=as_int(recorded.get("mamba_cache_size")),
        mamba_state_gib=as_float(recorded.get("mamba_state_gib")),
        max_total_num_tokens=as_int(recorded.get("max_total_num_tokens")),
        max_running_requests=as_int(recorded.get("max_running_requests")),
        context_len=as_int(recorded.get("context_len")),
        available_gpu_mem_gb=as_float(recorded.get("available_gpu_mem_gb")),
        gpu_total_mib=gpu_total_mib,
        kv_dtype=str(recorded["kv_dtype"]) if recorded.get("kv_dtype") else None,
        swa_tokens=as_int(recorded.get("swa_tokens")),
    )


def rule_set(version: str | None) -> RuleSet | None:
    """Which release's rules apply: 0.5.9; 0.5.10 to 0.5.13 (`_resolve_max_num_reqs` unchanged);
    0.5.23 and later patch releases of it. None for a release whose sources were not read."""
    if version is None:
        return None
    try:
        key = version_key(version)
    except ValueError:
        return None
    if version_key("0.5.9") <= key < version_key("0.5.10"):
        return "0.5.9"
    if version_key("0.5.10") <= key < version_key("0.5.14"):
        return "0.5.10"
    if version_key("0.5.23") <= key < version_key("0.5.24"):
        return "0.5.23"
    return None


def switched_on(value: object) -> bool:
    """A `server_args` switch as printed (a bool, or "true"/"1" when it came through text)."""
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def spec_algorithm(args: Mapping[str, Any]) -> str | None:
    """The speculative algorithm a start runs, None when it runs none (printed as None)."""
    value = args.get("speculative_algorithm")
    return None if value in (None, "", "None") else str(value)


def dp_attention_workers(args: Mapping[str, Any]) -> int:
    """The DP workers the capacity line's `max_running_requests` is one of (1 without DP attention)."""
    return int(args.get("dp_size") or 1) if switched_on(args.get("enable_dp_attention")) else 1
