"""The startup log lines of one node, in the scenario's release's order and formats (reference §2.4, §8).

Why separate from `startup.py`: this is only presentation: given the post-init arguments and
the memory plan, which line each scheduler process prints, with which prefix, after how long.
Per-rank lines come once per local TP rank with its own prefix; "rank 0" lines (weights
format, KV dtype, tqdm bars, the capacity line) only on the node that holds TP rank 0; time
spent on a line another node prints carries over to this node's next line, so all nodes of
a deployment advance in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import logfmt
from .adjust import PostInit, server_args_line
from .graphs import decode_batch_sizes, prefill_token_sizes
from .hybrid import vlm_reservation_line_0_5_23
from .memory import CUDA_GRAPH_FAILED_HINT, MemoryPlan
from .releases import release
from .scenario import Scenario

_FRAMES = (
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3560, '
    "in run_scheduler_process",
    "    scheduler = Scheduler(",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/model_runner.py", line 412, '
    "in initialize",
    "    self.init_memory_pool(",
)


@dataclass
class LogStep:
    """One line to print: wait `delay_s` (unscaled; the runtime multiplies by
    `timings.startup_scale`), then print `render(now)` to `stream`.

    `ranks` is the rank prefix with its leading space (`" TP0"`), `""` for the main process;
    `bare` lines (post-init warnings, tqdm bars, traceback lines) have no `[time] ` prefix.
    `phase` names the startup phase ("warnings", "args", "dist_init", "weights", "kv",
    "cuda_graph", "piecewise", "draft", "capacity", "failure"); `gate="rendezvous"` marks the
    step the multi-node rendezvous must complete before.
    """

    delay_s: float
    message: str
    ranks: str = ""
    bare: bool = False
    stream: str = "stderr"
    phase: str = ""
    gate: str | None = None

    def render(self, now: float) -> str:
        return self.message if self.bare else logfmt.line(now, self.message, self.ranks)


# -- ranks --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rank:
    label: str
    tp_rank: int
    first: bool
    """Global rank 0: prints the TP0-only lines (weights format, KV dtype, tqdm bars)."""
    capacity: bool
    """TP rank 0 of a DP group: prints the capacity line."""


def local_ranks(server_args: Mapping[str, Any]) -> list[_Rank]:
    """The scheduler processes this node runs, with their log prefixes (§1.2)."""
    tp, dp = int(server_args["tp_size"]), int(server_args["dp_size"])
    nnodes, node = int(server_args["nnodes"]), int(server_args["node_rank"])
    ep, pp = int(server_args["ep_size"]), int(server_args["pp_size"])
    per_node = max(1, tp // nnodes)
    ranks: list[_Rank] = []
    dp_attention = bool(server_args.get("enable_dp_attention"))
    groups = 1 if dp_attention else dp
    for group in range(groups):
        for tp_rank in range(per_node * node, per_node * (node + 1)):
            dp_rank: int | None = None
            if dp_attention:
                dp_rank = tp_rank // max(1, tp // dp)
            elif dp > 1:
                dp_rank = group
            ep_rank = tp_rank // max(1, tp // ep)
            label = logfmt.rank_prefix(
                tp_rank, tp_size=tp, dp_rank=dp_rank, pp_size=pp, ep_rank=ep_rank, ep_size=ep
            )
            ranks.append(_Rank(label, tp_rank, first=tp_rank == 0 and group == 0, capacity=tp_rank == 0))
    return ranks


# -- the steps ----------------------------------------------------------------------------------


def _tqdm(desc: str, n: int, seconds: float, *, bar: bool) -> str:
    """A finished tqdm bar as tqdm prints it at 100%."""
    elapsed = f"{int(seconds) // 60:02d}:{int(seconds) % 60:02d}"
    rate = n / seconds if seconds > 0 else float(n)
    rate_text = f"{1 / rate:5.2f}s/it" if rate < 1 else f"{rate:5.2f}it/s"
    if bar:
        return f"{desc}: 100%|{'█' * 10}| {n}/{n} [{elapsed}<00:00, {rate_text}]"
    return f"{desc}: 100% Completed | {n}/{n} [{elapsed}<00:00, {rate_text}]"


class _Builder:
    """Collects steps; time for a line another node prints carries over to the next step."""

    def __init__(self, ranks: list[_Rank], gap_scale: float = 1.0) -> None:
        self.ranks = ranks
        self.steps: list[LogStep] = []
        self.carry = 0.0
        self.gap_scale = gap_scale

    def g(self, seconds: float) -> float:
        """A fixed small gap between two lines, shrunk for scenarios whose phases are tiny."""
        return seconds * self.gap_scale

    def add(self, delay: float, message: str, phase: str, *, ranks: str = "", bare: bool = False) -> None:
        self.steps.append(LogStep(delay + self.carry, message, ranks, bare=bare, phase=phase))
        self.carry = 0.0

    def wait(self, delay: float) -> None:
        self.carry += delay

    def main(self, delay: float, message: str, phase: str, *, bare: bool = False) -> None:
        """A line of the main process (node-local, no rank prefix)."""
        self.add(delay, message, phase, bare=bare)

    def each(self, delay: float, message: str, phase: str, *, gate: str | None = None) -> None:
        """The same line from every local rank, with its own prefix."""
        for i, rank in enumerate(self.ranks):
            self.add(delay if i == 0 else 0.0, message, phase, ranks=rank.label)
        if gate is not None:
            first = len(self.steps) - len(self.ranks)
            self.steps[first].gate = gate

    def first(self, delay: float, message: str, phase: str, *, bare: bool = False) -> None:
        """A line only global rank 0 prints (TP0 lines, tqdm bars); elsewhere time just passes."""
        rank = next((r for r in self.ranks if r.first), None)
        if rank is None:
            self.wait(delay)
        else:
            self.add(delay, message, phase, ranks="" if bare else rank.label, bare=bare)

    def capacity(self, delay: float, message: str) -> None:
        printers = [r for r in self.ranks if r.capacity]
        if not printers:
            self.wait(delay)
        for i, rank in enumerate(printers):
            self.add(delay if i == 0 else 0.0, message, "capacity", ranks=rank.label)

    def failure(self, delay: float, exception_lines: Sequence[str], cause: str | None = None) -> None:
        """Every local scheduler raises; the traceback lines are bare; then the main process.

        With `cause`, Python's chained form: the exception caught first (`cause`), "During handling
        of the above exception, another exception occurred:", then the one raised while handling it.
        """
        chained = (
            [*_FRAMES, cause, "", CHAIN_DURING, "", "Traceback (most recent call last):", *_CAPTURE_FRAMES]
            if cause is not None
            else list(_FRAMES)
        )
        for i, rank in enumerate(self.ranks):
            self.add(delay if i == 0 else 0.0, logfmt.SCHEDULER_EXCEPTION_HEAD, "failure", ranks=rank.label)
            for text in [*chained, *exception_lines]:
                self.add(0.0, text, "failure", bare=True)
        self.main(self.g(0.2), logfmt.SIGQUIT_MESSAGE, "failure")


_REFUSAL_FRAMES = (
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/launch_server.py", line 59, in <module>',
    "    server_args = prepare_server_args(sys.argv[1:])",
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/server_args.py", line 6539, in '
    "prepare_server_args",
    "    return ServerArgs.from_cli_args(raw_args)",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/server_args.py", line 5975, in from_cli_args',
    "    return cls(**{attr: getattr(args, attr) for attr in attrs})",
    '  File "<string>", line 366, in __init__',
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/server_args.py", line 787, in __post_init__',
    "    self._handle_model_specific_adjustments()",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/server_args.py", line 2000, in '
    "_handle_model_specific_adjustments",
    "    self._handle_mamba_radix_cache(",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/server_args.py", line 2206, in '
    "_handle_mamba_radix_cache",
    "    raise ValueError(",
)
"""0.5.10's frames for a ValueError out of `_handle_mamba_radix_cache` (line numbers of the wheel)."""


