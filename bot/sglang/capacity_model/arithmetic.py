"""One run of SGLang's start arithmetic: today's figures, a change and a jitter in, the new pools out.

Why apart from the prediction: the run is deterministic and knows nothing of bands or
expectations; the prediction runs it at every jitter of the band, and calibration
(`learn_flag_cost`, `recompute_profile`) reads what today's start leaves unexplained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.sglang.capacity_model.applied_change import AppliedChange
from bot.sglang.capacity_model.figures import (
    GIB,
    PRINT_ROUNDING_GIB,
    StartFigures,
    Step,
    Unknown,
    as_int,
    dp_attention_workers,
    spec_algorithm,
    switched_on,
)
from bot.sglang.capacity_model.inputs import ArithmeticInputs, Outcome, prepare_inputs
from bot.sglang.capacity_model.mem_fraction import new_mem_fraction
from bot.sglang.capacity_model.rules import (
    MAMBA_BASE_RATIO,
    SPECULATIVE_MAX_RUNNING,
    SRC_HYBRID_SWA,
    SRC_KV_POOL,
    SRC_REQ_POOL,
    SRC_SPECULATIVE,
    SRC_USER_LIMIT,
    gpu_memory_source,
    kv_bytes,
    memory_tier,
    profile_source,
    resolve_max_num_reqs,
)
from bot.sglang.capacity_model.state_cache import state_cache_after


def recompute_profile(figures: StartFigures) -> tuple[int, str] | Unknown:
    """`max_total_num_tokens` recomputed from the start's own memory lines alone (no workspace
    term): `int((post - pre x (1 - mfs) - reservation - state) GiB) // cell`, the cell from the
    KV pool line. How well the printed lines explain the pool SGLang made (bench/predict_accuracy.py)."""
    inputs = prepare_inputs(figures)
    if isinstance(inputs, Unknown):
        return inputs
    assert figures.pre_model_load_gib is not None
    assert figures.post_model_load_gib is not None
    mfs = float(figures.server_args["mem_fraction_static"])
    rest = inputs.today_rest_gib
    state = inputs.today_state_gib
    tokens = int((rest - state) * GIB) // round(inputs.cell_bytes)
    formula = (
        f"rest {figures.post_model_load_gib:.2f} - {figures.pre_model_load_gib:.2f} x (1 - {mfs}) = {rest:.2f} GiB, "
        f"- state and its reservation {state:.2f}, // cell {inputs.cell_bytes:.0f} B = {tokens}"
    )
    if figures.swa_tokens is not None:
        formula += f" (hybrid sliding window: the cell is both pools over the full pool; window pool {figures.swa_tokens})"
    return tokens, formula


def learn_flag_cost(before: StartFigures, after: StartFigures) -> float | Unknown:
    """The workspace (GiB) a flag took, from the start before a try that added it (`before`) and
    the start after (`after`): what the after start's pools leave unexplained minus what the
    before start's left (the profile rule explains every modelled flag, so the rest is the new
    flag's). Unknown when either start's figures cannot be explained (module doc)."""
    earlier, later = prepare_inputs(before), prepare_inputs(after)
    if isinstance(earlier, Unknown):
        return earlier
    if isinstance(later, Unknown):
        return later
    return later.workspace_gib - earlier.workspace_gib


def run_arithmetic(inputs: ArithmeticInputs, applied: AppliedChange, jitter: float) -> Outcome:
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
        raw = as_int(new.get("max_running_requests"))
    else:
        raw = as_int(old.get("max_running_requests")) if "max_running_requests" in f.explicit else None
    parsed = raw
    if raw is None and spec_algorithm(new) is not None:
        parsed = SPECULATIVE_MAX_RUNNING
        steps.append(
            Step(
                "parsed max_running_requests",
                f"speculative {spec_algorithm(new)} without --max-running-requests: {SPECULATIVE_MAX_RUNNING}",
                f"{SRC_SPECULATIVE} ({cite})",
            )
        )
    args = dict(new)
    args["max_running_requests"] = parsed
    steps_n, topk = as_int(args.get("speculative_num_steps")), as_int(args.get("speculative_eagle_topk"))
    if spec_algorithm(args) not in (None, "NGRAM") and topk == 1 and steps_n is not None:
        drafts = as_int(args.get("speculative_num_draft_tokens"))
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
        and spec_algorithm(args) is not None
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
            steps.append(
                Step(key, f"memory tier default {args[key]}", f"{gpu_memory_source(rules)} ({cite})")
            )
    mfs, mfs_steps = new_mem_fraction(inputs, args, applied.touched, raw, cite)
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
            f"{profile_source(rules)} ({cite})",
        )
    )
    # the hybrid state cache
    moved = rest - (inputs.today_rest_gib - inputs.workspace_gib)
    pools = _state_after(inputs, args, applied.touched, rest, parsed, cite, _slots_rest(inputs, rest, moved))
    if isinstance(pools, Unknown):
        return _unknown_outcome(pools, parsed, steps)
    shift, why = calibration(inputs, mfs, rest, pools.kv_rest)
    if shift:
        rest -= shift
        steps.append(Step("rest calibrated", why, f"{SRC_KV_POOL} ({cite})"))
        pools = _state_after(
            inputs, args, applied.touched, rest, parsed, cite, _slots_rest(inputs, rest, moved)
        )
        if isinstance(pools, Unknown):
            return _unknown_outcome(pools, parsed, steps)
    steps += pools.steps
    state_size, state_gib, reservation, ratio = pools.size, pools.gib, pools.reservation, pools.ratio
    kv_rest = pools.kv_rest
    # the KV pool
    old_bytes = kv_bytes(old, f.kv_dtype, old)
    new_bytes = kv_bytes(args, f.kv_dtype, old)
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
    cap = as_int(args.get("max_total_tokens"))
    if cap is not None and cap < tokens:
        tokens = cap
        formula += f", capped by --max-total-tokens {cap}"
    page = int(args.get("page_size") or 1)
    tokens = tokens // page * page
    if page > 1:
        formula += f", down to a multiple of page_size {page}"
    today_capped = as_int(old.get("max_total_tokens")) is not None and f.max_total_num_tokens == as_int(
        old.get("max_total_tokens")
    )
    if today_capped and (cap is None or cap > tokens):
        return _unknown_outcome(
            Unknown("today's pool was capped by --max-total-tokens: its true profile was not printed"),
            parsed,
            steps,
        )
    source = f"{profile_source(rules)}, {SRC_USER_LIMIT}"
    if f.swa_tokens is not None:
        formula += (
            " (a full-pool token with its sliding-window share: both pools over the full pool's tokens)"
        )
        source += f", {SRC_HYBRID_SWA}"
    steps.append(Step("max_total_num_tokens", f"{formula} -> {tokens}", f"{source} ({cite})"))
    # the request pool
    ctx_value = as_int(args.get("context_length"))
    if ctx_value is None:
        if as_int(old.get("context_length")) is not None:
            return _unknown_outcome(
                Unknown("without --context-length the model's own context length applies, not printed"),
                parsed,
                steps,
            )
        ctx_value = f.context_len
    if ctx_value is None or ctx_value <= 0:
        return _unknown_outcome(Unknown("context_len not printed"), parsed, steps)
    dp = dp_attention_workers(args)
    if tokens <= 0:
        mrr = 0
        steps.append(
            Step(
                "max_running_requests",
                "no KV pool: the start fails (Not enough memory)",
                f"{profile_source(rules)} ({cite})",
            )
        )
    else:
        mrr, mrr_formula, source = resolve_max_num_reqs(tokens, ctx_value, parsed, dp, rules)
        if state_size is not None:
            mrr_formula += f", min(.., max_mamba_cache_size {state_size} // {ratio})"
            mrr = min(mrr, state_size // ratio)
            if mrr <= 0 and rules == "0.5.23":
                # resolve_max_num_reqs raises: the state cache is too small to serve any request
                return _unknown_outcome(
                    Unknown("0.5.23 refuses to start: the state cache serves no request"), parsed, steps
                )
        steps.append(Step("max_running_requests", f"{mrr_formula} = {mrr}", f"{source} ({cite})"))
    kv_gib = tokens * cell / GIB
    available = _available(
        inputs, args, jitter, tokens, mrr, kv_gib, state_gib + reservation, ctx_value, steps
    )
    return Outcome(mfs, parsed, tokens, mrr, state_size, kv_gib, state_gib, available, tuple(steps))


@dataclass(frozen=True)
class _StatePools:
    """The hybrid state cache after the change and what it leaves the KV pool."""

    size: int | None
    gib: float
    reservation: float
    ratio: int
    kv_rest: float
    steps: tuple[Step, ...]


def _slots_rest(inputs: ArithmeticInputs, rest: float, moved: float) -> float:
    """The rest the 0.5.9 / 0.5.10 ratio rule sizes the state cache from: `rest`, moved (when it
    must) to where today's rest, `rest - moved`, gives today's printed slot count by that rule.
    Why: today's count is exact, the rest read from the printed lines is not; near a slot
    boundary the rounding alone would move the count by one, and the KV pool by one slot's
    memory, for a change that moves no memory at all. `rest` itself still sizes the KV pool.
    Only when today's start used the ratio rule (no explicit size, the radix cache on)."""
    f = inputs.figures
    old = f.server_args
    if (
        inputs.rules == "0.5.23"
        or inputs.state_bytes is None
        or not f.mamba_cache_size
        or as_int(old.get("max_mamba_cache_size")) is not None
        or switched_on(old.get("disable_radix_cache"))
    ):
        return rest
    ratio = float(old.get("mamba_full_memory_ratio") or 0.9)
    per_slot = round(inputs.state_bytes) * (1 + ratio) / ratio / GIB  # rest per slot, in GiB
    today_total = rest - moved - inputs.today_reservation_gib
    low, high = f.mamba_cache_size * per_slot, (f.mamba_cache_size + 1) * per_slot
    margin = min(PRINT_ROUNDING_GIB / 10, per_slot / 4)  # inside, clear of the float boundary
    anchored = min(max(today_total, low + margin), high - margin)
    return rest + (anchored - today_total)


