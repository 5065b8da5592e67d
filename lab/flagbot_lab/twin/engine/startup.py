"""One start of the twin, resolved ahead of time: arguments, memory, and the startup log lines.

Why precomputed: everything SGLang prints between `python -m sglang.launch_server` and uvicorn
starting follows from the arguments and the hardware, so `resolve` computes it all at once and
hands the runtime a list of `LogStep`s to pace and print (reference §8 order). The runtime owns
the clock (it multiplies each `delay_s` by `timings.startup_scale`), the rendezvous (a step
with `gate="rendezvous"` must wait for the peers) and everything after the last step (uvicorn,
warmup, the ready line, serving, shutdown).

If `Resolved.failure` is set, the steps end with the failure's lines (the scheduler traceback
and the main process's sigquit line); the runtime prints them and dies as SGLang 0.5.10 does,
without starting uvicorn: the launch-phase SIGQUIT handler (`entrypoints/engine.py`) calls
`kill_process_tree(os.getpid())`, which SIGKILLs the main process itself (`utils/common.py`), so
systemd sees `code=killed, status=9/KILL`, not an exit status (`killed_by`).
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .adjust import PostInit, post_init, server_args_line
from .args import parse
from .defaults import sm90_or_sm100
from .memory import MemoryPlan, plan_memory, refused_plan
from .scenario import Scenario
from .steps import LogStep, build_steps, refusal_steps

__all__ = ["FAILURE_SIGNAL", "LogStep", "MemoryPlan", "Resolved", "dry_run", "resolve", "resolve_args"]

FAILURE_SIGNAL = signal.SIGKILL
"""How a start that fails in a scheduler ends: the main process SIGKILLs itself (see above)."""


@dataclass
class Resolved:
    """Everything one start of the twin will show. `effective` has max_running_requests,
    max_total_num_tokens, context_len, chunked_prefill_size, max_prefill_tokens,
    available_gpu_mem_gb, max_mamba_cache_size and max_req_input_len (0 / None on failure)."""

    server_args: dict[str, Any]
    warnings: list[str]
    implied: dict[str, Any]
    memory: MemoryPlan
    steps: list[LogStep]
    failure: str | None
    exit_code: int | None
    """The exit status of a failure in the main process itself (none of the twin's faults yet)."""
    killed_by: int | None
    """The signal a failed start dies of (`FAILURE_SIGNAL` for a scheduler's failure)."""
    throughput_factor: float
    node_rank: int
    effective: dict[str, Any]
    scenario: Scenario
    tp_ranks: list[int] = field(default_factory=list)
    active_rules: list[str] = field(default_factory=list)
    requested: set[str] = field(default_factory=set)
    hang_during_warmup: bool = False
    """The scenario's fault, or an active flag's effect: the warmup request never completes."""
    hang_in: str | None = None
    """The stage this start hangs in, silent (the fault or an active flag's effect, `engine/hangs.py`)."""
    hang_node: int | None = None
    """The node rank that hangs in `hang_in` (None: every node); its peers wait for it."""

    def startup_seconds(self) -> float:
        """Unscaled seconds from process start to the last step."""
        return sum(step.delay_s for step in self.steps)

    def scheduler_info(self) -> dict[str, Any]:
        """The part of `/server_info` that comes from scheduler 0's ready message (§4.3)."""
        return {
            "status": "ready",
            "max_total_num_tokens": self.effective["max_total_num_tokens"],
            "max_req_input_len": self.effective["max_req_input_len"],
        }

    def internal_state(self) -> dict[str, Any]:
        """One `internal_states[i]` of `/server_info` (the runtime adds `last_gen_throughput`)."""
        state = dict(self.server_args)
        state["max_mamba_cache_size"] = self.memory.max_mamba_cache_size
        state["memory_usage"] = {
            "weight": round(self.memory.weight_usage_gib, 2),
            "kvcache": round(self.memory.k_size_gib + self.memory.v_size_gib, 2),
            "token_capacity": int(self.memory.max_total_num_tokens),
            "graph": round(self.memory.cuda_graph_usage_gib + self.memory.piecewise_usage_gib, 2),
        }
        state["effective_max_running_requests_per_dp"] = self.memory.max_running_requests
        return state

    def server_info(self, last_gen_throughput: float = 0.0) -> dict[str, Any]:
        """`/server_info`: post-init args, scheduler info, internal states, version.

        One internal state per DP rank, with or without DP attention: the tokenizer manager fans
        the request out to `server_args.dp_size` schedulers
        (python/sglang/srt/managers/tokenizer_communicator_mixin.py).
        """
        states = []
        for _ in range(int(self.server_args.get("dp_size") or 1)):
            state = self.internal_state()
            state["last_gen_throughput"] = last_gen_throughput
            states.append(state)
        info = dict(self.server_args)
        info.update(self.scheduler_info())
        info["internal_states"] = states
        info["version"] = self.scenario.sglang_version
        return info

    def model_info(self) -> dict[str, Any]:
        """`/model_info` (§4.4)."""
        return {
            "model_path": self.server_args["model_path"],
            "tokenizer_path": self.server_args["tokenizer_path"],
            "is_generation": True,
            "preferred_sampling_params": self.server_args.get("preferred_sampling_params"),
            "weight_version": self.server_args.get("weight_version", "default"),
            "has_image_understanding": self.scenario.model.multimodal,
            "has_audio_understanding": False,
            "model_type": self.scenario.model.model_type,
            "architectures": [self.scenario.model.architecture],
        }


# -- public entry points ------------------------------------------------------------------------


def resolve_args(
    argv: Sequence[str], scenario: Scenario, *, seed: int, env: Mapping[str, str] | None = None
) -> PostInit:
    """argparse (exits 2 on a bad command line) + post-init, without the memory model."""
    parsed = parse(argv, scenario.sglang_version)
    return post_init(parsed, scenario, seed=seed, env=os.environ if env is None else env)


def resolve(
    argv: list[str], scenario: Scenario, *, start_seed: int, env: Mapping[str, str] | None = None
) -> Resolved:
    """Resolve one start: raises SystemExit(2) (argparse) for a bad command line, before any
    line of the startup is produced; `start_seed` seeds `random_seed` and the memory jitter."""
    post = resolve_args(argv, scenario, seed=start_seed, env=env)
    if post.refused is not None:
        return _refused(post, scenario)
    a = post.server_args
    active = scenario.active_effects(a)
    effects = [effect for _rule, effect in active]
    plan = plan_memory(a, scenario, start_seed=start_seed, effects=effects)
    factor = 1.0
    crash: str | None = None
    for effect in effects:
        factor *= effect.throughput_factor
        crash = crash or effect.crash
    gpu = scenario.gpu
    ar_fusion_active = (
        bool(a.get("enable_flashinfer_allreduce_fusion"))
        and sm90_or_sm100(gpu)
        and int(a["tp_size"]) > 1
        and not a.get("enable_dp_attention")
    )
    steps = build_steps(post, plan, scenario, crash=crash, ar_fusion_active=ar_fusion_active)
    failure = plan.failure or crash
    ok = failure is None
    effective = {
        "max_running_requests": plan.max_running_requests,
        "max_total_num_tokens": plan.max_total_num_tokens,
        "context_len": plan.context_len,
        "chunked_prefill_size": a["chunked_prefill_size"],
        "max_prefill_tokens": a["max_prefill_tokens"],
        "available_gpu_mem_gb": round(plan.available_gpu_mem_gib, 2) if ok else 0.0,
        "max_mamba_cache_size": plan.max_mamba_cache_size,
        "max_req_input_len": min(plan.context_len - 1, plan.max_total_num_tokens - 1) - 5 if ok else 0,
    }
    tp, nnodes, node = int(a["tp_size"]), int(a["nnodes"]), int(a["node_rank"])
    hanging = next((e for e in effects if e.hang_in is not None), None)
    hang_in = scenario.faults.hang_in or (hanging.hang_in if hanging else None)
    hang_node = (
        scenario.faults.hang_node if scenario.faults.hang_in else (hanging.hang_node if hanging else None)
    )
    per_node = max(1, tp // nnodes)
    return Resolved(
        server_args=a,
        warnings=post.warnings,
        implied=post.implied,
        memory=plan,
        steps=steps,
        failure=failure,
        exit_code=None,
        killed_by=None if ok else FAILURE_SIGNAL,
        throughput_factor=factor,
        node_rank=node,
        effective=effective,
        scenario=scenario,
        tp_ranks=list(range(per_node * node, per_node * (node + 1))),
        active_rules=list(dict.fromkeys(rule.name for rule, _effect in active)),
        requested=post.requested,
        hang_during_warmup=scenario.faults.hang_during_warmup
        or any(effect.hang_during_warmup for effect in effects)
        or (hang_in == "warmup" and hang_node in (None, 0)),
        hang_in=hang_in,
        hang_node=hang_node,
    )


def _refused(post: PostInit, scenario: Scenario) -> Resolved:
    """A launch line post-init refuses: the main process prints its bare warnings and Python's
    traceback of the ValueError, and exits 1 (`code=exited, status=1/FAILURE`): no scheduler was
    started, so no SIGQUIT handler kills anything."""
    a = post.server_args
    failure = f"ValueError: {post.refused}"
    plan = refused_plan(scenario, failure)
    node = int(a.get("node_rank") or 0)
    return Resolved(
        server_args=a,
        warnings=post.warnings,
        implied=post.implied,
        memory=plan,
        steps=refusal_steps(post.warnings, failure),
        failure=failure,
        exit_code=1,
        killed_by=None,
        throughput_factor=1.0,
        node_rank=node,
        effective={
            "max_running_requests": 0,
            "max_total_num_tokens": 0,
            "context_len": plan.context_len,
            "chunked_prefill_size": a.get("chunked_prefill_size"),
            "max_prefill_tokens": a.get("max_prefill_tokens"),
            "available_gpu_mem_gb": 0.0,
            "max_mamba_cache_size": None,
            "max_req_input_len": 0,
        },
        scenario=scenario,
        requested=post.requested,
    )


def dry_run(argv: list[str], scenario: Scenario) -> str:
    """The `server_args=` text a start with `argv` would print (`ServerArgs(...)`, or the
    resolved dict from 0.5.19), nothing loaded (random_seed is random per call, as on a real
    server)."""
    post = resolve_args(argv, scenario, seed=random.randrange(1 << 31))  # noqa: S311 - not crypto
    if post.refused is not None:
        return f"ValueError: {post.refused}"
    return server_args_line(post.server_args, scenario.sglang_version)