def refusal_steps(warnings: Sequence[str], failure: str) -> list[LogStep]:
    """A launch line post-init refuses: the bare warnings printed so far, then the main
    process's uncaught traceback (bare: `prepare_server_args` runs before logging exists)."""
    steps = [LogStep(0.0, text, bare=True, phase="warnings") for text in warnings]
    steps.extend(LogStep(0.0, text, bare=True, phase="failure") for text in (*_REFUSAL_FRAMES, failure))
    return steps


CHAIN_DURING = "During handling of the above exception, another exception occurred:"
_CAPTURE_FRAMES = (
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", '
    "line 655, in __init__",
    "    raise Exception(",
)
_CAPTURE_FAILED = "Exception: Capture cuda graph failed: "


def _gb(value: float) -> str:
    return f"{value:.2f}"


def kv_allocated(tokens: int, k_gib: float, v_gib: float, dtype: str, with_dtype: bool) -> str:
    """`KV Cache is allocated. ...` (0.5.9 / 0.5.10 `mem_cache/memory_pool.py` `_finalize_allocation_log`;
    0.5.13+ adds `dtype: <torch dtype>, ` after the first sentence)."""
    head = f"KV Cache is allocated. dtype: {dtype}, " if with_dtype else "KV Cache is allocated. "
    return f"{head}#tokens: {tokens}, K size: {_gb(k_gib)} GB, V size: {_gb(v_gib)} GB"


