"""What one start of the twin derives from its resolution: seed, noise, speed, truth, memory.

Kept apart from `runtime.py` so the process logic reads as a sequence, and so these small
derivations can be unit-tested without starting anything.

* The start seed is `SGLANG_TWIN_START_SEED` when set (tests, reproducible runs), else fresh
  randomness: real restarts never measure the same free memory or speed twice. The scenario's
  `noise.seed` is mixed in, and the seed is written to the truth file either way.
* The per-start speed noise is one lognormal draw (mean 1, `noise.run_cv`) from that seed.
"""

from __future__ import annotations

import os
import random
from typing import Any

from .scenario import Scenario, load_scenario
from .sched import ThroughputModel, lognormal_factor
from .startup import Resolved, resolve
from .truth import jsonable, now_unix

__all__ = [
    "CRASH_LINES",
    "RENDEZVOUS_FRAMES",
    "eos_token_id",
    "gpu_memory_used_mib",
    "load_start",
    "run_noise",
    "scenario_path",
    "spec_accept_length",
    "start_record",
    "throughput_model",
]

DEFAULT_SCENARIO_PATHS = ("/etc/sglang-twin/scenario.json",)

RENDEZVOUS_FRAMES = (
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", line 3560, '
    "in run_scheduler_process",
    "    scheduler = Scheduler(",
    '  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/model_executor/model_runner.py", line 733, '
    "in init_torch_distributed",
    "    init_distributed_environment(",
    '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper',
    "    return func(*args, **kwargs)",
)
CRASH_LINES = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
    "below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
)


def scenario_path() -> str:
    """`SGLANG_TWIN_SCENARIO`, else `scenario.json` in this package, else /etc/sglang-twin/."""
    env = os.environ.get("SGLANG_TWIN_SCENARIO")
    if env:
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenario.json")
    for path in (here, *DEFAULT_SCENARIO_PATHS):
        if os.path.exists(path):
            return path
    return DEFAULT_SCENARIO_PATHS[0]


def start_seed(scenario: Scenario) -> int:
    env = os.environ.get("SGLANG_TWIN_START_SEED")
    base = int(env) if env else int.from_bytes(os.urandom(4), "big")
    return (base ^ (scenario.noise.seed * 0x9E3779B1)) & 0xFFFFFFFF


def load_start(argv: list[str]) -> tuple[Resolved, int]:
    scenario = load_scenario(scenario_path())
    seed = start_seed(scenario)
    return resolve(argv, scenario, start_seed=seed), seed


def run_noise(scenario: Scenario, seed: int) -> float:
    rng = random.Random(seed ^ 0xA5A5A5A5)  # noqa: S311 - simulation noise, not secrets
    return lognormal_factor(rng, scenario.noise.run_cv)


def throughput_model(resolved: Resolved, noise: float) -> ThroughputModel:
    tp = resolved.scenario.throughput
    return ThroughputModel(
        single_stream_tok_s=tp.single_stream_tok_s,
        points=tuple((float(n), float(v)) for n, v in tp.aggregate_curve),
        prefill_tok_s=tp.prefill_tok_s,
        factor=resolved.throughput_factor * noise,
        time_scale=resolved.scenario.timings.decode_scale,
    )


def eos_token_id(scenario: Scenario) -> int:
    """SGLang's `matched_stop` for an EOS stop is the EOS id; the usual one per model family."""
    kind = scenario.model.model_type.lower()
    if "qwen" in kind:
        return 151645
    if "llama" in kind:
        return 128009
    return 2


def spec_accept_length(args: dict[str, Any]) -> float | None:
    """A plausible mean accept length for speculative decoding (the twin does not draft)."""
    if not args.get("speculative_algorithm"):
        return None
    steps = int(args.get("speculative_num_steps") or 3)
    drafts = int(args.get("speculative_num_draft_tokens") or steps + 1)
    return round(min(float(drafts), 1.0 + 0.55 * steps), 2)


def _free_after(resolved: Resolved, phase: str) -> float | None:
    """Free GiB per GPU once `phase` is done (None: nothing held yet)."""
    m = resolved.memory
    return {
        "loading": None,
        "warnings": None,
        "args": None,
        "rendezvous": None,
        "dist_init": m.pre_model_load_gib,
        "weights": m.post_model_load_gib,
        "kv": m.pool_end_gib,
        "draft": m.pool_end_gib,
        "cuda_graph": m.cuda_graph_end_gib or m.pool_end_gib,
        "piecewise": m.piecewise_end_gib or m.cuda_graph_end_gib or m.pool_end_gib,
    }.get(phase, m.available_gpu_mem_gib)


def gpu_memory_used_mib(resolved: Resolved, phase: str) -> list[int]:
    """memory.used per GPU of this node as nvidia-smi would show it in this phase: the idle
    usage everywhere, plus what the server holds on the GPUs its local ranks use."""
    gpu = resolved.scenario.gpu
    idle = round(gpu.idle_used_gib * 1024)
    free = _free_after(resolved, phase)
    local = len(resolved.tp_ranks) or 1
    used = []
    for i in range(gpu.gpus_per_node):
        if free is None or i >= local or free <= 0:
            used.append(idle)
        else:
            held = max(0.0, resolved.memory.free_at_start_gib - free)
            used.append(
                round((gpu.idle_used_gib + resolved.memory.jitter_gib + held) * 1024) if held else idle
            )
    return used


def start_record(resolved: Resolved, argv: list[str], seed: int, noise: float) -> dict[str, Any]:
    m = resolved.memory
    timings = resolved.scenario.timings
    return {
        "kind": "start",
        "t": now_unix(),
        "pid": os.getpid(),
        "node_rank": resolved.node_rank,
        "argv": argv,
        "scenario": resolved.scenario.name,
        "start_seed": seed,
        "run_noise": round(noise, 6),
        "throughput_factor": resolved.throughput_factor,
        "effective": jsonable(resolved.effective),
        "implied": jsonable(resolved.implied),
        "active_rules": list(resolved.active_rules),
        "failure": resolved.failure,
        "exit_code": resolved.exit_code,
        "killed_by": resolved.killed_by,
        "memory": jsonable(m),
        "parsed_max_running_requests": resolved.server_args.get("max_running_requests"),
        "startup_scale": timings.startup_scale,
        "decode_scale": timings.decode_scale,
    }
