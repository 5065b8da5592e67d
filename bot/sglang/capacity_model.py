"""Predict what a flag change does to a target's capacity, from SGLang's own start arithmetic.

Why: a restart costs up to fifteen minutes, and most flags people try for capacity change it
only through SGLang's deterministic memory arithmetic, fed by figures the last start already
printed (free memory before the weights, the weights, the KV cell, the hybrid state per
request). This module is a pure function of those recorded figures, the start's printed
`server_args`, the change and the SGLang version: no store, no target, no clock, so a later
calibration store, a `try` preflight and a stored predicted-vs-measured can all call it.

Every figure comes back next to today's, as a band, with the steps that made it; each step
names the formula and the SGLang source (file, function, release) it follows. What the rules
read cannot decide is "unknown: needs a restart", never a guess. The releases read are 0.5.9,
0.5.10 (same rules to 0.5.13) and 0.5.23 (`pip download sglang==X --no-deps`); other releases
get "unknown". docs/commands.md "predict" lists what is modelled per flag.

The band: free memory is measured anew at every start (`get_available_gpu_memory`), so the
memory before and after the weights both move by the same jitter `j`; the model is run on a grid
from `-j` to `+j` (widened by the rounding of the printed figures) and the band is the extremes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.sglang.catalog import version_key
from bot.sglang.change import Change
from bot.sglang.expectation import Expectation, Reference, evaluate
from bot.sglang.log_report import StartReport, lowest_rank

GIB = 1 << 30
PRINT_ROUNDING_GIB = 0.01
"""The startup lines print GB with two decimals: each printed figure is off by up to 0.005."""
DEFAULT_JITTER_GIB = 0.3
"""With one start only: the free memory two starts measure can differ by this much (other
processes, the CUDA context, NCCL buffers; seen up to +-0.15 GiB per start on unified-memory
GB10 nodes). A stated assumption, replaced by the target's own spread once it has two starts."""
BAND_POINTS = 41
"""Jitters the model is run at, evenly from -j to +j: the figures are not monotonic in the free
memory (one more state slot takes memory from the KV pool), so the band's extremes are looked for
on a grid fine enough (about 0.015 GiB apart at the default jitter) rather than at its ends."""
SPECULATIVE_MAX_RUNNING = 48
"""`ServerArgs._handle_speculative_decoding` (0.5.9, 0.5.10, 0.5.23): with a speculative
algorithm and no `--max-running-requests`, post-init sets it to 48."""
MAMBA_BASE_RATIO = 3
"""`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO` (model_runner_kv_cache_mixin.py 0.5.9/0.5.10,
mem_cache/kv_cache_configurator.py 0.5.23)."""

RuleSet = Literal["0.5.9", "0.5.10", "0.5.23"]

SRC_PROFILE = "model_executor/model_runner_kv_cache_mixin.py profile_max_num_token"
SRC_RESOLVE_REQS = "model_executor/model_runner_kv_cache_mixin.py _resolve_max_num_reqs"
SRC_INIT_POOL_059 = "model_executor/model_runner_kv_cache_mixin.py init_memory_pool"
SRC_RESOLVE_REQS_0523 = "mem_cache/kv_cache_configurator.py resolve_max_num_reqs"
SRC_MAMBA = "model_executor/model_runner_kv_cache_mixin.py handle_max_mamba_cache"
SRC_MAMBA_RATIO = "model_executor/model_runner_kv_cache_mixin.py _calculate_mamba_ratio"
SRC_USER_LIMIT = "model_executor/model_runner_kv_cache_mixin.py _resolve_token_capacity"
SRC_GPU_MEMORY = "server_args.py _handle_gpu_memory_settings"
SRC_SPECULATIVE = "server_args.py _handle_speculative_decoding"
SRC_KV_POOL = "mem_cache/memory_pool.py MHATokenToKVPool"
SRC_REQ_POOL = "mem_cache/memory_pool.py ReqToTokenPool (context_len + 4 + draft tokens, int32)"

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
_KV_DTYPE_BYTES: Mapping[str, float] = {
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
_TORCH_DTYPE_BYTES: Mapping[str, float] = {
    "torch.bfloat16": 2.0,
    "torch.float16": 2.0,
    "torch.float32": 4.0,
    "torch.float8_e4m3fn": 1.0,
    "torch.float8_e5m2": 1.0,
    "torch.uint8": 0.5,
}
"""The printed `Using KV cache dtype: torch.X` -> bytes per element (fp4 is packed in uint8)."""
SPECULATIVE_RESERVE_MB: Mapping[RuleSet, tuple[int, int]] = {
    "0.5.9": (6 * 1024, 2 * 1024),
    "0.5.10": (6 * 1024, 4 * 1024),
    "0.5.23": (0, 0),
}
"""`_handle_gpu_memory_settings`' speculative reserve: (STANDALONE, other non-NGRAM)."""
_SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


class PredictInputError(ValueError):
    """A change the model cannot read (a value that is not a number, an unknown algorithm)."""


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
    kv = lowest([e for e in start.kv_cache if e.get("state") is None]) or {}
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
        "post_model_load_gib": end.get("avail_mem_gb"),
        "weight_gib": end.get("mem_usage_gb"),
        "kv_tokens": kv.get("tokens"),
        "kv_gib": kv_gib,
        "mamba_cache_size": state.get("max_mamba_cache_size"),
        "mamba_state_gib": state_gib,
        "max_total_num_tokens": effective.get("max_total_num_tokens"),
        "max_running_requests": effective.get("max_running_requests"),
        "context_len": effective.get("context_len"),
        "available_gpu_mem_gb": effective.get("available_gpu_mem_gb"),
        "kv_dtype": start.kv_dtype or (str(kv["dtype"]) if kv.get("dtype") else None),
    }


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
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
        pre_model_load_gib=_num(recorded.get("pre_model_load_gib")),
        post_model_load_gib=_num(recorded.get("post_model_load_gib")),
        weight_gib=_num(recorded.get("weight_gib")),
        kv_tokens=_int(recorded.get("kv_tokens")),
        kv_gib=_num(recorded.get("kv_gib")),
        mamba_cache_size=_int(recorded.get("mamba_cache_size")),
        mamba_state_gib=_num(recorded.get("mamba_state_gib")),
        max_total_num_tokens=_int(recorded.get("max_total_num_tokens")),
        max_running_requests=_int(recorded.get("max_running_requests")),
        context_len=_int(recorded.get("context_len")),
        available_gpu_mem_gb=_num(recorded.get("available_gpu_mem_gb")),
        gpu_total_mib=gpu_total_mib,
        kv_dtype=str(recorded["kv_dtype"]) if recorded.get("kv_dtype") else None,
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