def mamba_allocated(size: int, state_gib: float, spec_draft_tokens: int | None, spec_slots: int) -> str:
    """`Mamba Cache is allocated. ...`, 0.5.9 / 0.5.10 / 0.5.23 `mem_cache/memory_pool.py`
    `MambaPool.__init__` (the speculative form adds the intermediate caches). The twin keeps one
    state size per request; it is split here as conv 2% / ssm 98%, and the speculative
    intermediate ssm cache holds `spec_slots + 1` requests' ssm state per draft token."""
    conv, ssm = state_gib * 0.02, state_gib * 0.98
    line = (
        f"Mamba Cache is allocated. max_mamba_cache_size: {size}, "
        f"conv_state size: {_gb(conv)}GB, ssm_state size: {_gb(ssm)}GB "
    )
    if spec_draft_tokens is None:
        return line
    per_slot = ssm / (size + 1) if size >= 0 else 0.0
    inter_ssm = per_slot * (spec_slots + 1) * spec_draft_tokens
    inter_conv = conv / (size + 1) * (spec_slots + 1) * spec_draft_tokens if size >= 0 else 0.0
    return line + (
        f"intermediate_ssm_state_cache size: {_gb(inter_ssm)}GB "
        f"intermediate_conv_window_cache size: {_gb(inter_conv)}GB "
    )