def _state_after(
    inputs: ArithmeticInputs,
    args: Mapping[str, Any],
    touched: frozenset[str],
    rest: float,
    parsed: int | None,
    cite: str,
    slots_rest: float | None = None,
) -> _StatePools | Unknown:
    """The state cache sized from `rest` (`state_cache_after`; the ratio rule from `slots_rest`
    when given, `_slots_rest`), and the rest left for KV: 0.5.9 / 0.5.10's profile counts `size`
    slots, 0.5.23's `size + 1`, both less the reservation."""
    if inputs.state_bytes is None:
        return _StatePools(None, 0.0, 0.0, MAMBA_BASE_RATIO, rest, ())
    found = state_cache_after(inputs, args, touched, rest, parsed, cite, slots_rest=slots_rest)
    if isinstance(found, Unknown):
        return found
    size, gib, reservation, ratio, steps = found
    counted = gib if inputs.rules == "0.5.23" else size * inputs.state_bytes / GIB
    return _StatePools(size, gib, reservation, ratio, rest - reservation - counted, tuple(steps))


def calibration(inputs: ArithmeticInputs, mfs: float, rest: float, kv_rest: float) -> tuple[float, str]:
    """(GiB to take off the rest, why): where today's pools leave an amount unexplained that is
    within the printing's rounding (`ArithmeticInputs.rounding_gib`), two estimates of the new
    KV memory hold. The absolute one (`kv_rest`, from the printed free memory) carries the
    rounding of `pre`, `post` and of every state slot it subtracts; the one from today's pools
    (`kv_rest` less the unexplained amount) carries the rounding of today's KV pool over what the
    change moves, and of the slots that change. On a KV pool that is a sliver of the rest (a hybrid
    model with a large state cache) the second is the tighter; on a dense model they differ by
    the rounding of the free memory lines, ~0.01 GiB.
    The truth lies in both bounds: the rest is moved to the middle of where they meet (to the
    middle between them if they miss, which the printing's rounding alone cannot cause)."""
    unexplained = inputs.rounding_gib
    f = inputs.figures
    if not unexplained or not f.kv_gib or f.pre_model_load_gib is None:
        return 0.0, ""
    figure = PRINT_ROUNDING_GIB / 2  # each printed GB figure is off by up to this
    old_mfs = float(f.server_args["mem_fraction_static"])
    page = int(f.server_args.get("page_size") or 1)
    floor_gib = page * inputs.cell_bytes / GIB / 2  # today's pool is floored to whole pages
    slot_gib = 2 * figure / ((f.mamba_cache_size or 0) + 1)  # conv + ssm over the printed slots
    state = inputs.state_bytes or 0.0
    slots_now = (rest - kv_rest) * GIB / state if state else 0.0
    slots_today = inputs.today_state_gib * GIB / state if state else 0.0
    absolute = kv_rest
    absolute_bound = (
        figure + figure * (1 - mfs) + slots_now * slot_gib + abs(absolute) * 2 * figure / f.kv_gib
    )
    from_today = kv_rest - unexplained + floor_gib
    today_bound = (
        abs(from_today - f.kv_gib) * 2 * figure / f.kv_gib
        + abs(slots_now - slots_today) * slot_gib
        + figure * abs(mfs - old_mfs)
        + floor_gib
    )
    low = max(absolute - absolute_bound, from_today - today_bound)
    high = min(absolute + absolute_bound, from_today + today_bound)
    target = (low + high) / 2
    shift = absolute - target
    return shift, (
        f"today's pools leave {unexplained:+.3f} GiB unexplained, within the rounding of the printed GB; "
        f"the KV memory from the printed free memory, {absolute:.3f} +- {absolute_bound:.3f} GiB, and from "
        f"today's pools, {from_today:.3f} +- {today_bound:.3f} GiB, meet at {target:.3f}: the rest moves by {-shift:+.3f} GiB"
    )


def _available(
    inputs: ArithmeticInputs,
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
    if min(mrr, max_bs) != min(f.max_running_requests, max_bs) and not switched_on(
        args.get("disable_cuda_graph")
    ):
        return Unknown(
            "the CUDA graphs captured follow max_running_requests, their memory per graph is not printed"
        )
    if spec_algorithm(args) is not None and tokens != f.max_total_num_tokens:
        return Unknown("the draft model's KV pool follows max_total_num_tokens, its cell is not printed")
    drafts = int(args.get("speculative_num_draft_tokens") or 0) if spec_algorithm(args) is not None else 0
    req_new = mrr * (ctx + 4 + drafts) * 4 / GIB
    req_old = f.max_running_requests * (f.context_len + 4 + drafts) * 4 / GIB
    old_state = (f.mamba_state_gib or 0.0) + inputs.today_reservation_gib
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


def _unknown_outcome(why: Unknown, parsed: int | None, steps: list[Step]) -> Outcome:
    steps.append(Step("stopped", str(why), "-"))
    return Outcome(why, parsed, why, why, why, why, why, why, tuple(steps))
