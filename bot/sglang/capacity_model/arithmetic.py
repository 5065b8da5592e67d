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
    RuleSet,
    StartFigures,
    Step,
    Unknown,
    as_float,
    as_int,
    dp_attention_workers,
    rule_set,
    spec_algorithm,
    switched_on,
)
from bot.sglang.capacity_model.rules import (
    MAMBA_BASE_RATIO,
    SPECULATIVE_MAX_RUNNING,
    SRC_HYBRID_SWA,
    SRC_KV_POOL,
    SRC_MAMBA,
    SRC_MAMBA_0523,
    SRC_MAMBA_POOL,
    SRC_MAMBA_RATIO,
    SRC_MAMBA_RATIO_0523,
    SRC_MEMORY_HOOK_0523,
    SRC_REQ_POOL,
    SRC_SPECULATIVE,
    SRC_USER_LIMIT,
    decode_graph_max_bs_0_5_23,
    gpu_memory_source,
    graph_phase,
    kv_bytes,
    mamba_ratio,
    memory_hook_unsupported_0_5_23,
    memory_tier,
    piecewise_on,
    piecewise_tokens,
    prefill_graph_sizes_0_5_23,
    profile_source,
    reservation_gib,
    reserved_mem_mb,
    reserved_mem_mb_0_5_23,
    resolve_max_num_reqs,
    state_cache_size_0_5_23,
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
    return ArithmeticInputs(figures, rules, cell, state_bytes, workspace, today_state, today_reservation)


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
    rest = figures.post_model_load_gib - figures.pre_model_load_gib * (1 - mfs)
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


def _new_mem_fraction(
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
        return _new_mem_fraction_0_5_23(inputs, new, touched, hook_running, gpu, cite)
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


def _new_mem_fraction_0_5_23(
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
    mfs, mfs_steps = _new_mem_fraction(inputs, args, applied.touched, raw, cite)
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
    state_size: int | None = None
    state_gib = 0.0
    reservation = 0.0
    kv_rest = rest
    ratio = MAMBA_BASE_RATIO
    if inputs.state_bytes is not None:
        found = _state_cache(inputs, args, applied.touched, rest, parsed, cite)
        if isinstance(found, Unknown):
            return _unknown_outcome(found, parsed, steps)
        state_size, state_gib, reservation, ratio, state_steps = found
        steps += state_steps
        kv_rest = (
            rest - reservation - (state_gib if rules == "0.5.23" else state_size * inputs.state_bytes / GIB)
        )
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


def _state_cache(
    inputs: ArithmeticInputs,
    args: Mapping[str, Any],
    touched: frozenset[str],
    rest: float,
    parsed: int | None,
    cite: str,
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
    total = rest - reservation
    if explicit_size is not None:
        size, rule_text = explicit_size // dp, f"--max-mamba-cache-size {explicit_size} // {dp}"
    elif switched_on(args.get("disable_radix_cache")) and parsed is not None:
        size, rule_text = parsed // dp, f"no radix cache: max_running_requests {parsed} // {dp}"
    else:
        r = float(args.get("mamba_full_memory_ratio") or 0.9)
        size = max(0, int(total * r / (1 + r) * GIB) // round(per_req))
        rule_text = f"int(({rest:.3f} - reservation {reservation:.3f}) x {r}/(1+{r}) GiB) // {per_req / 2**20:.2f} MiB"
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