def build_steps(
    post: PostInit, plan: MemoryPlan, scenario: Scenario, *, crash: str | None, ar_fusion_active: bool
) -> list[LogStep]:
    """The startup lines of one node in SGLang's order (reference §2.4, §8)."""
    a = post.server_args
    t = scenario.timings
    scale = t.startup_scale
    model = scenario.model
    phases = t.import_s + t.dist_init_s + t.weight_load_s + t.kv_alloc_s + t.cuda_graph_s + t.piecewise_s
    b = _Builder(local_ranks(a), gap_scale=min(1.0, phases / 60.0))
    for text in post.warnings:
        b.main(0.0, text, "warnings", bare=True)
    b.wait(t.import_s)
    for text in post.logged_warnings:
        b.main(0.0, text, "args")
    b.main(0.0, server_args_line(a, scenario.sglang_version), "args")
    if int(a["node_rank"]) == 0:  # the tokenizer manager runs on node 0 only
        b.main(
            b.g(0.5), "Using default HuggingFace chat template with detected content format: string", "args"
        )

    b.each(t.import_s, "Init torch distributed begin.", "dist_init")
    b.each(t.dist_init_s * 0.3, f"sglang is using nccl=={scenario.nccl_version}", "dist_init")
    b.each(
        t.dist_init_s * 0.7,
        f"Init torch distributed ends. elapsed={t.dist_init_s * scale:.2f} s, mem usage={_gb(plan.dist_init_usage_gib)} GB",
        "dist_init",
        gate="rendezvous" if int(a["nnodes"]) > 1 else None,
    )
    b.each(b.g(0.05), f"Load weight begin. avail mem={_gb(plan.pre_model_load_gib)} GB", "weights")
    b.first(b.g(0.02), "Using model weights format ['*.safetensors']", "weights")
    shards = model.checkpoint_shards
    b.first(
        b.g(0.05),
        f"Loading safetensors checkpoint shards:   0% Completed | 0/{shards} [00:00<?, ?it/s]",
        "weights",
        bare=True,
    )
    load_s = t.weight_load_s * scale
    if plan.failure_phase == "weights":
        b.failure(t.weight_load_s * 0.4, [plan.failure or ""])
        return b.steps
    b.first(
        t.weight_load_s * 0.95,
        _tqdm("Loading safetensors checkpoint shards", shards, load_s * 0.95, bar=False),
        "weights",
        bare=True,
    )
    r = release(scenario.sglang_version)
    quant = ""
    if r.load_weight_dtype:  # 0.5.9 `load_model`: the model's dtype, never the quantization
        quant = "dtype=torch.bfloat16, "
    elif model.quantization is not None:
        fmt = f", fmt={model.quantization.fmt}" if model.quantization.fmt else ""
        quant = f"quant={model.quantization.method}{fmt}, "
    b.each(
        t.weight_load_s * 0.05,
        f"Load weight end. elapsed={load_s:.2f} s, type={model.architecture}, {quant}"
        f"avail mem={_gb(plan.post_model_load_gib)} GB, mem usage={_gb(plan.weight_usage_gib)} GB.",
        "weights",
    )
    dtype = a.get("kv_cache_dtype") or "auto"
    torch_dtype = (
        "torch.bfloat16"
        if dtype == "auto" or dtype.startswith("bf")
        else f"torch.{dtype.replace('fp8_', 'float8_')}"
    )
    b.first(b.g(0.05), f"Using KV cache dtype: {torch_dtype}", "kv")
    if r.mamba_configurator and model.multimodal:  # 0.5.23 `mm_runtime_reservation_gb`
        b.each(0.0, vlm_reservation_line_0_5_23(), "kv")
    if plan.failure_phase == "kv":
        b.failure(t.kv_alloc_s, [plan.failure or ""])
        return b.steps
    if plan.max_total_tokens_warning:
        b.each(t.kv_alloc_s * 0.1, plan.max_total_tokens_warning, "kv")
    for text in plan.pool_warnings:
        b.each(0.0, text, "kv")
    if plan.max_mamba_cache_size is not None:  # the state pool is made before the KV pool
        draft = a.get("speculative_num_draft_tokens") if a.get("speculative_algorithm") else None
        b.each(
            t.kv_alloc_s * 0.1,
            mamba_allocated(
                plan.max_mamba_cache_size,
                plan.mamba_state_gib,
                int(draft) if draft is not None else None,
                plan.max_running_requests,
            ),
            "kv",
        )
    b.each(
        t.kv_alloc_s * 0.7,
        kv_allocated(
            plan.max_total_num_tokens, plan.k_size_gib, plan.v_size_gib, torch_dtype, r.kv_line_dtype
        ),
        "kv",
    )
    b.each(t.kv_alloc_s * 0.2, f"Memory pool end. avail mem={_gb(plan.pool_end_gib)} GB", "kv")
    if r.nested_graph_config:  # 0.5.23 `cuda_graph_setup.py` `capture_cuda_graphs`: prefill first
        _prefill_graph_0_5_23(b, a, plan, scenario)
        _decode_graph_0_5_23(b, a, plan, scenario, ar_fusion_active=ar_fusion_active)
    else:
        _cuda_graph(b, a, plan, scenario, ar_fusion_active=ar_fusion_active)
    if plan.failure_phase == "cuda_graph":
        # cuda_graph_runner.py `CudaGraphRunner.__init__` catches the capture's RuntimeError (torch's
        # OutOfMemoryError) and raises `Exception("Capture cuda graph failed: ...")` while handling it
        failed = plan.failure or ""
        cause = (
            "torch.OutOfMemoryError: " + failed.removeprefix(_CAPTURE_FAILED)
            if failed.startswith(_CAPTURE_FAILED)
            else None
        )
        b.failure(b.g(0.1), [failed, *CUDA_GRAPH_FAILED_HINT], cause=cause)
        return b.steps
    if not r.nested_graph_config:
        _piecewise(b, a, plan, scenario)
    if a.get("speculative_algorithm") and model.draft is not None:
        _draft(b, plan, scenario, a)
    if crash is not None:
        b.failure(b.g(0.2), [crash])
        return b.steps
    b.capacity(
        b.g(0.1),
        f"max_total_num_tokens={plan.max_total_num_tokens}, chunked_prefill_size={a['chunked_prefill_size']}, "
        f"max_prefill_tokens={a['max_prefill_tokens']}, max_running_requests={plan.max_running_requests}, "
        f"context_len={plan.context_len}, available_gpu_mem={_gb(plan.available_gpu_mem_gib)} GB",
    )
    return b.steps


