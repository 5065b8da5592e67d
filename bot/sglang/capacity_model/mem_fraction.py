"""`mem_fraction_static` after a change: kept when explicit, re-derived when its inputs moved.

0.5.9 / 0.5.10 re-derive it by the reserve rule's ratio to today's; 0.5.23 by its memory hook
(`arg_groups/memory_hook.py`). One responsibility of the run (`arithmetic.run_arithmetic`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.sglang.capacity_model.figures import (
    Step,
    Unknown,
    as_float,
    as_int,
)
from bot.sglang.capacity_model.inputs import ArithmeticInputs
from bot.sglang.capacity_model.rules import (
    SRC_MEMORY_HOOK_0523,
    decode_graph_max_bs_0_5_23,
    gpu_memory_source,
    graph_phase,
    memory_hook_unsupported_0_5_23,
    piecewise_on,
    piecewise_tokens,
    prefill_graph_sizes_0_5_23,
    reserved_mem_mb,
    reserved_mem_mb_0_5_23,
)


def new_mem_fraction(
    inputs: ArithmeticInputs,
    new: Mapping[str, Any],
    touched: frozenset[str],
    hook_running: int | None,
    cite: str,
) -> tuple[float | Unknown, list[Step]]:
    """An explicit `--mem-fraction-static` is kept; a derived one is re-derived when its inputs
    moved, by the ratio of `round((gpu - reserved) / gpu, 3)` now and then (which keeps a VLM's
    `adjust_mem_fraction_for_vlm` factor)."""
    today = float(inputs.figures.server_args["mem_fraction_static"])
    given = as_float(new.get("mem_fraction_static"))
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
    if inputs.rules == "0.5.23" or piecewise_on(new, inputs.rules):
        # the prefill (0.5.23) or piecewise (0.5.10) graph sizes follow it
        reserve_inputs += ("max_total_tokens",)
    moved = [k for k in reserve_inputs if new.get(k) != old_args.get(k)]
    if inputs.rules == "0.5.23":
        # memory_hook.py caps the decode graph by the --max-running-requests it sees (the one
        # given: the speculative 48 comes later), so compare what was given
        today_running = (
            as_int(old_args.get("max_running_requests"))
            if "max_running_requests" in inputs.figures.explicit
            else None
        )
        if hook_running != today_running:
            moved.append("max_running_requests")
    if not moved:
        return today, [
            Step(
                "mem_fraction_static",
                f"{today}, unchanged (derived, its inputs did not move)",
                f"{gpu_memory_source(inputs.rules)} ({cite})",
            )
        ]
    gpu = inputs.figures.gpu_total_mib
    if gpu is None:
        return Unknown("mem_fraction_static is derived from GPU memory, not recorded for this start"), []
    if inputs.rules == "0.5.23":
        return new_mem_fraction_0_5_23(inputs, new, touched, hook_running, gpu, cite)
    steps: list[Step] = []
    if piecewise_on(new, inputs.rules):
        tokens = piecewise_tokens(inputs.figures, new)
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
    scaled = _scaled_by_reserve(
        today, gpu, reserved_mem_mb(old_args, gpu, inputs.rules), reserved_mem_mb(new, gpu, inputs.rules)
    )
    if isinstance(scaled, Unknown):
        return scaled, []
    value, formula = scaled
    return value, [
        *steps,
        Step(
            "mem_fraction_static (derived: reserve moved)",
            formula,
            f"{gpu_memory_source(inputs.rules)} ({cite})",
        ),
    ]


def _scaled_by_reserve(
    today: float, gpu: float, before: float | Unknown, after: float | Unknown
) -> tuple[float, str] | Unknown:
    """Today's derived `mem_fraction_static` moved by the reserve: times
    `round((gpu - after) / gpu, 3)` over `round((gpu - before) / gpu, 3)`, which keeps a VLM's
    `adjust_mem_fraction_for_vlm` factor; unknown when today's value is not within that factor
    (0.75..1) of the rule's."""
    if isinstance(before, Unknown):
        return before
    if isinstance(after, Unknown):
        return after
    base_before, base_after = round((gpu - before) / gpu, 3), round((gpu - after) / gpu, 3)
    if not 0.75 <= today / base_before <= 1.0001:
        return Unknown(f"today's mem_fraction_static {today} is not the reserve rule's {base_before}")
    value = today * base_after / base_before
    formula = (
        f"{today} x round(({gpu:.0f} - {after:.0f})/{gpu:.0f}, 3)={base_after} / "
        f"round(({gpu:.0f} - {before:.0f})/{gpu:.0f}, 3)={base_before} = {value:.4f}"
    )
    return value, formula