def _on(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.lower() in ("true", "1"))


def _spec(args: Mapping[str, Any]) -> str | None:
    value = args.get("speculative_algorithm")
    return None if value in (None, "", "None") else str(value)


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
    running = _on(args.get(server_args_key(cost.flag)))
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
        if key == "kv_cache_dtype" and value != "auto" and value not in _KV_DTYPE_BYTES:
            raise PredictInputError(f"{flag}={value!r}: the model knows auto, {', '.join(_KV_DTYPE_BYTES)}")
    return AppliedChange(new, frozenset(touched), tuple(unmodelled), tuple(workspaces))


def memory_tier(gpu_mib: float, tp: int, rules: RuleSet) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) by GPU memory (`_handle_gpu_memory_settings`
    0.5.9/0.5.10; 0.5.23 `arg_groups/memory_hook.py` adds 4096 / 48 for 20-35 GiB)."""
    gib = gpu_mib / 1024
    if gib < 20:
        return 2048, 8
    if gib < 35:
        return (4096, 48 if tp < 4 else 160) if rules == "0.5.23" else (2048, 24 if tp < 4 else 80)
    if gib < 60:
        return 4096, 32 if tp < 4 else 160
    if gib < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def _piecewise_on(args: Mapping[str, Any], rules: RuleSet) -> bool:
    if rules == "0.5.9":
        return _on(args.get("enable_piecewise_cuda_graph"))
    return not _on(args.get("disable_piecewise_cuda_graph"))


def piecewise_token_sizes(max_tokens: int) -> list[int]:
    """`ServerArgs._generate_piecewise_cuda_graph_tokens` (0.5.9 / 0.5.10 `server_args.py`): the
    piecewise CUDA graph capture sizes up to `piecewise_cuda_graph_max_tokens`."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1024 + 1, 64))
        + list(range(1280, 4096 + 1, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [size for size in sizes if size <= max_tokens]


def _piecewise_tokens(figures: StartFigures, new: Mapping[str, Any]) -> list[int] | Unknown:
    """The piecewise token list after a change: `piecewise_cuda_graph_max_tokens` defaults to
    `chunked_prefill_size` capped by `max_total_tokens` (0.5.10 `_handle_gpu_memory_settings`),
    then `piecewise_token_sizes`. Unknown when today's printed list is not that rule's (set by
    hand, an MLA model's 2048, a Llama-2's 4096)."""
    old = figures.server_args

    def derived_max(args: Mapping[str, Any]) -> int | None:
        chunked = _int(args.get("chunked_prefill_size"))
        if chunked is None or chunked <= 0:
            return None
        cap = _int(args.get("max_total_tokens"))
        return chunked if cap is None else min(chunked, cap)

    printed_max, printed = (
        _int(old.get("piecewise_cuda_graph_max_tokens")),
        old.get("piecewise_cuda_graph_tokens"),
    )
    explicit = {"piecewise_cuda_graph_max_tokens", "piecewise_cuda_graph_tokens"} & figures.explicit
    today_max, new_max = derived_max(old), derived_max(new)
    if explicit or printed_max is None or today_max != printed_max or new_max is None:
        return Unknown(
            "the piecewise CUDA graph sizes were not derived by the default rule at the last start"
        )
    if not isinstance(printed, list | tuple) or list(printed) != piecewise_token_sizes(printed_max):
        return Unknown("the printed piecewise CUDA graph token list is not the default rule's")
    return piecewise_token_sizes(new_max)


def reserved_mem_mb(args: Mapping[str, Any], gpu_mib: float, rules: RuleSet) -> float | Unknown:
    """`_handle_gpu_memory_settings`' reserve (0.5.9 / 0.5.10 `server_args.py`): activation, graphs, TP, piecewise tokens, the 10 GiB floor above 60 GiB, and
    the speculative reserve. 0.5.23 moved it (`arg_groups/memory_hook.py`): not modelled."""
    if rules == "0.5.23":
        return Unknown("0.5.23 derives mem_fraction_static in arg_groups/memory_hook.py: not modelled")
    chunked, max_bs = _int(args.get("chunked_prefill_size")), _int(args.get("cuda_graph_max_bs"))
    if chunked is None or max_bs is None:
        return Unknown("chunked_prefill_size or cuda_graph_max_bs not printed")
    tp, pp = int(args.get("tp_size") or 1), int(args.get("pp_size") or 1)
    reserved = 512 + max(chunked, 2048) * 1.5 + max_bs * 2 + tp * pp / 8 * 1024
    if _on(args.get("enable_dp_attention")):
        dp = int(args.get("dp_size") or 1)
        reserved += max_bs * dp * 3 + (max_bs * dp * 1.5 if max_bs > 300 else 0)
    if _piecewise_on(args, rules):
        tokens = args.get("piecewise_cuda_graph_tokens")
        if not isinstance(tokens, list | tuple):
            return Unknown("piecewise CUDA graph token list not printed")
        reserved += len(tokens) * 8
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    algorithm = _spec(args)
    standalone, other = SPECULATIVE_RESERVE_MB[rules]
    if algorithm == "STANDALONE":
        reserved += standalone
    elif algorithm is not None and algorithm != "NGRAM":
        reserved += other
    return reserved


@dataclass(frozen=True)
class _Inputs:
    """Today's figures checked for completeness, with what was derived from them."""

    figures: StartFigures
    rules: RuleSet
    cell_bytes: float
    state_bytes: float | None
    workspace_gib: float
    """What the pools of the last start do not explain of the rest its lines give: positive for
    memory a flag took before the profile (its workspace), negative when SGLang's profile saw
    more free memory than the `Load weight end` line printed. Carried into the prediction."""


@dataclass(frozen=True)
class _Outcome:
    """One run of the arithmetic at one jitter."""

    mem_fraction_static: float | Unknown
    parsed_max_running_requests: int | Unknown | None
    max_total_num_tokens: int | Unknown
    max_running_requests: int | Unknown
    max_mamba_cache_size: int | Unknown | None
    kv_gib: float | Unknown
    state_gib: float | Unknown
    available_gpu_mem_gb: float | Unknown
    steps: tuple[Step, ...]


METRICS: tuple[str, ...] = (
    "mem_fraction_static",
    "parsed.max_running_requests",
    "max_running_requests",
    "max_total_num_tokens",
    "max_mamba_cache_size",
    "kv_memory_gb",
    "state_memory_gb",
    "available_gpu_mem_gb",
)
"""The figures a prediction gives, in the order shown; expectations may name any of them."""
_METRIC_ALIASES = {
    "parsed_max_running_requests": "parsed.max_running_requests",
    "parsed.mem_fraction_static": "mem_fraction_static",
    "available_gpu_mem": "available_gpu_mem_gb",
}


@dataclass(frozen=True)
class PredictedFigure:
    name: str
    today: float | None
    predicted: Figure

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "today": self.today}
        if isinstance(self.predicted, Unknown):
            data["unknown"] = self.predicted.why
        else:
            data |= {"value": self.predicted.value, "low": self.predicted.low, "high": self.predicted.high}
        return data


Call = Literal["pass", "fail", "undecided"]


@dataclass(frozen=True)
class ExpectationCall:
    """An expectation judged against the predicted band: confident only when the whole band is
    on one side of it."""

    expectation: Expectation
    call: Call
    why: str

    @property
    def confident(self) -> bool:
        return self.call != "undecided"

    def to_json(self) -> dict[str, Any]:
        return {
            "expectation": str(self.expectation),
            "call": self.call,
            "confident": self.confident,
            "why": self.why,
        }


@dataclass(frozen=True)
class Prediction:
    """Today's figures next to the predicted ones, the steps, the band's origin and the calls."""

    version: str | None
    rules: RuleSet | None
    changes: tuple[str, ...]
    figures: tuple[PredictedFigure, ...]
    steps: tuple[Step, ...]
    band: str
    calls: tuple[ExpectationCall, ...] = ()
    unknown: str | None = None
    """Set when nothing could be predicted (why); every figure is then Unknown."""

    def figure(self, name: str) -> PredictedFigure:
        name = _METRIC_ALIASES.get(name, name)
        return next(f for f in self.figures if f.name == name)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "rules": self.rules,
            "changes": list(self.changes),
            "figures": [f.to_json() for f in self.figures],
            "steps": [s.to_json() for s in self.steps],
            "band": self.band,
            "calls": [c.to_json() for c in self.calls],
            "unknown": self.unknown,
        }


