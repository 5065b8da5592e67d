"""The hybrid state cache after a change: its size, memory and speculative reservation.

0.5.9 / 0.5.10 `handle_max_mamba_cache`, 0.5.23 `_handle_max_mamba_cache`. One responsibility of
the run (`arithmetic.run_arithmetic`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.sglang.capacity_model.figures import (
    GIB,
    Step,
    Unknown,
    as_int,
    dp_attention_workers,
    switched_on,
)
from bot.sglang.capacity_model.inputs import ArithmeticInputs
from bot.sglang.capacity_model.rules import (
    SRC_MAMBA,
    SRC_MAMBA_0523,
    SRC_MAMBA_POOL,
    SRC_MAMBA_RATIO,
    SRC_MAMBA_RATIO_0523,
    mamba_ratio,
    reservation_gib,
    state_cache_size_0_5_23,
    state_reservation_0_5_23,
)


def state_cache_after(
    inputs: ArithmeticInputs,
    args: Mapping[str, Any],
    touched: frozenset[str],
    rest: float,
    parsed: int | None,
    cite: str,
    *,
    slots_rest: float | None = None,
) -> tuple[int, float, float, int, list[Step]] | Unknown:
    """The hybrid state cache after the change: (max_mamba_cache_size, the pool's GiB with its
    padding slot, the speculative reservation's GiB, state slots per request, steps).

    0.5.9 / 0.5.10 `handle_max_mamba_cache`: the reservation first, then an explicit size, the
    request limit without radix cache, or the ratio split; the profile counts `size` slots.
    0.5.23 `_handle_max_mamba_cache`: the same branches, each counting the padding slot, the
    ratio branch solving the intermediate states jointly (`state_cache_size_0_5_23`). Unknown
    when 0.5.23 would resolve the mamba strategy anew (a speculative algorithm or the radix
    cache turned back on, a page size on a `no_buffer` start that did not choose it)."""
    assert inputs.state_bytes is not None
    per_req = inputs.state_bytes
    rules = inputs.rules
    steps: list[Step] = []
    if rules == "0.5.23":
        old = inputs.figures.server_args
        strategy_fixed = "mamba_radix_cache_strategy" in inputs.figures.explicit
        if "speculative_algorithm" in touched:
            return Unknown("0.5.23 resolves the mamba strategy again for another speculative algorithm")
        if switched_on(old.get("disable_radix_cache")) and not switched_on(args.get("disable_radix_cache")):
            return Unknown(
                "0.5.23 resolves the mamba radix cache strategy again with the radix cache back on"
            )
        if (
            "page_size" in touched
            and old.get("mamba_radix_cache_strategy") == "no_buffer"
            and not strategy_fixed
        ):
            return Unknown("0.5.23 resolves an auto mamba strategy again for a page size above 1")
        ratio_found = mamba_ratio(args, rules)
        if isinstance(ratio_found, Unknown):
            return ratio_found
        ratio, ratio_text = ratio_found
        size, rule_text = state_cache_size_0_5_23(args, rest, per_req, ratio)
        if size <= 0:
            return Unknown(
                "0.5.23 refuses to start: no state slot is left (Not enough GPU memory for hybrid state cache)"
            )
        reservation, reservation_text = state_reservation_0_5_23(args, per_req, size, ratio)
        pool = (size + 1) * per_req / GIB
        steps.append(Step("state slots per request", ratio_text, f"{SRC_MAMBA_RATIO_0523} ({cite})"))
        steps.append(
            Step(
                "max_mamba_cache_size",
                f"{rule_text} = {size} slots; the pool holds {size} + 1 (padding) = {pool:.2f} GiB",
                f"{SRC_MAMBA_0523}, {SRC_MAMBA_POOL} ({cite})",
            )
        )
        steps.append(Step("speculative intermediate states", reservation_text, f"{SRC_MAMBA_0523} ({cite})"))
        return size, pool, reservation, ratio, steps
    dp = dp_attention_workers(args)
    explicit_size = as_int(args.get("max_mamba_cache_size"))
    reservation = reservation_gib(args, per_req, rules)
    if explicit_size is not None:
        size, rule_text = explicit_size // dp, f"--max-mamba-cache-size {explicit_size} // {dp}"
    elif switched_on(args.get("disable_radix_cache")) and parsed is not None:
        size, rule_text = parsed // dp, f"no radix cache: max_running_requests {parsed} // {dp}"
    else:
        r = float(args.get("mamba_full_memory_ratio") or 0.9)
        sizing = rest if slots_rest is None else slots_rest
        size = max(0, int((sizing - reservation) * r / (1 + r) * GIB) // round(per_req))
        rule_text = f"int(({sizing:.3f} - reservation {reservation:.3f}) x {r}/(1+{r}) GiB) // {per_req / 2**20:.2f} MiB"
        if abs(sizing - rest) > 1e-9:
            rule_text += f" (the rest moved {sizing - rest:+.3f} GiB to where today's rest gives today's {inputs.figures.mamba_cache_size} slots)"
    steps.append(
        Step(
            "max_mamba_cache_size",
            f"{rule_text} = {size} slots ({size * per_req / GIB:.2f} GiB counted by the profile; "
            f"the pool holds {size} + 1 (padding) = {(size + 1) * per_req / GIB:.2f} GiB)",
            f"{SRC_MAMBA}, {SRC_MAMBA_POOL} ({cite})",
        )
    )
    ratio_found = mamba_ratio(args, rules)
    assert not isinstance(ratio_found, Unknown)  # only 0.5.23's strategy can be unresolved
    ratio, ratio_text = ratio_found
    steps.append(Step("state slots per request", ratio_text, f"{SRC_MAMBA_RATIO} ({cite})"))
    return size, (size + 1) * per_req / GIB, reservation, ratio, steps


__all__ = ["state_cache_after"]