def _cuda_graph(
    b: _Builder, a: Mapping[str, Any], plan: MemoryPlan, scenario: Scenario, *, ar_fusion_active: bool
) -> None:
    bs_list = decode_batch_sizes(a, scenario.sglang_version)
    if bs_list is None:
        return
    t = scenario.timings
    listed = len(bs_list) or 1
    seconds = t.cuda_graph_s * max(1, len(plan.capture_bs)) / listed
    b.each(
        b.g(0.2),
        f"Capture cuda graph begin. This can take up to several minutes. avail mem={_gb(plan.cuda_graph_begin_gib)} GB",
        "cuda_graph",
    )
    if plan.failure_phase == "cuda_graph":
        b.wait(seconds * 0.3)
        return
    if ar_fusion_active:
        world = int(a["tp_size"])
        for rank in b.ranks:
            b.add(
                b.g(0.05),
                f"FlashInfer workspace initialized for rank {rank.tp_rank}, world_size {world}, backend trtllm",
                "cuda_graph",
                ranks=rank.label,
            )
    n = len(plan.capture_bs)
    scaled = seconds * t.startup_scale
    b.first(
        seconds * 0.98,
        _tqdm(
            f"Capturing batches (bs=1 avail_mem={_gb(plan.cuda_graph_end_gib + 0.03)} GB)",
            n,
            scaled * 0.98,
            bar=True,
        ),
        "cuda_graph",
        bare=True,
    )
    b.each(
        seconds * 0.02,
        f"Capture cuda graph end. Time elapsed: {scaled:.2f} s. mem usage={_gb(plan.cuda_graph_usage_gib)} GB. "
        f"avail mem={_gb(plan.cuda_graph_end_gib)} GB.",
        "cuda_graph",
    )