def _kv_bytes(args: Mapping[str, Any], printed: str | None, today: Mapping[str, Any]) -> float | None:
    """Bytes per KV element: the flag's dtype, else (`auto`) the model's: `--dtype` when it
    names one, else the printed `Using KV cache dtype` of a start that was `auto` too."""
    dtype = str(args.get("kv_cache_dtype") or "auto")
    if dtype != "auto":
        return _KV_DTYPE_BYTES.get(dtype)
    model = _KV_DTYPE_BYTES.get(str(args.get("dtype") or "auto"))
    if model is not None:
        return model
    if str(today.get("kv_cache_dtype") or "auto") == "auto" and printed is not None:
        return _TORCH_DTYPE_BYTES.get(printed)
    return None


def _prepare(figures: StartFigures) -> _Inputs | Unknown:
    """Check today's figures and derive the KV cell, the state per request and the workspace
    (`_Inputs.workspace_gib`); an unexplained amount within the printing's rounding and one KV
    page or state slot is noise, taken as 0."""
    rules = rule_set(figures.version)
    if rules is None:
        return Unknown(f"SGLang {figures.version or '(version not known)'}: its capacity rules were not read")
    missing = [
        name
        for name in (
            "pre_model_load_gib",
            "post_model_load_gib",
            "kv_tokens",
            "kv_gib",
            "max_total_num_tokens",
        )
        if getattr(figures, name) is None
    ]
    mfs = _num(figures.server_args.get("mem_fraction_static"))
    if mfs is None:
        missing.append("mem_fraction_static")
    if missing:
        return Unknown(f"the last start did not print {', '.join(missing)}")
    assert figures.kv_tokens is not None
    assert figures.kv_gib is not None
    assert mfs is not None
    assert figures.pre_model_load_gib is not None
    assert figures.post_model_load_gib is not None
    if figures.kv_tokens <= 0:
        return Unknown("the last start's KV pool is empty")
    if figures.max_total_num_tokens is not None and figures.kv_tokens != figures.max_total_num_tokens:
        return Unknown(
            f"the first KV pool holds {figures.kv_tokens} tokens, max_total_num_tokens is "
            f"{figures.max_total_num_tokens}: a sliding-window or split pool, not modelled"
        )
    cell = figures.kv_gib * GIB / figures.kv_tokens
    state_bytes: float | None = None
    state_gib = 0.0
    reservation = 0.0
    if figures.hybrid:
        if figures.mamba_state_gib is None or not figures.mamba_cache_size:
            return Unknown("the last start's Mamba Cache line has no state sizes")
        state_bytes = figures.mamba_state_gib * GIB / figures.mamba_cache_size
        state_gib = figures.mamba_state_gib
        reservation = _reservation_gib(figures.server_args, state_bytes, rules)
    rest = figures.post_model_load_gib - figures.pre_model_load_gib * (1 - mfs)
    unexplained = rest - reservation - state_gib - figures.kv_tokens * cell / GIB
    page = int(figures.server_args.get("page_size") or 1)
    noise = PRINT_ROUNDING_GIB * 2 + (page + 1) * cell / GIB + (state_bytes or 0.0) / GIB
    workspace = unexplained if abs(unexplained) > noise else 0.0
    return _Inputs(figures, rules, cell, state_bytes, workspace)


