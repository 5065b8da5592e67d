"""The memory model of SGLang's scheduler start (reference §2.2-2.3), per GPU of a node: 0.5.10's
figures, and each release's request-pool rule (`resolve_max_num_reqs`).

Why a model and not fixed numbers: the effective `max_running_requests` a flag-tuning bot
watches is *derived* (free memory, weights, `mem_fraction_static`, KV cell size, the hybrid
state cache), so a flag that only costs memory changes capacity without touching the parsed
arguments, which is the seeds' incident. The formulas are SGLang's:

* `rest = post_model_load - pre_model_load * (1 - mem_fraction_static)` (GiB), where the two
  are the free memory after torch.distributed init and after loading the weights;
* hybrid linear-attention models first set aside the state cache: on 0.5.9 / 0.5.10 by
  SGLang's `handle_max_mamba_cache` (`hybrid.py`: the speculative reservation, then an explicit
  size, `max_running_requests` without radix cache, or a `ratio / (1 + ratio)` share of what is
  left); on 0.5.23 by its `_handle_max_mamba_cache` (`hybrid.size_state_cache_0_5_23`: a padding
  slot per pool, the speculative states solved jointly with the state cache, after a multimodal
  model's embedding-cache reservation), in slots of `state_bytes_per_request` ->
  `max_mamba_cache_size`;
* `max_total_num_tokens = int(kv_rest * 2**30) // cell_size`, capped by `--max-total-tokens`,
  rounded down to `page_size`; MHA `cell_size = kv_heads_per_rank * (head_dim + v_head_dim) *
  kv_layers * dtype_bytes` where a hybrid model's kv_layers are its full-attention layers;
* `_resolve_max_num_reqs` exactly as §2.3, including `min(.., max_mamba_cache_size // ratio)`
  with the release's ratio (`hybrid.mamba_ratio`: 1 without radix cache, 3, plus the
  extra-buffer slots).

Free memory is measured with a small seeded jitter per start (`noise.restart_memory_jitter_gib`,
uniform, bounded), as real GPUs never report the same free memory twice.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .graphs import decode_batch_sizes, prefill_token_sizes
from .hybrid import (
    VLM_CACHE_SIZE_MB,
    no_request_fits_0_5_23,
    size_state_cache,
    size_state_cache_0_5_23,
    state_cache_too_small_0_5_23,
)
from .hybrid import mamba_ratio as hybrid_mamba_ratio
from .releases import DEFAULT_RELEASE, release
from .scenario import Effect, Scenario

GIB = 1 << 30

NOT_ENOUGH_MEMORY = (
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
    "Current value: mem_fraction_static={mfs}"
)
CUDA_GRAPH_FAILED_HINT = (
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "3. disable torch compile by not using --enable-torch-compile",
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
)


@dataclass(frozen=True)
class MemoryPlan:
    """Every memory figure of one start on one GPU of this node (GiB unless named otherwise).

    The `*_gib` avail figures are what the startup lines print as `avail mem=`. `failure` is
    the final exception line when the start cannot complete, with `failure_phase` one of
    "args" (post-init refused the launch line: nothing was measured), "weights" (CUDA OOM while
    loading), "kv" (not enough memory for the pool) or "cuda_graph" (capture ran out of memory);
    the figures after that phase are then zero.
    """

    total_gib: float
    jitter_gib: float
    free_at_start_gib: float
    dist_init_usage_gib: float
    pre_model_load_gib: float
    weight_usage_gib: float
    post_model_load_gib: float
    mem_fraction_static: float
    flag_memory_gib: float
    rest_memory_gib: float
    max_mamba_cache_size: int | None
    mamba_state_gib: float
    speculative_reservation_gib: float
    """What `handle_max_mamba_cache` set aside for speculative decoding's intermediate states
    before sizing the state cache (0.5.9 / 0.5.10; 0 otherwise); the Mamba pool allocates it as
    its speculative intermediate caches, so it leaves the free memory with the pool."""
    mamba_ratio: int | None
    cell_size_bytes: int
    profiled_tokens: int
    max_total_num_tokens: int
    k_size_gib: float
    v_size_gib: float
    req_to_token_gib: float
    pool_end_gib: float
    context_len: int
    max_running_requests: int
    capture_bs: tuple[int, ...]
    cuda_graph_begin_gib: float
    cuda_graph_usage_gib: float
    cuda_graph_end_gib: float
    piecewise_sizes: tuple[int, ...]
    piecewise_usage_gib: float
    piecewise_end_gib: float
    draft_weight_gib: float
    draft_kv_gib: float
    draft_graph_usage_gib: float
    available_gpu_mem_gib: float
    max_total_tokens_warning: str | None = None
    pool_warnings: tuple[str, ...] = ()
    """Warnings the release logs while sizing the request pool (0.5.23), per rank."""
    failure: str | None = None
    failure_phase: str | None = None

    @property
    def used_gib(self) -> float:
        """Memory in use on each GPU once the server is up (what nvidia-smi shows used)."""
        return self.total_gib - self.available_gpu_mem_gib

    @property
    def used_mib(self) -> int:
        return round(self.used_gib * 1024)

    @property
    def weight_and_kv_gib(self) -> float:
        return self.weight_usage_gib + self.k_size_gib + self.v_size_gib


def restart_jitter(scenario: Scenario, start_seed: int) -> float:
    """This start's free-memory jitter: uniform in +-restart_memory_jitter_gib, seeded."""
    half = scenario.noise.restart_memory_jitter_gib
    if half <= 0:
        return 0.0
    rng = random.Random(f"memory:{scenario.noise.seed}:{start_seed}")  # noqa: S311 - simulation
    return rng.uniform(-half, half)


