"""Has a start stopped making progress inside one startup stage? Which node is behind?

Why: a multi-node SGLang start whose peer never reaches the rendezvous does not fail: every rank
that arrived prints `Init torch distributed begin.` and the NCCL line, then waits in silence
(`--dist-timeout` unset leaves torch's own long default). The same happens when a rank hangs
in its weight load or a graph capture: its peers block in their next collective. Without a
bound per stage the start is only noticed at `timeouts.ready` (30 minutes by default).

Each node's journal tells where it is. `stage_of` places a line in the startup order
(`distributed_init` until `Init torch distributed ends.`, `weight_load` until `Memory pool
end`, `graph_capture` until the capacity line, `warmup` until ready). Progress is a new journal
line from that node, or on node 0 a change of its `/health` answer. The node *behind* is the
one furthest back in that order (of equals, the one silent longest): the others wait for it in
a collective, so their silence is not a stall of their own. Once node 0 is warming up, the
warmup is node 0's alone (only it serves HTTP and sends the warmup request) and the other
nodes, idle by then, are not looked at. The start is stalled when the node behind has been
silent for longer than its stage's bound (`StallBounds`).

Pure and clock-free: every call is given the moment it is about, so the decision can be tested
in virtual time; readiness (`bot.target.readiness`) feeds it and asks for its `deadline`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from bot.sglang import log_events as ev

Stage = Literal["distributed_init", "weight_load", "graph_capture", "warmup"]

STAGE_WORDS: dict[Stage, str] = {
    "distributed_init": "distributed init",
    "weight_load": "weight load",
    "graph_capture": "graph capture",
    "warmup": "warmup",
}
STAGE_SETTINGS: dict[Stage, str] = {
    "distributed_init": "timeouts.stall_distributed_init",
    "weight_load": "timeouts.stall_weight_load",
    "graph_capture": "timeouts.stall_graph_capture",
    "warmup": "timeouts.warmup",
}

# Steps in the order a start prints them; a node's place is the furthest step it has printed.
NOT_STARTED, DIST_BEGIN, DIST_NCCL, DIST_END = 0, 1, 2, 3
WEIGHTS_BEGIN, WEIGHTS_END, KV_POOL = 4, 5, 6
GRAPHS, CAPACITY, SERVING = 7, 8, 9


def step_of(message: str) -> int | None:
    """The startup step a journal message shows (the constants above), None for any other line."""
    text = message.lstrip()
    if text.startswith("Init torch distributed begin"):
        return DIST_BEGIN
    if "is using nccl==" in text:
        return DIST_NCCL
    if text.startswith("Init torch distributed ends"):
        return DIST_END
    loaded = ev.weights(message)
    if loaded is not None:
        return WEIGHTS_BEGIN if loaded["phase"] == "begin" else WEIGHTS_END
    if ev.kv_cache(message) is not None or ev.mamba_cache(message) is not None:
        return KV_POOL
    if text.startswith("Memory pool end") or ev.cuda_graph(message) is not None:
        return GRAPHS
    if "max_total_num_tokens=" in message and ev.capacity(message):
        return CAPACITY
    if "Uvicorn running on" in message or "Started server process" in message:
        return SERVING
    return None


def stage_of(step: int) -> Stage:
    """The stage a node is in once `step` is the furthest it has printed."""
    if step < DIST_END:
        return "distributed_init"
    if step < GRAPHS:
        return "weight_load"
    if step < CAPACITY:
        return "graph_capture"
    return "warmup"


class TimeoutsLike(Protocol):
    """The part of `bot.config.schema.TargetTimeouts` the bounds come from."""

    @property
    def stall_distributed_init(self) -> timedelta: ...
    @property
    def stall_weight_load(self) -> timedelta: ...
    @property
    def stall_graph_capture(self) -> timedelta: ...
    @property
    def warmup(self) -> timedelta: ...


@dataclass(frozen=True)
class StallBounds:
    """Seconds of silence each stage may last (`[targets.X.timeouts]`)."""

    distributed_init: float
    weight_load: float
    graph_capture: float
    warmup: float

    @classmethod
    def from_timeouts(cls, timeouts: TimeoutsLike) -> StallBounds:
        return cls(
            timeouts.stall_distributed_init.total_seconds(),
            timeouts.stall_weight_load.total_seconds(),
            timeouts.stall_graph_capture.total_seconds(),
            timeouts.warmup.total_seconds(),
        )

    def of(self, stage: Stage) -> float:
        bound: float = getattr(self, stage)
        return bound


@dataclass
class NodeProgress:
    """Where one node's start is and when it last moved."""

    name: str
    index: int
    step: int
    moved_at: float
    last_line: str | None = None


@dataclass(frozen=True)
class Stall:
    """The verdict: the start stalled in `stage`, `node` is behind."""

    stage: Stage
    node: str
    index: int
    silent_s: float
    bound_s: float
    last_line: str | None

    def describe(self) -> str:
        signals = "no new journal line or /health change" if self.index == 0 else "no new journal line"
        said = f"; the last line it wrote: {self.last_line}" if self.last_line else "; it wrote no line yet"
        return (
            f"stalled in {STAGE_WORDS[self.stage]} on node {self.index} ({self.node}): {signals} for "
            f"{self.silent_s:.0f} s ({STAGE_SETTINGS[self.stage]} = {self.bound_s:g} s){said}"
        )


class StallWatch:
    """Every node's place in the startup order and last progress; says when the start stalled."""

    def __init__(self, bounds: StallBounds, nodes: list[tuple[str, int]], at: float) -> None:
        """`nodes`: (name, index) of each node; the wait begins at `at`, which counts as progress
        (a node whose new start never shows stays behind from then on)."""
        self.bounds = bounds
        self.nodes = {name: NodeProgress(name, index, NOT_STARTED, at) for name, index in nodes}

    def started(self, node: str, at: float) -> None:
        """The node's new invocation appeared (`systemctl show`)."""
        self.nodes[node].moved_at = at

    def line(self, node: str, message: str, at: float) -> None:
        """A journal line of the node's new start, read at `at`."""
        progress = self.nodes[node]
        progress.moved_at = at
        progress.last_line = message.strip()[:300] or progress.last_line
        step = step_of(message)
        if step is not None and step > progress.step:
            progress.step = step

    def health(self, code: int | None, at: float) -> None:
        """Node 0's `/health` answer changed: progress; a 503 means uvicorn is up (warmup)."""
        for progress in self.nodes.values():
            if progress.index == 0:
                progress.moved_at = at
                if code is not None:
                    progress.step = max(progress.step, SERVING)

    def behind(self) -> NodeProgress | None:
        """The node the others wait for: furthest back in the startup order, then silent longest."""
        nodes = list(self.nodes.values())
        first = next((n for n in nodes if n.index == 0), None)
        if first is not None and stage_of(first.step) == "warmup":
            nodes = [first]
        return min(nodes, key=lambda n: (n.step, n.moved_at), default=None)

    def deadline(self) -> float | None:
        """The moment the start counts as stalled if nothing moves before it."""
        node = self.behind()
        return None if node is None else node.moved_at + self.bounds.of(stage_of(node.step))

    def stalled(self, now: float) -> Stall | None:
        """The stall at `now`, or None while the node behind is inside its stage's bound."""
        node = self.behind()
        if node is None:
            return None
        stage = stage_of(node.step)
        bound = self.bounds.of(stage)
        silent = now - node.moved_at
        if silent < bound:
            return None
        return Stall(stage, node.name, node.index, silent, bound, node.last_line)