def recompute_profile(figures: StartFigures) -> tuple[int, str] | Unknown:
    """`max_total_num_tokens` recomputed from the start's own memory lines alone (no workspace
    term): `int((post - pre x (1 - mfs) - reservation - state) GiB) // cell`, the cell from the
    KV pool line. How well the printed lines explain the pool SGLang made (bench/predict_accuracy.py)."""
    inputs = _prepare(figures)
    if isinstance(inputs, Unknown):
        return inputs
    assert figures.pre_model_load_gib is not None
    assert figures.post_model_load_gib is not None
    mfs = float(figures.server_args["mem_fraction_static"])
    rest = figures.post_model_load_gib - figures.pre_model_load_gib * (1 - mfs)
    state = figures.mamba_state_gib or 0.0
    reservation = (
        _reservation_gib(figures.server_args, inputs.state_bytes, inputs.rules) if inputs.state_bytes else 0.0
    )
    tokens = int((rest - state - reservation) * GIB) // round(inputs.cell_bytes)
    formula = (
        f"rest {figures.post_model_load_gib:.2f} - {figures.pre_model_load_gib:.2f} x (1 - {mfs}) = {rest:.2f} GiB, "
        f"- state {state:.2f} - reservation {reservation:.2f}, // cell {inputs.cell_bytes:.0f} B = {tokens}"
    )
    return tokens, formula


def learn_flag_cost(before: StartFigures, after: StartFigures) -> float | Unknown:
    """The workspace (GiB) a flag took, from the start before a try that added it (`before`) and
    the start after (`after`): what the after start's pools leave unexplained minus what the
    before start's left (the profile rule explains every modelled flag, so the rest is the new
    flag's). Unknown when either start's figures cannot be explained (module doc)."""
    earlier, later = _prepare(before), _prepare(after)
    if isinstance(earlier, Unknown):
        return earlier
    if isinstance(later, Unknown):
        return later
    return later.workspace_gib - earlier.workspace_gib


def _reservation_gib(args: Mapping[str, Any], state_bytes: float, rules: RuleSet) -> float:
    """`handle_max_mamba_cache`' speculative reservation (0.5.9 / 0.5.10): state per request x
    (max_running_requests // dp) x draft tokens, set aside before the state cache is sized."""
    if rules == "0.5.23" or _spec(args) is None:
        return 0.0
    dp = _dp_attention(args)
    running = int(args.get("max_running_requests") or 0) // dp
    drafts = int(args.get("speculative_num_draft_tokens") or 0)
    return state_bytes * running * drafts / GIB


def _mamba_ratio(args: Mapping[str, Any], rules: RuleSet) -> tuple[int, str]:
    """State slots per running request: 1 without radix cache, else 3, plus the extra buffer's
    (0.5.9 `init_memory_pool`: 1 with speculative decoding, 2 without; 0.5.10 / 0.5.23
    `_calculate_mamba_ratio`: 1 with the overlap schedule off, 2 with it on)."""
    if _on(args.get("disable_radix_cache")):
        return 1, "radix cache off: 1"
    if args.get("mamba_scheduler_strategy") != "extra_buffer":
        return MAMBA_BASE_RATIO, f"{MAMBA_BASE_RATIO}"
    if rules == "0.5.9":
        extra = 1 if _spec(args) is not None else 2
    else:
        extra = 1 if _on(args.get("disable_overlap_schedule")) else 2
    return MAMBA_BASE_RATIO + extra, f"{MAMBA_BASE_RATIO} + {extra} extra-buffer slots"