def kv_dtype_bytes(server_args: Mapping[str, Any], model_bytes: int) -> float:
    """Element size of the KV cache: the model's unless `--kv-cache-dtype` overrides it."""
    dtype = server_args.get("kv_cache_dtype") or "auto"
    if dtype.startswith("fp8"):
        return 1.0
    if dtype.startswith("fp4"):
        return 0.5
    if dtype in ("bf16", "bfloat16"):
        return 2.0
    return float(model_bytes)


def kv_heads_per_rank(server_args: Mapping[str, Any], num_kv_heads: int) -> int:
    """`get_num_kv_heads(attn_tp_size)`: KV heads are split over attention-TP, at least 1."""
    tp = int(server_args["tp_size"])
    attn_tp = tp // int(server_args["dp_size"]) if server_args.get("enable_dp_attention") else tp
    return max(1, num_kv_heads // max(1, attn_tp))


def resolve_max_num_reqs(
    token_capacity: int,
    *,
    context_len: int,
    cli_max_running: int | None,
    dp_size: int,
    mamba_cache_size: int | None = None,
    mamba_ratio: int = 3,
    version: str = DEFAULT_RELEASE,
) -> int:
    """The request pool size of `version`, verbatim in meaning:

    * 0.5.9 `model_executor/model_runner_kv_cache_mixin.py` `init_memory_pool`: an explicit
      `--max-running-requests` is kept as given; otherwise `min(max(estimate, 2048), 4096)`;
    * 0.5.10 (to 0.5.13) `_resolve_max_num_reqs` (§2.3): an explicit value is capped by
      `max(min(estimate, 4096), 2048)` after `// dp_size`; otherwise `min(that, capacity // 2)`;
    * 0.5.23 `mem_cache/kv_cache_configurator.py` `resolve_max_num_reqs`: an explicit value
      `max(1, mrr // dp)` is capped only by `capacity // 2`, no longer by 4096;

    then, for a hybrid model, `min(.., max_mamba_cache_size // ratio)` in every release.
    """
    estimated = int(token_capacity / context_len * 512)
    r = release(version)
    if r.version == "0.5.9":
        max_num_reqs = cli_max_running if cli_max_running is not None else min(max(estimated, 2048), 4096)
    elif not r.cli_max_running_capped:
        if cli_max_running is not None:
            max_num_reqs = min(max(1, cli_max_running // dp_size), token_capacity // 2)
        else:
            max_num_reqs = min(max(min(estimated, 4096), 2048), token_capacity // 2)
    else:
        estimated = max(min(estimated, 4096), 2048)
        if cli_max_running is not None:
            max_num_reqs = min(cli_max_running // dp_size, estimated)
        else:
            max_num_reqs = min(estimated, token_capacity // 2)
    if mamba_cache_size is not None:
        max_num_reqs = min(max_num_reqs, mamba_cache_size // mamba_ratio)
    return max_num_reqs


def mamba_cap_warning(cap: int, mamba_cache_size: int, ratio: int) -> str:
    """0.5.23 `resolve_max_num_reqs`' warning when the state cache is what limits the pool."""
    return (
        f"max_running_requests is capped to {cap} by the mamba state cache "
        f"(max_mamba_cache_size={mamba_cache_size}, {ratio} state slots per request). "
        "To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
        "state size with --mamba-ssm-dtype bfloat16."
    )


def reduced_warning(requested: int, granted: int) -> str:
    """0.5.23 `resolve_max_num_reqs`' warning when KV capacity lowers an explicit value."""
    return (
        f"max_running_requests was reduced from the requested {requested} to {granted} "
        "(per dp worker) due to the available KV cache capacity."
    )


def _pool_warnings(
    version: str,
    tokens: int,
    context_len: int,
    cli_max_running: int | None,
    dp_size: int,
    mamba_size: int | None,
    ratio: int,
    granted: int,
) -> tuple[str, ...]:
    """The warnings 0.5.23 logs while sizing the request pool (none in 0.5.9 / 0.5.10)."""
    if release(version).cli_max_running_capped or version == "0.5.9":
        return ()
    found: list[str] = []
    requested = None if cli_max_running is None else max(1, cli_max_running // dp_size)
    before = resolve_max_num_reqs(
        tokens, context_len=context_len, cli_max_running=cli_max_running, dp_size=dp_size, version=version
    )
    capped_by_mamba = mamba_size is not None and mamba_size // ratio < before
    if capped_by_mamba and mamba_size is not None:
        found.append(mamba_cap_warning(mamba_size // ratio, mamba_size, ratio))
    if requested is not None and granted < requested and not capped_by_mamba:
        found.append(reduced_warning(requested, granted))
    return tuple(found)


def capture_batch_sizes(cuda_graph_bs: Iterable[int], max_running: int) -> tuple[int, ...]:
    """`get_batch_sizes_to_capture`: sizes clipped to the request pool, which is appended."""
    listed = list(cuda_graph_bs)
    capture = [bs for bs in listed if bs <= max_running]
    if listed and max_running < max(listed) and max_running not in capture:
        capture.append(max_running)
    return tuple(capture)


def cuda_oom(*, tried_gib: float, gpu: int, total_gib: float, free_gib: float, used_gib: float) -> str:
    """PyTorch's CUDA out-of-memory message (`str()` of torch.OutOfMemoryError)."""
    return (
        f"CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. GPU {gpu} has a "
        f"total capacity of {total_gib:.2f} GiB of which {max(free_gib, 0.0) * 1024:.2f} MiB is free. Including "
        f"non-PyTorch memory, this process has {used_gib:.2f} GiB memory in use. Of the allocated memory "
        f"{used_gib - 0.5:.2f} GiB is allocated by PyTorch, and 402.15 MiB is reserved by PyTorch but "
        "unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def _sum(effects: Iterable[Effect], name: str) -> float:
    return float(sum(getattr(e, name) for e in effects))


def plan_memory(
    server_args: Mapping[str, Any],
    scenario: Scenario,
    *,
    start_seed: int = 0,
    effects: Iterable[Effect] | None = None,
    jitter_gib: float | None = None,
) -> MemoryPlan:
    """The memory plan for post-init `server_args` on the scenario's GPU.

    `effects` defaults to the scenario's active flag effects; `jitter_gib` to this start's
    seeded jitter (pass 0.0 for the nominal figures).
    """
    if effects is None:
        effects = [effect for _rule, effect in scenario.active_effects(server_args)]
    effects = list(effects)
    gpu, model, ov = scenario.gpu, scenario.model, scenario.memory
    a = server_args
    tp, pp, dp = int(a["tp_size"]), int(a["pp_size"]), int(a["dp_size"])
    mfs = float(a["mem_fraction_static"])
    jitter = restart_jitter(scenario, start_seed) if jitter_gib is None else jitter_gib

    total = gpu.memory_gib
    free_start = total - gpu.idle_used_gib + jitter
    pre = free_start - ov.dist_init_gib
    weights = model.weight_gib / (tp * pp)
    flag_mem = _sum(effects, "memory_gib")
    rebased = not release(scenario.sglang_version).deferred_resolution
    post = pre - weights
    values: dict[str, Any] = {
        "total_gib": total,
        "jitter_gib": jitter,
        "free_at_start_gib": free_start,
        "dist_init_usage_gib": ov.dist_init_gib,
        "pre_model_load_gib": pre,
        "weight_usage_gib": weights,
        "post_model_load_gib": post,
        "mem_fraction_static": mfs,
        "flag_memory_gib": flag_mem,
        "context_len": int(a.get("context_length") or model.context_length),
    }
    if scenario.faults.oom_start or post < 0:
        tried = min(2.0, weights)
        failure = "torch.OutOfMemoryError: " + cuda_oom(
            tried_gib=tried, gpu=0, total_gib=total, free_gib=0.3, used_gib=total - gpu.idle_used_gib - 0.3
        )
        return _failed(values, failure, "weights")

    rest = post - flag_mem - pre * (1 - mfs)
    values["rest_memory_gib"] = rest
    mamba_size: int | None = None
    mamba_gib = 0.0
    mamba_ratio: int | None = None
    kv_rest = rest
    reservation = 0.0
    r = release(scenario.sglang_version)
    if r.mamba_configurator and model.multimodal:
        # 0.5.23 `_profile_available_bytes`: a multimodal model's embedding cache is reserved
        # from what sizes the caches (`mm_runtime_reservation_gb`)
        rest -= VLM_CACHE_SIZE_MB / 1024
        values["rest_memory_gib"] = rest
        kv_rest = rest
    if model.hybrid is not None and r.mamba_configurator:
        # 0.5.23 `_handle_max_mamba_cache` (`hybrid.size_state_cache_0_5_23`)
        mamba_ratio = hybrid_mamba_ratio(a, r)
        cache = size_state_cache_0_5_23(
            rest,
            a,
            state_bytes_per_request=model.hybrid.state_bytes_per_request,
            dp_size=dp,
            ratio=mamba_ratio,
        )
        mamba_size, mamba_gib = cache.max_mamba_cache_size, cache.state_gib
        reservation = cache.speculative_reservation_gib
        kv_rest = cache.kv_rest_gib
        if mamba_size <= 0:
            values.update(speculative_reservation_gib=reservation, max_mamba_cache_size=mamba_size)
            values.update(mamba_state_gib=0.0, mamba_ratio=mamba_ratio)
            text = state_cache_too_small_0_5_23(
                mamba_size, rest - reservation, model.hybrid.state_bytes_per_request
            )
            return _failed(values, f"RuntimeError: {text}", "kv")
    elif model.hybrid is not None and rebased:
        # 0.5.9 / 0.5.10: SGLang's own rule (`hybrid.py`): the speculative reservation, then an
        # explicit size, `max_running_requests` without radix cache, or the ratio split
        cache = size_state_cache(
            rest,
            a,
            state_bytes_per_request=model.hybrid.state_bytes_per_request,
            dp_size=dp,
        )
        # the pool holds one slot more than the profile counted (`StateCache.pool_gib`)
        mamba_size, mamba_gib = cache.max_mamba_cache_size, cache.pool_gib
        reservation = cache.speculative_reservation_gib
        mamba_ratio = hybrid_mamba_ratio(a, release(scenario.sglang_version))
        kv_rest = cache.kv_rest_gib
    values["speculative_reservation_gib"] = reservation
    values.update(max_mamba_cache_size=mamba_size, mamba_state_gib=mamba_gib, mamba_ratio=mamba_ratio)

    heads = kv_heads_per_rank(a, model.num_kv_heads)
    dtype_bytes = kv_dtype_bytes(a, model.kv_dtype_bytes)
    cell = int(heads * (model.head_dim + model.value_head_dim) * model.kv_layers * dtype_bytes)
    profiled = max(0, int(kv_rest * GIB) // cell) if kv_rest > 0 else 0
    tokens = profiled
    warning = None
    user_limit = a.get("max_total_tokens")
    if user_limit is not None:
        if user_limit > profiled:
            warning = (
                f"max_total_tokens={user_limit} is larger than the profiled value {profiled}. "
                "Use the profiled value instead."
            )
        tokens = min(tokens, int(user_limit))
    page = int(a.get("page_size") or 1)
    tokens = tokens // page * page
    values.update(cell_size_bytes=cell, profiled_tokens=profiled, max_total_tokens_warning=warning)
    mrr = 0
    if tokens > 0 and (mamba_size is None or mamba_size > 0):
        mrr = resolve_max_num_reqs(
            tokens,
            context_len=values["context_len"],
            cli_max_running=a.get("max_running_requests"),
            # model_runner.py: `self.dp_size = dp_size if enable_dp_attention else 1`; only DP
            # attention splits the limit, a plain DP replica keeps all of it.
            dp_size=dp if a.get("enable_dp_attention") else 1,
            mamba_cache_size=mamba_size,
            mamba_ratio=mamba_ratio or 3,
            version=scenario.sglang_version,
        )
        if (
            release(scenario.sglang_version).mamba_spec_dp_cap
            and mamba_size is not None
            and a.get("speculative_algorithm") is not None
            and a.get("enable_dp_attention")
            and a.get("max_running_requests") is not None
        ):
            # 0.5.9 `init_memory_pool`: the speculative state space is per DP rank
            mrr = min(mrr, int(a["max_running_requests"]) // dp)
        values["pool_warnings"] = _pool_warnings(
            scenario.sglang_version, tokens, values["context_len"], a.get("max_running_requests"),
            dp if a.get("enable_dp_attention") else 1,
            mamba_size, mamba_ratio or 3, mrr,
        )  # fmt: skip
    if r.mamba_configurator and tokens > 0 and mrr <= 0 and mamba_size and mamba_ratio:
        text = no_request_fits_0_5_23(mamba_size, mamba_ratio, mrr)
        return _failed(values, f"RuntimeError: {text}", "kv")
    if rest <= 0 or tokens <= 0 or mrr <= 0:
        return _failed(values, NOT_ENOUGH_MEMORY.format(mfs=mfs), "kv")

    k_gib = tokens * heads * model.head_dim * model.kv_layers * dtype_bytes / GIB
    v_gib = tokens * heads * model.value_head_dim * model.kv_layers * dtype_bytes / GIB
    drafts = int(a.get("speculative_num_draft_tokens") or 0)
    req_to_token = mrr * (values["context_len"] + 4 + drafts) * 4 / GIB
    pool_end = post - flag_mem - k_gib - v_gib - mamba_gib - reservation - req_to_token
    values.update(
        max_total_num_tokens=tokens,
        k_size_gib=k_gib,
        v_size_gib=v_gib,
        req_to_token_gib=req_to_token,
        pool_end_gib=pool_end,
        max_running_requests=mrr,
    )

    lazy = _sum(effects, "lazy_memory_gib")
    capture: tuple[int, ...] = ()
    graph_usage = 0.0
    begin = pool_end - ov.pre_graph_gib
    listed = decode_batch_sizes(a, scenario.sglang_version)
    if listed is not None:
        capture = capture_batch_sizes(listed, mrr)
        graph_usage = ov.cuda_graph_gib_per_bs * len(capture) + lazy
    graph_end = begin - graph_usage
    values.update(capture_bs=capture, cuda_graph_begin_gib=begin, cuda_graph_usage_gib=graph_usage)
    values["cuda_graph_end_gib"] = graph_end
    if graph_end < 0:
        failure = "Exception: Capture cuda graph failed: " + cuda_oom(
            tried_gib=ov.cuda_graph_gib_per_bs * 4,
            gpu=0,
            total_gib=total,
            free_gib=0.05,
            used_gib=total - 0.05,
        )
        return _failed(values, failure, "cuda_graph")

    sizes: tuple[int, ...] = ()
    tokens_listed = prefill_token_sizes(a, scenario.sglang_version)
    if tokens_listed is not None:
        cap = a.get("max_total_tokens")
        sizes = tuple(t for t in tokens_listed if cap is None or t <= cap)
    piece_usage = ov.piecewise_gib_per_size * len(sizes)
    piece_end = graph_end - piece_usage
    draft_weights = draft_kv = draft_graph = 0.0
    if a.get("speculative_algorithm") and model.draft is not None:
        draft_weights = model.draft.weight_gib / (tp * pp)
        draft_kv = tokens * heads * (model.head_dim + model.value_head_dim) * dtype_bytes / GIB
        draft_graph = 0.5 * ov.cuda_graph_gib_per_bs * len(capture) if capture else 0.0
    available = piece_end - draft_weights - draft_kv - draft_graph - (0.0 if capture else lazy)
    values.update(
        piecewise_sizes=sizes,
        piecewise_usage_gib=piece_usage,
        piecewise_end_gib=piece_end,
        draft_weight_gib=draft_weights,
        draft_kv_gib=draft_kv,
        draft_graph_usage_gib=draft_graph,
        available_gpu_mem_gib=available,
    )
    if available < 0:
        return _failed(values, NOT_ENOUGH_MEMORY.format(mfs=mfs), "kv")
    return MemoryPlan(**values)


_ZERO_FIELDS: dict[str, Any] = {
    "rest_memory_gib": 0.0,
    "max_mamba_cache_size": None,
    "mamba_state_gib": 0.0,
    "speculative_reservation_gib": 0.0,
    "mamba_ratio": None,
    "cell_size_bytes": 0,
    "profiled_tokens": 0,
    "max_total_num_tokens": 0,
    "k_size_gib": 0.0,
    "v_size_gib": 0.0,
    "req_to_token_gib": 0.0,
    "pool_end_gib": 0.0,
    "max_running_requests": 0,
    "capture_bs": (),
    "cuda_graph_begin_gib": 0.0,
    "cuda_graph_usage_gib": 0.0,
    "cuda_graph_end_gib": 0.0,
    "piecewise_sizes": (),
    "piecewise_usage_gib": 0.0,
    "piecewise_end_gib": 0.0,
    "draft_weight_gib": 0.0,
    "draft_kv_gib": 0.0,
    "draft_graph_usage_gib": 0.0,
    "available_gpu_mem_gib": 0.0,
}


def _failed(values: dict[str, Any], failure: str, phase: str) -> MemoryPlan:
    """A plan that stops at `phase`: figures computed so far, zeros for the rest."""
    merged = {**_ZERO_FIELDS, **values}
    if phase == "kv":
        merged.update({k: _ZERO_FIELDS[k] for k in ("max_total_num_tokens", "max_running_requests")})
    merged["failure"] = failure
    merged["failure_phase"] = phase
    return MemoryPlan(**merged)


def refused_plan(scenario: Scenario, failure: str) -> MemoryPlan:
    """The plan of a start refused in post-init: nothing was measured or allocated."""
    gpu = scenario.gpu
    values: dict[str, Any] = {
        "total_gib": gpu.memory_gib,
        "jitter_gib": 0.0,
        "free_at_start_gib": gpu.memory_gib - gpu.idle_used_gib,
        "dist_init_usage_gib": 0.0,
        "pre_model_load_gib": 0.0,
        "weight_usage_gib": 0.0,
        "post_model_load_gib": 0.0,
        "mem_fraction_static": 0.0,
        "flag_memory_gib": 0.0,
        "context_len": scenario.model.context_length,
    }
    return _failed(values, failure, "args")
