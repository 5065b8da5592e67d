"""Today's start, checked and explained: the figures the arithmetic runs on, and its answer's shape.

Why apart from the run: the prediction, the run and the calibration (`learn_flag_cost`,
`recompute_profile`) all start from what today's start printed and what its pools leave
unexplained; the run and its helpers (`mem_fraction`, `state_cache`) take these inputs and give
an `Outcome` without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.sglang.capacity_model.figures import (
    GIB,
    PRINT_ROUNDING_GIB,
    RuleSet,
    StartFigures,
    Step,
    Unknown,
    as_float,
    as_int,
    dp_attention_workers,
    rule_set,
    switched_on,
)
from bot.sglang.capacity_model.rules import (
    mamba_ratio,
    reservation_gib,
    resolve_max_num_reqs,
    state_reservation_0_5_23,
)


@dataclass(frozen=True)
class ArithmeticInputs:
    """Today's figures checked for completeness, with what was derived from them."""

    figures: StartFigures
    rules: RuleSet
    cell_bytes: float
    state_bytes: float | None
    """State per request: the printed pool over its `size + 1` slots (`SRC_MAMBA_POOL`)."""
    workspace_gib: float
    """What the pools of the last start do not explain of the rest its lines give: positive for
    memory a flag took before the profile (its workspace), negative when SGLang's profile saw
    more free memory than the `Load weight end` line printed. Carried into the prediction."""
    today_state_gib: float = 0.0
    """What today's profile took for the state cache and its speculative reservation (0.5.9 /
    0.5.10 count `size` slots, 0.5.23 `size + 1`), as `recompute_profile` subtracts it."""
    today_reservation_gib: float = 0.0
    """Today's speculative intermediate states, allocated next to the printed state pool."""
    today_rest_gib: float = 0.0
    """The rest today's memory lines give, `post - pre x (1 - mem_fraction_static)`, before any
    workspace: what a change's rest is measured against."""
    rounding_gib: float = 0.0
    """What today's pools leave unexplained when it is within the printing's rounding (the
    workspace is then 0): the run weighs it against the printed figures' rounding bounds
    (`arithmetic.calibration`) instead of dropping it."""


@dataclass(frozen=True)
class Outcome:
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


def prepare_inputs(figures: StartFigures) -> ArithmeticInputs | Unknown:
    """Check today's figures and derive the KV cell, the state per request and the workspace
    (`ArithmeticInputs.workspace_gib`); an unexplained amount within the printing's rounding and one KV
    page or state slot is no workspace: it is kept as `rounding_gib`, for the run to weigh."""
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
    mfs = as_float(figures.server_args.get("mem_fraction_static"))
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
    if figures.swa_tokens is not None and rules == "0.5.23":
        return Unknown("0.5.23's hybrid sliding-window pool sizing (pool_configurator.py) is not modelled")
    # a sliding-window model's kv_gib is both pools (SWAKVPool): the cell is per full-pool token, the
    # window pool's share at swa_full_tokens_ratio included, which is _resolve_hybrid_swa_tokens'
    # denominator (full_tokens = total memory / (F x n_full + ratio x S x n_swa))
    cell = figures.kv_gib * GIB / figures.kv_tokens
    state_bytes: float | None = None
    today_state = today_reservation = 0.0
    if figures.hybrid:
        if figures.mamba_state_gib is None or not figures.mamba_cache_size:
            return Unknown("the last start's Mamba Cache line has no state sizes")
        size = figures.mamba_cache_size
        state_bytes = figures.mamba_state_gib * GIB / (size + 1)
        if rules == "0.5.23":
            found = _today_reservation_0_5_23(figures, state_bytes)
            if isinstance(found, Unknown):
                return found
            today_reservation = found
            today_state = (size + 1) * state_bytes / GIB + today_reservation
        else:
            today_reservation = reservation_gib(figures.server_args, state_bytes, rules)
            today_state = size * state_bytes / GIB + today_reservation
    rest = figures.post_model_load_gib - figures.pre_model_load_gib * (1 - mfs)
    unexplained = rest - today_state - figures.kv_tokens * cell / GIB
    page = int(figures.server_args.get("page_size") or 1)
    noise = PRINT_ROUNDING_GIB * 2 + (page + 1) * cell / GIB + (state_bytes or 0.0) / GIB
    workspace = unexplained if abs(unexplained) > noise else 0.0
    return ArithmeticInputs(
        figures,
        rules,
        cell,
        state_bytes,
        workspace,
        today_state,
        today_reservation,
        today_rest_gib=rest,
        rounding_gib=unexplained - workspace,
    )


def _today_reservation_0_5_23(figures: StartFigures, state_bytes: float) -> float | Unknown:
    """The speculative intermediate states 0.5.23's `_handle_max_mamba_cache` set aside at
    today's start (`state_reservation_0_5_23`), next to its `size + 1` slots. Unknown for the paths the
    rules do not follow (pipeline stages, ReplaySSM), and when today's capacity line is not what
    `resolve_max_num_reqs` gives with this ratio: an input the start did not print (an
    environment variable such as `SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK`) moved it."""
    args = figures.server_args
    if int(args.get("pp_size") or 1) > 1:
        return Unknown("0.5.23 sizes a pipeline stage's state cache by its share of the layers: not modelled")
    if switched_on(args.get("enable_linear_replayssm_spec")):
        return Unknown("0.5.23's ReplaySSM state budget is not modelled")
    assert figures.mamba_cache_size is not None
    size = figures.mamba_cache_size
    ratio = mamba_ratio(args, "0.5.23")
    if isinstance(ratio, Unknown):
        return ratio
    if figures.max_running_requests is not None and figures.context_len and figures.kv_tokens:
        dp = dp_attention_workers(args)
        pool, _, _ = resolve_max_num_reqs(
            figures.kv_tokens, figures.context_len, as_int(args.get("max_running_requests")), dp, "0.5.23"
        )
        expected = min(pool, size // ratio[0])
        if expected != figures.max_running_requests:
            return Unknown(
                f"today's max_running_requests {figures.max_running_requests} is not 0.5.23's "
                f"min({pool}, {size} // {ratio[0]}) = {expected}: an input the start did not print moved it"
            )
    reservation, _ = state_reservation_0_5_23(args, state_bytes, size, ratio[0])
    return reservation


__all__ = ["ArithmeticInputs", "Outcome", "prepare_inputs"]