def _resolve_max_num_reqs(
    tokens: int, ctx: int, cli: int | None, dp: int, rules: RuleSet
) -> tuple[int, str, str]:
    """(pool size before the state cap, formula, source) for `rules`."""
    estimated = int(tokens / ctx * 512)
    if rules == "0.5.9":
        if cli is not None:
            return cli, f"--max-running-requests {cli}, kept as given", SRC_INIT_POOL_059
        value = min(max(estimated, 2048), 4096)
        return value, f"min(max(int({tokens}/{ctx}*512)={estimated}, 2048), 4096)", SRC_INIT_POOL_059
    if rules == "0.5.23":
        if cli is not None:
            value = min(max(1, cli // dp), tokens // 2)
            return value, f"min(max(1, {cli}//{dp}), {tokens}//2)", SRC_RESOLVE_REQS_0523
        clamp = max(min(estimated, 4096), 2048)
        return (
            min(clamp, tokens // 2),
            f"min(clamp({estimated}, 2048, 4096), {tokens}//2)",
            SRC_RESOLVE_REQS_0523,
        )
    clamp = max(min(estimated, 4096), 2048)
    if cli is not None:
        return (
            min(cli // dp, clamp),
            f"min({cli}//{dp}, clamp(int({tokens}/{ctx}*512)={estimated}, 2048, 4096))",
            SRC_RESOLVE_REQS,
        )
    return (
        min(clamp, tokens // 2),
        f"min(clamp(int({tokens}/{ctx}*512)={estimated}, 2048, 4096), {tokens}//2)",
        SRC_RESOLVE_REQS,
    )


def _new_mem_fraction(
    inputs: _Inputs, new: Mapping[str, Any], touched: frozenset[str], cite: str
) -> tuple[float | Unknown, list[Step]]:
    """An explicit `--mem-fraction-static` is kept; a derived one is re-derived when its inputs
    moved, by the ratio of `round((gpu - reserved) / gpu, 3)` now and then (which keeps a VLM's
    `adjust_mem_fraction_for_vlm` factor)."""
    today = float(inputs.figures.server_args["mem_fraction_static"])
    given = _num(new.get("mem_fraction_static"))
    if "mem_fraction_static" in touched and given is not None:
        return given, [
            Step("mem_fraction_static", f"{given} as given", f"server_args.py ServerArgs ({cite})")
        ]
    explicit_today = "mem_fraction_static" in inputs.figures.explicit
    if "mem_fraction_static" in touched and explicit_today:
        return Unknown(
            "without --mem-fraction-static it is derived from the model (VLM factor) and the GPU"
        ), []
    if explicit_today:
        return today, [
            Step("mem_fraction_static", f"{today}, as given at the last start", f"server_args.py ({cite})")
        ]
    old_args = inputs.figures.server_args
    reserve_inputs: tuple[str, ...] = ("chunked_prefill_size", "cuda_graph_max_bs", "speculative_algorithm")
    if inputs.rules == "0.5.23":  # memory_hook.py: the capture sizes follow these too
        reserve_inputs += ("max_running_requests", "max_total_tokens")
    elif _piecewise_on(new, inputs.rules):  # the piecewise token list's largest size follows it
        reserve_inputs += ("max_total_tokens",)
    moved = [k for k in reserve_inputs if new.get(k) != old_args.get(k)]
    if not moved:
        return today, [
            Step(
                "mem_fraction_static",
                f"{today}, unchanged (derived, its inputs did not move)",
                f"{SRC_GPU_MEMORY} ({cite})",
            )
        ]
    gpu = inputs.figures.gpu_total_mib
    if gpu is None:
        return Unknown("mem_fraction_static is derived from GPU memory, not recorded for this start"), []
    steps: list[Step] = []
    if inputs.rules != "0.5.23" and _piecewise_on(new, inputs.rules):
        tokens = _piecewise_tokens(inputs.figures, new)
        if isinstance(tokens, Unknown):
            return tokens, []
        new = {**new, "piecewise_cuda_graph_tokens": tokens}
        steps.append(
            Step(
                "piecewise_cuda_graph_tokens",
                f"sizes up to {tokens[-1] if tokens else 0}: {len(tokens)} graphs",
                f"server_args.py _generate_piecewise_cuda_graph_tokens ({cite})",
            )
        )
    before, after = reserved_mem_mb(old_args, gpu, inputs.rules), reserved_mem_mb(new, gpu, inputs.rules)
    if isinstance(before, Unknown):
        return before, []
    if isinstance(after, Unknown):
        return after, []
    base_before = round((gpu - before) / gpu, 3)
    base_after = round((gpu - after) / gpu, 3)
    factor = today / base_before
    if not 0.75 <= factor <= 1.0001:
        return Unknown(f"today's mem_fraction_static {today} is not the reserve rule's {base_before}"), []
    value = today * base_after / base_before
    formula = (
        f"{today} x round(({gpu:.0f} - {after:.0f})/{gpu:.0f}, 3)={base_after} / "
        f"round(({gpu:.0f} - {before:.0f})/{gpu:.0f}, 3)={base_before} = {value:.4f}"
    )
    return value, [
        *steps,
        Step("mem_fraction_static (derived: reserve moved)", formula, f"{SRC_GPU_MEMORY} ({cite})"),
    ]


def _run(inputs: _Inputs, applied: AppliedChange, jitter: float) -> _Outcome:
    f, rules = inputs.figures, inputs.rules
    cite = f"SGLang {rules}"
    steps: list[Step] = []
    assert f.pre_model_load_gib is not None
    assert f.post_model_load_gib is not None
    assert f.kv_tokens is not None
    old = f.server_args
    # parsed max_running_requests after post-init
    new = applied.args
    if "max_running_requests" in applied.touched:
        raw = _int(new.get("max_running_requests"))
    else:
        raw = _int(old.get("max_running_requests")) if "max_running_requests" in f.explicit else None
    parsed = raw
    if raw is None and _spec(new) is not None:
        parsed = SPECULATIVE_MAX_RUNNING
        steps.append(
            Step(
                "parsed max_running_requests",
                f"speculative {_spec(new)} without --max-running-requests: {SPECULATIVE_MAX_RUNNING}",
                f"{SRC_SPECULATIVE} ({cite})",
            )
        )
    args = dict(new)
    args["max_running_requests"] = parsed
    steps_n, topk = _int(args.get("speculative_num_steps")), _int(args.get("speculative_eagle_topk"))
    if _spec(args) not in (None, "NGRAM") and topk == 1 and steps_n is not None:
        drafts = _int(args.get("speculative_num_draft_tokens"))
        if drafts != steps_n + 1:
            args["speculative_num_draft_tokens"] = steps_n + 1
            steps.append(
                Step(
                    "speculative_num_draft_tokens",
                    f"topk 1: num_steps {steps_n} + 1 = {steps_n + 1} (the {drafts} asked is replaced)",
                    f"{SRC_SPECULATIVE} ({cite})",
                )
            )
    if (
        inputs.state_bytes is not None
        and _spec(args) is not None
        and args.get("speculative_num_draft_tokens") is None
    ):
        return _unknown_outcome(
            Unknown("speculative draft token count is derived from the model, not printed"), parsed, steps
        )
    # the chunked prefill / graph defaults a removed flag returns to
    tp = int(args.get("tp_size") or 1)
    for key, index in (("chunked_prefill_size", 0), ("cuda_graph_max_bs", 1)):
        if args.get(key) is None:
            if f.gpu_total_mib is None:
                unknown = Unknown(f"{key} default depends on GPU memory, not recorded")
                return _unknown_outcome(unknown, parsed, steps)
            args[key] = memory_tier(f.gpu_total_mib, tp, rules)[index]
            steps.append(Step(key, f"memory tier default {args[key]}", f"{SRC_GPU_MEMORY} ({cite})"))
    mfs, mfs_steps = _new_mem_fraction(inputs, args, applied.touched, cite)
    steps += mfs_steps
    if isinstance(mfs, Unknown):
        return _unknown_outcome(mfs, parsed, steps)
    args["mem_fraction_static"] = mfs
    pre, post = f.pre_model_load_gib + jitter, f.post_model_load_gib + jitter
    learned = sum(gib for _, gib in applied.workspaces)
    for cost, gib in applied.workspaces:
        steps.append(
            Step(f"workspace of {cost.flag}", f"{gib:+.2f} GiB before the profile (learned)", cost.source)
        )
    rest = post - pre * (1 - mfs) - inputs.workspace_gib - learned
    steps.append(
        Step(
            "rest memory",
            f"post {post:.2f} - pre {pre:.2f} x (1 - {mfs:.4f}) - unexplained at the last start "
            f"{inputs.workspace_gib:+.2f}"
            + (f" - learned workspaces {learned:+.2f}" if learned else "")
            + f" = {rest:.3f} GiB",
            f"{SRC_PROFILE} ({cite})",
        )
    )
    # the hybrid state cache
    state_size: int | None = None
    state_gib = 0.0
    reservation = 0.0
    kv_rest = rest
    ratio = MAMBA_BASE_RATIO
    if inputs.state_bytes is not None:
        per_req = inputs.state_bytes
        dp = _dp_attention(args)
        explicit_size = _int(args.get("max_mamba_cache_size"))
        if rules == "0.5.23":
            # An explicit size is no shortcut either: 0.5.23 resolves the scheduler strategy itself
            # (`auto` -> extra_buffer with the overlap schedule on: 5 slots a request, not 3), adds
            # a padding slot and solves the speculative intermediate states together with the KV
            # pool; a guess here was a confident wrong call (bench/predict_accuracy.py).
            return _unknown_outcome(
                Unknown(
                    "0.5.23 sizes the state cache jointly with the KV pool (kv_cache_configurator.py), not modelled"
                ),
                parsed,
                steps,
            )
        else:
            reservation = _reservation_gib(args, per_req, rules)
            total = rest - reservation
            if explicit_size is not None:
                state_size, rule_text = explicit_size // dp, f"--max-mamba-cache-size {explicit_size} // {dp}"
            elif _on(args.get("disable_radix_cache")) and parsed is not None:
                state_size, rule_text = parsed // dp, f"no radix cache: max_running_requests {parsed} // {dp}"
            else:
                r = float(args.get("mamba_full_memory_ratio") or 0.9)
                state_size = max(0, int(total * r / (1 + r) * GIB) // round(per_req))
                rule_text = f"int(({rest:.3f} - reservation {reservation:.3f}) x {r}/(1+{r}) GiB) // {per_req / 2**20:.2f} MiB"
        state_gib = state_size * per_req / GIB
        kv_rest = rest - reservation - state_gib
        steps.append(
            Step(
                "max_mamba_cache_size",
                f"{rule_text} = {state_size} slots ({state_gib:.2f} GiB)",
                f"{SRC_MAMBA} ({cite})",
            )
        )
        ratio, ratio_text = _mamba_ratio(args, rules)
        steps.append(
            Step(
                "state slots per request",
                ratio_text,
                f"{SRC_MAMBA_RATIO} ({cite})",
            )
        )
    # the KV pool
    old_bytes = _kv_bytes(old, f.kv_dtype, old)
    new_bytes = _kv_bytes(args, f.kv_dtype, old)
    cell = inputs.cell_bytes
    if old_bytes != new_bytes:
        if old_bytes is None or new_bytes is None:
            return _unknown_outcome(
                Unknown("the KV dtype 'auto' is the model's, and this start did not print it"), parsed, steps
            )
        cell = cell * new_bytes / old_bytes
    profiled = max(0, int(kv_rest * GIB) // round(cell)) if kv_rest > 0 else 0
    tokens = profiled
    formula = f"int({kv_rest:.3f} GiB) // cell {cell:.0f} B = {profiled}"
    cap = _int(args.get("max_total_tokens"))
    if cap is not None and cap < tokens:
        tokens = cap
        formula += f", capped by --max-total-tokens {cap}"
    page = int(args.get("page_size") or 1)
    tokens = tokens // page * page
    if page > 1:
        formula += f", down to a multiple of page_size {page}"
    today_capped = _int(old.get("max_total_tokens")) is not None and f.max_total_num_tokens == _int(
        old.get("max_total_tokens")
    )
    if today_capped and (cap is None or cap > tokens):
        return _unknown_outcome(
            Unknown("today's pool was capped by --max-total-tokens: its true profile was not printed"),
            parsed,
            steps,
        )
    steps.append(
        Step("max_total_num_tokens", f"{formula} -> {tokens}", f"{SRC_PROFILE}, {SRC_USER_LIMIT} ({cite})")
    )
    # the request pool
    ctx_value = _int(args.get("context_length"))
    if ctx_value is None:
        if _int(old.get("context_length")) is not None:
            return _unknown_outcome(
                Unknown("without --context-length the model's own context length applies, not printed"),
                parsed,
                steps,
            )
        ctx_value = f.context_len
    if ctx_value is None or ctx_value <= 0:
        return _unknown_outcome(Unknown("context_len not printed"), parsed, steps)
    dp = _dp_attention(args)
    if tokens <= 0:
        mrr = 0
        steps.append(
            Step(
                "max_running_requests",
                "no KV pool: the start fails (Not enough memory)",
                f"{SRC_PROFILE} ({cite})",
            )
        )
    else:
        mrr, mrr_formula, source = _resolve_max_num_reqs(tokens, ctx_value, parsed, dp, rules)
        if state_size is not None:
            mrr_formula += f", min(.., max_mamba_cache_size {state_size} // {ratio})"
            mrr = min(mrr, state_size // ratio)
        steps.append(Step("max_running_requests", f"{mrr_formula} = {mrr}", f"{source} ({cite})"))
    kv_gib = tokens * cell / GIB
    available = _available(
        inputs, args, jitter, tokens, mrr, kv_gib, state_gib + reservation, ctx_value, steps
    )
    return _Outcome(mfs, parsed, tokens, mrr, state_size, kv_gib, state_gib, available, tuple(steps))


def _available(
    inputs: _Inputs,
    args: Mapping[str, Any],
    jitter: float,
    tokens: int,
    mrr: int,
    kv_gib: float,
    state_gib: float,
    ctx: int,
    steps: list[Step],
) -> float | Unknown:
    """Free memory at steady state: today's, plus the jitter, minus what the pools grow by.
    Unknown when the captured CUDA graphs or the draft model's pool would change: their cost
    per graph or per token is not printed."""
    f = inputs.figures
    old = f.server_args
    if f.available_gpu_mem_gb is None or f.max_running_requests is None or f.context_len is None:
        return Unknown("the last start printed no available_gpu_mem")
    for key in (
        "cuda_graph_max_bs",
        "chunked_prefill_size",
        "speculative_algorithm",
        "speculative_num_draft_tokens",
        "max_total_tokens",
    ):
        if args.get(key) != old.get(key):
            return Unknown(f"{key} changes the captured graphs or the draft model")
    max_bs = int(args.get("cuda_graph_max_bs") or 0)
    if min(mrr, max_bs) != min(f.max_running_requests, max_bs) and not _on(args.get("disable_cuda_graph")):
        return Unknown(
            "the CUDA graphs captured follow max_running_requests, their memory per graph is not printed"
        )
    if _spec(args) is not None and tokens != f.max_total_num_tokens:
        return Unknown("the draft model's KV pool follows max_total_num_tokens, its cell is not printed")
    drafts = int(args.get("speculative_num_draft_tokens") or 0) if _spec(args) is not None else 0
    req_new = mrr * (ctx + 4 + drafts) * 4 / GIB
    req_old = f.max_running_requests * (f.context_len + 4 + drafts) * 4 / GIB
    old_state = (f.mamba_state_gib or 0.0) + (
        _reservation_gib(old, inputs.state_bytes, inputs.rules) if inputs.state_bytes else 0.0
    )
    old_pool = (f.kv_gib or 0.0) + old_state + req_old
    new_pool = kv_gib + state_gib + req_new
    value = f.available_gpu_mem_gb + jitter - (new_pool - old_pool)
    steps.append(
        Step(
            "available_gpu_mem",
            f"today {f.available_gpu_mem_gb:.2f} + jitter {jitter:+.2f} - (pools {new_pool:.2f} - {old_pool:.2f}) = {value:.2f} GB",
            f"{SRC_KV_POOL}, {SRC_REQ_POOL} (SGLang {inputs.rules})",
        )
    )
    return value


def _unknown_outcome(why: Unknown, parsed: int | None, steps: list[Step]) -> _Outcome:
    steps.append(Step("stopped", str(why), "-"))
    return _Outcome(why, parsed, why, why, why, why, why, why, tuple(steps))


def _band(values: Sequence[float | int | Unknown | None]) -> Figure:
    """The centre run's value (zero jitter) and the extremes over the whole grid."""
    unknown = next((v for v in values if isinstance(v, Unknown)), None)
    if unknown is not None:
        return unknown
    numbers = [float(v) for v in values if v is not None and not isinstance(v, Unknown)]
    if len(numbers) != len(values):
        return Unknown("not set")
    return Band(numbers[len(numbers) // 2], min(numbers), max(numbers))


def jitter_band(pre_model_load_history: Sequence[float]) -> tuple[float, str]:
    """(half-width in GiB, what it is): the spread of this target's own free memory before the
    weights across its starts when it has two or more, else `DEFAULT_JITTER_GIB`, said so."""
    if len(pre_model_load_history) >= 2:
        spread = max(pre_model_load_history) - min(pre_model_load_history)
        half = max(spread * 1.5, 2 * PRINT_ROUNDING_GIB)
        return half, (
            f"+-{half:.2f} GiB: 1.5 x the spread of free memory before the weights across this "
            f"target's {len(pre_model_load_history)} observed starts ({spread:.2f} GiB)"
        )
    return DEFAULT_JITTER_GIB, (
        f"+-{DEFAULT_JITTER_GIB:.2f} GiB: no history yet, so the release's known jitter source "
        "(free memory measured anew at each start, get_available_gpu_memory) at an assumed bound"
    )


def predict(
    figures: StartFigures,
    changes: Sequence[Change],
    *,
    jitter_gib: float = DEFAULT_JITTER_GIB,
    band_source: str = "",
    expectations: Sequence[Expectation] = (),
    learned: Mapping[str, LearnedCost] | None = None,
) -> Prediction:
    """Predict the start after `changes` from today's `figures` (module doc); a flag the rules do
    not compute is predicted from its `learned` workspace when there is one."""
    described = tuple(change.describe() for change in changes)
    rules = rule_set(figures.version)
    today = today_figures(figures)
    applied = apply_change(figures.server_args, changes, learned)
    inputs = _prepare(figures)
    if applied.unmodelled:
        inputs = Unknown(f"the memory effect of {', '.join(applied.unmodelled)} is not modelled")
    if isinstance(inputs, Unknown):
        figures_out = tuple(PredictedFigure(name, today.get(name), inputs) for name in METRICS)
        prediction = Prediction(
            figures.version, rules, described, figures_out, (), band_source, unknown=inputs.why
        )
        return replace(prediction, calls=tuple(_call(prediction, e) for e in expectations))
    half = jitter_gib + PRINT_ROUNDING_GIB
    grid = [half * (i - BAND_POINTS // 2) / (BAND_POINTS // 2) for i in range(BAND_POINTS)]
    runs = [_run(inputs, applied, j) for j in grid]
    centre = runs[BAND_POINTS // 2]
    predicted = {
        "mem_fraction_static": _band([r.mem_fraction_static for r in runs]),
        "parsed.max_running_requests": _band([r.parsed_max_running_requests for r in runs])
        if centre.parsed_max_running_requests is not None
        else Unknown("not set: derived from the KV pool"),
        "max_running_requests": _band([r.max_running_requests for r in runs]),
        "max_total_num_tokens": _band([r.max_total_num_tokens for r in runs]),
        "max_mamba_cache_size": _band([r.max_mamba_cache_size for r in runs])
        if figures.hybrid
        else Unknown("not a hybrid model"),
        "kv_memory_gb": _band([r.kv_gib for r in runs]),
        "state_memory_gb": _band([r.state_gib for r in runs]) if figures.hybrid else Band(0.0, 0.0, 0.0),
        "available_gpu_mem_gb": _band([r.available_gpu_mem_gb for r in runs]),
    }
    steps = centre.steps
    dp = _dp_attention(figures.server_args)
    per_worker = predicted["max_running_requests"]
    if dp > 1 and isinstance(per_worker, Band):
        # the capacity line is one DP worker's; flagbot's expectations compare the total
        predicted["max_running_requests"] = Band(
            per_worker.value * dp, per_worker.low * dp, per_worker.high * dp
        )
        steps += (
            Step(
                "max_running_requests (total)",
                f"{shown_number(per_worker.value)} per DP worker x dp_size {dp}",
                "scheduler.py capacity line (per DP worker under DP attention)",
            ),
        )
    figures_out = tuple(PredictedFigure(name, today.get(name), predicted[name]) for name in METRICS)
    prediction = Prediction(figures.version, rules, described, figures_out, steps, band_source)
    return replace(prediction, calls=tuple(_call(prediction, e) for e in expectations))


def _dp_attention(args: Mapping[str, Any]) -> int:
    """The DP workers the capacity line's `max_running_requests` is one of (1 without DP attention)."""
    return int(args.get("dp_size") or 1) if _on(args.get("enable_dp_attention")) else 1


def today_figures(f: StartFigures) -> dict[str, float | None]:
    """A start's figures by the names a prediction gives (`METRICS`); `max_running_requests` the
    total over DP workers, as observe stores it. Also what a try's start measured, to score the
    prediction made for it."""
    parsed = _int(f.server_args.get("max_running_requests"))
    per_worker = f.max_running_requests
    return {
        "mem_fraction_static": _num(f.server_args.get("mem_fraction_static")),
        "parsed.max_running_requests": parsed,
        "max_running_requests": None if per_worker is None else per_worker * _dp_attention(f.server_args),
        "max_total_num_tokens": f.max_total_num_tokens,
        "max_mamba_cache_size": f.mamba_cache_size,
        "kv_memory_gb": f.kv_gib,
        "state_memory_gb": f.mamba_state_gib if f.hybrid else 0.0,
        "available_gpu_mem_gb": f.available_gpu_mem_gb,
    }


def _call(prediction: Prediction, expectation: Expectation) -> ExpectationCall:
    """pass / fail when the whole band is on one side of `expectation`, else undecided."""
    name = _METRIC_ALIASES.get(expectation.metric, expectation.metric)
    if name not in METRICS:
        return ExpectationCall(
            expectation, "undecided", f"{expectation.metric} is not a capacity figure the model predicts"
        )
    figure = prediction.figure(name)
    if isinstance(figure.predicted, Unknown):
        return ExpectationCall(expectation, "undecided", str(figure.predicted))
    reference = Reference(figure.today, "today's start") if figure.today is not None else None
    ends = [
        evaluate(expectation, value, reference) for value in (figure.predicted.low, figure.predicted.high)
    ]
    if all(end.outcome == "pass" for end in ends):
        return ExpectationCall(expectation, "pass", f"the whole band {figure.predicted.shown()} passes")
    if all(end.outcome == "fail" for end in ends):
        return ExpectationCall(expectation, "fail", f"the whole band {figure.predicted.shown()} fails")
    return ExpectationCall(expectation, "undecided", f"the band {figure.predicted.shown()} straddles it")


def is_capacity_metric(metric: str) -> bool:
    return _METRIC_ALIASES.get(metric, metric) in METRICS


__all__ = [
    "DEFAULT_JITTER_GIB",
    "METRICS",
    "MODELLED_FLAGS",
    "Band",
    "ExpectationCall",
    "LearnedCost",
    "PredictInputError",
    "Prediction",
    "StartFigures",
    "Step",
    "Unknown",
    "figures_json",
    "is_capacity_metric",
    "jitter_band",
    "learn_flag_cost",
    "predict",
    "recompute_profile",
    "rule_set",
    "server_args_key",
    "shown_number",
    "start_figures",
    "today_figures",
]