def _piecewise(b: _Builder, a: Mapping[str, Any], plan: MemoryPlan, scenario: Scenario) -> None:
    if not release(scenario.sglang_version).piecewise_default_on:
        if prefill_token_sizes(a, scenario.sglang_version) is None:
            return  # 0.5.9 `init_piecewise_cuda_graphs` says nothing unless enabled
    elif a.get("disable_piecewise_cuda_graph"):
        b.each(
            b.g(0.05),
            "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set",
            "piecewise",
        )
        return
    t = scenario.timings
    n = len(plan.piecewise_sizes)
    scaled = t.piecewise_s * t.startup_scale
    first = plan.piecewise_sizes[0] if plan.piecewise_sizes else 4
    b.each(
        b.g(0.05),
        f"Capture piecewise CUDA graph begin. avail mem={_gb(plan.cuda_graph_end_gib)} GB",
        "piecewise",
    )
    b.first(
        t.piecewise_s * 0.5,
        _tqdm(f"Compiling num tokens (num_tokens={first})", n, scaled * 0.5, bar=True),
        "piecewise",
        bare=True,
    )
    b.first(
        t.piecewise_s * 0.48,
        _tqdm(
            f"Capturing num tokens (num_tokens={first} avail_mem={_gb(plan.piecewise_end_gib + 0.02)} GB)",
            n,
            scaled * 0.48,
            bar=True,
        ),
        "piecewise",
        bare=True,
    )
    b.each(
        t.piecewise_s * 0.02,
        f"Capture piecewise CUDA graph end. Time elapsed: {scaled:.2f} s. mem usage={_gb(plan.piecewise_usage_gib)} GB. "
        f"avail mem={_gb(plan.piecewise_end_gib)} GB.",
        "piecewise",
    )


def _prefill_graph_0_5_23(b: _Builder, a: Mapping[str, Any], plan: MemoryPlan, scenario: Scenario) -> None:
    """0.5.23 `model_executor/model_runner_components/cuda_graph_setup.py` `capture_prefill_graph`
    (the tqdm bar: `runner/prefill_cuda_graph_runner.py` `_capture_one_stream`, largest shape first)."""
    listed = prefill_token_sizes(a, scenario.sglang_version)
    if listed is None:
        return
    backend = a["cuda_graph_config"]["prefill"]["backend"]
    t = scenario.timings
    sizes = list(plan.piecewise_sizes)
    scaled = t.piecewise_s * t.startup_scale
    b.each(
        b.g(0.05),
        f"Capture target prefill CUDA graph begin. backend={backend}, num_tokens={sizes}, "
        f"avail mem={_gb(plan.cuda_graph_begin_gib)} GB",
        "piecewise",
    )
    b.first(
        t.piecewise_s * 0.98,
        _tqdm(
            f"Capturing prefill shape (num_tokens={sizes[0] if sizes else 4} "
            f"avail_mem={_gb(plan.cuda_graph_begin_gib - plan.piecewise_usage_gib + 0.02)} GB)",
            len(sizes),
            scaled * 0.98,
            bar=True,
        ),
        "piecewise",
        bare=True,
    )
    b.each(
        t.piecewise_s * 0.02,
        f"Capture target prefill CUDA graph end. elapsed={scaled:.2f} s, "
        f"mem usage={_gb(plan.piecewise_usage_gib)} GB, "
        f"avail mem={_gb(plan.cuda_graph_begin_gib - plan.piecewise_usage_gib)} GB.",
        "piecewise",
    )


def _decode_graph_0_5_23(
    b: _Builder, a: Mapping[str, Any], plan: MemoryPlan, scenario: Scenario, *, ar_fusion_active: bool
) -> None:
    """0.5.23 `cuda_graph_setup.py` `capture_decode_graph`: `target verify` under speculative
    decoding (num_tokens_per_req = the draft tokens), else `target decode`; the end line names
    the captured batch sizes."""
    if decode_batch_sizes(a, scenario.sglang_version) is None:
        return
    t = scenario.timings
    spec = a.get("speculative_algorithm") is not None
    name = "target verify" if spec else "target decode"
    per_req = int(a.get("speculative_num_draft_tokens") or 1) if spec else 1
    backend = a["cuda_graph_config"]["decode"]["backend"]
    before = plan.cuda_graph_begin_gib - plan.piecewise_usage_gib
    after = before - plan.cuda_graph_usage_gib
    n = len(plan.capture_bs)
    seconds = t.cuda_graph_s * max(1, n) / (len(a["cuda_graph_config"]["decode"]["bs"] or []) or 1)
    scaled = seconds * t.startup_scale
    b.each(
        b.g(0.2),
        f"Capture {name} CUDA graph begin. backend={backend}, num_tokens_per_req={per_req}, avail mem={_gb(before)} GB",
        "cuda_graph",
    )
    if plan.failure_phase == "cuda_graph":
        b.wait(seconds * 0.3)
        return
    if ar_fusion_active:
        world = int(a["tp_size"])
        for rank in b.ranks:
            b.add(
                b.g(0.05),
                f"FlashInfer workspace initialized for rank {rank.tp_rank}, world_size {world}, backend trtllm",
                "cuda_graph",
                ranks=rank.label,
            )
    b.first(
        seconds * 0.98,
        _tqdm(f"Capturing batches (bs=1 avail_mem={_gb(after + 0.03)} GB)", n, scaled * 0.98, bar=True),
        "cuda_graph",
        bare=True,
    )
    b.each(
        seconds * 0.02,
        f"Capture {name} CUDA graph end. bs={list(plan.capture_bs)}, elapsed={scaled:.2f} s, "
        f"mem usage={_gb(plan.cuda_graph_usage_gib)} GB, avail mem={_gb(after)} GB.",
        "cuda_graph",
    )