def new_mem_fraction_0_5_23(
    inputs: ArithmeticInputs,
    new: Mapping[str, Any],
    touched: frozenset[str],
    hook_running: int | None,
    gpu: float,
    cite: str,
) -> tuple[float | Unknown, list[Step]]:
    """0.5.23's derived `mem_fraction_static` (`arg_groups/memory_hook.py`
    `handle_gpu_memory_settings`) re-derived after a change: today's value times
    `round((gpu - reserved) / gpu, 3)` after over before, the reserve by
    `reserved_mem_mb_0_5_23`. `hook_running` is the `--max-running-requests` the hook sees (the
    one given, not the speculative 48 set later). Today's printed graph sizes and value must be
    the rule's own, which also tells an MLA backend's prefill graph reserve from the others';
    anything else is unknown."""
    figures = inputs.figures
    old = figures.server_args
    today = float(old["mem_fraction_static"])
    for args in (old, new):
        unsupported = memory_hook_unsupported_0_5_23(args)
        if unsupported is not None:
            return unsupported, []
    if {"cuda_graph_max_bs", "speculative_algorithm"} & touched:
        return Unknown(
            "0.5.23 sizes the graphs from cuda_graph_config and the speculative hook: not modelled"
        ), []
    today_running = (
        as_int(old.get("max_running_requests")) if "max_running_requests" in figures.explicit else None
    )
    decode_today = decode_graph_max_bs_0_5_23(old, gpu, today_running)
    decode_new = decode_graph_max_bs_0_5_23(new, gpu, hook_running)
    if isinstance(decode_today, Unknown):
        return decode_today, []
    if isinstance(decode_new, Unknown):
        return decode_new, []
    printed_decode = graph_phase(old, "decode") or {}
    if as_int(printed_decode.get("max_bs")) != decode_today:
        return Unknown("today's decode CUDA graph max_bs is not the memory hook's rule"), []
    prefill_on = (graph_phase(old, "prefill") or {}).get("backend") != "disabled"
    mla = False
    if prefill_on:
        matching = []
        for candidate in (False, True):
            reserve = reserved_mem_mb_0_5_23(old, gpu, decode_today, candidate)
            if not isinstance(reserve, Unknown) and round((gpu - reserve) / gpu, 3) == round(today, 3):
                matching.append(candidate)
        if len(matching) != 1:
            return Unknown(
                "today's mem_fraction_static does not tell the prefill graph reserve (MLA or not, a VLM factor)"
            ), []
        mla = matching[0]
        printed_sizes = (graph_phase(old, "prefill") or {}).get("bs")
        if not isinstance(printed_sizes, list) or printed_sizes != prefill_graph_sizes_0_5_23(old, mla):
            return Unknown("today's prefill CUDA graph sizes are not the memory hook's rule"), []
    scaled = _scaled_by_reserve(
        today,
        gpu,
        reserved_mem_mb_0_5_23(old, gpu, decode_today, mla),
        reserved_mem_mb_0_5_23(new, gpu, decode_new, mla),
    )
    if isinstance(scaled, Unknown):
        return scaled, []
    value, formula = scaled
    formula = f"decode graph max_bs {decode_today} -> {decode_new}; {formula}"
    source = f"{SRC_MEMORY_HOOK_0523} handle_gpu_memory_settings, reserve_for_graph_mb ({cite})"
    return value, [Step("mem_fraction_static (derived: reserve moved)", formula, source)]


__all__ = ["new_mem_fraction"]
