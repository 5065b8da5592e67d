"""A silent hang in one startup stage, as a real multi-node start shows it: the lines stop.

Why: real SGLang does not fail when a rank never finishes a stage. A peer that never reaches the
rendezvous leaves every rank waiting after `sglang is using nccl==...` (torch's rendezvous
timeout is long when `--dist-timeout` is unset); a rank stuck in its weight load (a hung network
filesystem) leaves its peers waiting in their next collective once their own load is done; a
graph capture that deadlocks stops every rank, since each capture runs the model's collectives
in lockstep. Nothing is printed and the port never opens. flagbot must notice the silence per
stage (`bot.target.stalls`); the twin's fault `hang_in` (and a flag's effect of that name) with
`hang_node` (the node rank that hangs; None: every node) plays it.

Where each node stops (the index of the step it never prints):

| stage | the node that hangs | its peers |
|---|---|---|
| `distributed_init` | before `Init torch distributed ends.` | the same |
| `weight_load` | before `Load weight end.` (after `Load weight begin.`; global rank 0 also prints its 0 % shard bar) | after their load, before the KV pool |
| `graph_capture` | before the first `Capture ... end` | the same |
| `warmup` | node 0's warmup request never returns (`hang_during_warmup`) | idle, as after any start |
"""

from __future__ import annotations

from collections.abc import Sequence

from .steps import LogStep

STAGES = ("distributed_init", "weight_load", "graph_capture", "warmup")
_END_OF = {
    "distributed_init": "Init torch distributed ends",
    "weight_load": "Load weight end",
}
_GRAPH_PHASES = frozenset({"cuda_graph", "piecewise", "draft"})


def hang_step(steps: Sequence[LogStep], stage: str | None, *, hanging: bool) -> int | None:
    """The index of the first step this node never prints, or None if it does not hang here
    (no hang, the warmup, which the runtime plays, or a stage this start has no lines for)."""
    if stage is None or stage == "warmup":
        return None
    for index, step in enumerate(steps):
        if stage == "graph_capture":
            if step.phase in _GRAPH_PHASES and step.message.startswith("Capture ") and " end" in step.message:
                return index
        elif step.message.startswith(_END_OF[stage]):
            if stage == "weight_load" and not hanging:
                return _after_weights(steps, index)
            return index
    return None


def _after_weights(steps: Sequence[LogStep], end: int) -> int | None:
    """A peer of the hung node finishes its own load and stops at the next step (the KV pool)."""
    return end + 1 if end + 1 < len(steps) else None