def _draft(b: _Builder, plan: MemoryPlan, scenario: Scenario, a: Mapping[str, Any]) -> None:
    """The EAGLE/MTP draft worker: its own weights, KV pool and draft CUDA graphs (0.5.23:
    `speculative/eagle_worker_v2.py`, capture lines on rank 0 only, with backend and sizes)."""
    draft = scenario.model.draft
    assert draft is not None
    r = release(scenario.sglang_version)
    t = scenario.timings
    scale = t.startup_scale
    avail = plan.piecewise_end_gib
    b.each(b.g(0.05), f"Load weight begin. avail mem={_gb(avail)} GB", "draft")
    avail -= plan.draft_weight_gib
    dtype = "dtype=torch.bfloat16, " if r.load_weight_dtype else ""
    b.each(
        t.draft_s * 0.3,
        f"Load weight end. elapsed={t.draft_s * 0.3 * scale:.2f} s, type={draft.architecture}, {dtype}"
        f"avail mem={_gb(avail)} GB, mem usage={_gb(plan.draft_weight_gib)} GB.",
        "draft",
    )
    half = plan.draft_kv_gib / 2
    b.each(
        b.g(0.05),
        kv_allocated(plan.max_total_num_tokens, half, half, "torch.bfloat16", r.kv_line_dtype),
        "draft",
    )
    avail -= plan.draft_kv_gib
    b.each(b.g(0.02), f"Memory pool end. avail mem={_gb(avail)} GB", "draft")
    if not plan.capture_bs:
        return
    for kind, share in (("draft cuda graph", 0.4), ("draft extend cuda graph", 0.3)):
        usage = plan.draft_graph_usage_gib * (share / 0.7)
        if r.nested_graph_config:
            extend = "extend" in kind
            per_req = (
                int(a.get("speculative_num_draft_tokens") or 1)
                if extend
                else int(a.get("speculative_eagle_topk") or 1)
            )
            label = "draft extend" if extend else "draft decode"
            backend = a["cuda_graph_config"]["decode"]["backend"]
            b.first(
                b.g(0.05),
                f"Capture {label} CUDA graph begin. backend={backend}, num_tokens_per_req={per_req}, "
                f"bs={list(plan.capture_bs)}, avail mem={_gb(avail)} GB",
                "draft",
            )
            avail -= usage
            b.first(
                t.draft_s * share,
                f"Capture {label} CUDA graph end. elapsed={t.draft_s * share * scale:.2f} s, "
                f"mem usage={_gb(usage)} GB, avail mem={_gb(avail)} GB.",
                "draft",
            )
            continue
        b.each(
            b.g(0.05),
            f"Capture {kind} begin. This can take up to several minutes. avail mem={_gb(avail)} GB",
            "draft",
        )
        avail -= usage
        b.each(
            t.draft_s * share,
            f"Capture {kind} end. Time elapsed: {t.draft_s * share * scale:.2f} s. mem usage={_gb(usage)} GB. "
            f"avail mem={_gb(avail)} GB.",
            "draft",
        )
