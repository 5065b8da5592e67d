"""The stall decision per stage, in virtual time: which stage a line puts a node in, which node is
behind, and when its stage's bound runs out (`bot.target.stalls`). No clock is read: every call
is given its moment, so the bounds here are the documented defaults, in minutes."""

from __future__ import annotations

import httpx
import pytest

from bot.config.schema import TargetTimeouts
from bot.target.readiness import wait_ready
from bot.target.stalls import StallBounds, StallWatch, stage_of, step_of
from tests.unit.target.scripted_node import ScriptedNode, health_transport, journal_json, show_text

# Real 0.5.10 lines (docs: /work/shared/reference/sglang.md §2.4 and §8), rank prefix removed
DIST_BEGIN = "Init torch distributed begin."
NCCL = "sglang is using nccl==2.27.5"
DIST_END = "Init torch distributed ends. elapsed=2.87 s, mem usage=1.21 GB"
WEIGHTS_BEGIN = "Load weight begin. avail mem=138.03 GB"
WEIGHTS_END = (
    "Load weight end. elapsed=58.31 s, type=Qwen3MoeForCausalLM, avail mem=83.28 GB, mem usage=54.75 GB."
)
KV = "KV Cache is allocated. #tokens: 1528503, K size: 34.26 GB, V size: 34.26 GB"
POOL_END = "Memory pool end. avail mem=14.08 GB"
GRAPH_BEGIN = "Capture cuda graph begin. This can take up to several minutes. avail mem=13.90 GB"
CAPACITY = (
    "max_total_num_tokens=1528503, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=4096, context_len=40960, available_gpu_mem=11.93 GB"
)
MIN = 60.0
NEW0, NEW1 = "b" * 32, "c" * 32
DEFAULTS = StallBounds.from_timeouts(TargetTimeouts())


def watch() -> StallWatch:
    return StallWatch(DEFAULTS, [("n0", 0), ("n1", 1)], at=0.0)


def test_the_documented_defaults_are_the_bounds() -> None:
    assert StallBounds(10 * MIN, 30 * MIN, 15 * MIN, 5 * MIN) == DEFAULTS
    shorter = StallBounds.from_timeouts(TargetTimeouts.model_validate({"stall_weight_load": "5s"}))
    assert shorter.weight_load == 5.0 and shorter.distributed_init == 10 * MIN


@pytest.mark.parametrize(
    ("line", "stage"),
    [
        (DIST_BEGIN, "distributed_init"),
        (NCCL, "distributed_init"),
        (DIST_END, "weight_load"),
        (WEIGHTS_BEGIN, "weight_load"),
        (WEIGHTS_END, "weight_load"),
        (KV, "weight_load"),
        (POOL_END, "graph_capture"),
        (GRAPH_BEGIN, "graph_capture"),
        (
            "Capture piecewise CUDA graph end. Time elapsed: 43.10 s. mem usage=0.62 GB. avail mem=11.93 GB.",
            "graph_capture",
        ),
        (CAPACITY, "warmup"),
        ("INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", "warmup"),
    ],
)
def test_each_startup_line_places_the_node_in_its_stage(line: str, stage: str) -> None:
    step = step_of(line)
    assert step is not None and stage_of(step) == stage


def test_other_lines_place_nothing() -> None:
    assert step_of("Using model weights format ['*.safetensors']") is None
    assert step_of("max_total_tokens=131072 is larger than the profiled value -561981.") is None


def test_a_peer_that_never_arrives_stalls_in_distributed_init_after_its_bound() -> None:
    """Both ranks began the rendezvous; node 0 printed the NCCL line and stopped, node 1 never
    got further than its begin line: node 1 is behind, silent since 0:05."""
    w = watch()
    w.started("n0", 1.0)
    w.started("n1", 1.0)
    w.line("n0", DIST_BEGIN, 4.0)
    w.line("n1", DIST_BEGIN, 5.0)
    w.line("n0", NCCL, 6.0)
    assert w.deadline() == 5.0 + 10 * MIN
    assert w.stalled(5.0 + 10 * MIN - 1) is None
    stall = w.stalled(5.0 + 10 * MIN)
    assert stall is not None
    assert (stall.stage, stall.node, stall.index) == ("distributed_init", "n1", 1)
    assert stall.describe().startswith(
        "stalled in distributed init on node 1 (n1): no new journal line for 600 s"
    )
    assert "timeouts.stall_distributed_init = 600 s" in stall.describe()
    assert stall.describe().endswith("the last line it wrote: Init torch distributed begin.")


def test_a_weight_load_hang_on_node_1_is_named_though_node_0_is_silent_longer_further_on() -> None:
    """Node 0 loaded its weights and waits in the next collective; its silence is not the stall."""
    w = watch()
    for node in ("n0", "n1"):
        w.line(node, DIST_END, 10.0)
    w.line("n1", WEIGHTS_BEGIN, 12.0)
    w.line("n0", WEIGHTS_BEGIN, 12.0)
    w.line("n0", WEIGHTS_END, 70.0)  # node 0 finishes; node 1 never does
    assert w.stalled(12.0 + 29 * MIN) is None  # a slow disk may take that long: inside 30 min
    stall = w.stalled(12.0 + 30 * MIN)
    assert stall is not None and (stall.stage, stall.node) == ("weight_load", "n1")
    assert stall.describe().startswith("stalled in weight load on node 1 (n1)")


def test_progress_of_the_node_behind_moves_the_deadline() -> None:
    w = watch()
    w.line("n0", GRAPH_BEGIN, 100.0)
    w.line("n1", GRAPH_BEGIN, 100.0)
    assert w.stalled(100.0 + 15 * MIN) is not None
    w.line("n1", "Capturing batches (bs=1 avail_mem=12.58 GB): 100%", 100.0 + 14 * MIN)
    w.line("n0", "Capturing batches (bs=1 avail_mem=12.58 GB): 100%", 100.0 + 14 * MIN)
    assert w.stalled(100.0 + 15 * MIN) is None
    stall = w.stalled(100.0 + 29 * MIN)
    assert stall is not None and stall.stage == "graph_capture"


def test_in_warmup_only_node_0_counts_and_its_health_change_is_progress() -> None:
    """Node 1 is idle once its graphs are captured; node 0 serves and warms up alone."""
    w = watch()
    w.line("n1", GRAPH_BEGIN, 10.0)  # node 1's last line, long ago
    w.line("n0", CAPACITY, 20.0)
    w.health(503, 25.0)
    behind = w.behind()
    assert behind is not None and behind.name == "n0"
    assert w.stalled(25.0 + 5 * MIN - 1) is None
    w.health(200, 25.0 + 4 * MIN)
    assert w.stalled(25.0 + 5 * MIN) is None
    stall = w.stalled(25.0 + 9 * MIN)
    assert stall is not None and (stall.stage, stall.node) == ("warmup", "n0")
    assert "no new journal line or /health change" in stall.describe()
    assert "timeouts.warmup" in stall.describe()


def test_a_node_whose_new_start_never_shows_is_behind_from_the_wait_s_start() -> None:
    w = watch()
    w.started("n0", 1.0)
    w.line("n0", NCCL, 3.0)
    stall = w.stalled(10 * MIN)
    assert stall is not None and (stall.node, stall.stage) == ("n1", "distributed_init")
    assert stall.describe().endswith("it wrote no line yet")


def test_a_step_never_goes_back() -> None:
    """An out-of-order line (a rank's late begin line read after its end) keeps the furthest step."""
    w = watch()
    w.line("n1", WEIGHTS_END, 1.0)
    w.line("n1", WEIGHTS_BEGIN, 2.0)
    assert w.nodes["n1"].step == step_of(WEIGHTS_END)


def test_a_zero_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="stall bound must be longer than 0s"):
        TargetTimeouts.model_validate({"stall_graph_capture": "0s"})


async def test_readiness_reports_a_weight_load_hang_on_node_1_as_a_stall() -> None:
    """The wait itself: node 1's journal is followed, node 1 stops after `Load weight begin` while
    node 0 finished its load; the short weight-load bound ends the wait long before `timeout`."""
    lines0 = [(0.02, journal_json(line, invocation=NEW0)) for line in (DIST_END, WEIGHTS_BEGIN, WEIGHTS_END)]
    lines1 = [(0.02, journal_json(line, invocation=NEW1)) for line in (DIST_END, WEIGHTS_BEGIN)]
    node0 = ScriptedNode("n0", 0, states=[(0, show_text(invocation=NEW0))], lines=lines0)
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation=NEW1))], lines=lines1)
    bounds = StallBounds(distributed_init=30.0, weight_load=0.3, graph_capture=30.0, warmup=30.0)
    async with httpx.AsyncClient(transport=health_transport([(0, None)])) as client:
        result = await wait_ready(
            [node0, node1],
            base_url="http://node0:30000",
            timeout=30.0,
            previous={"n0": "a" * 32, "n1": "e" * 32},
            stall_bounds=bounds,
            client=client,
        )
    assert result.outcome == "failed" and result.failure is not None
    assert (result.failure.reason, result.failure.stage, result.failure.node) == (
        "stall",
        "weight_load",
        "n1",
    )
    assert result.failure.message.startswith("stalled in weight load on node 1 (n1)")
    assert result.failure.invocation == NEW1
    assert any(command == "journal-follow" for command, _ in node1.calls)


async def test_without_bounds_node_1_s_journal_is_not_followed() -> None:
    node0 = ScriptedNode("n0", 0, states=[(0, show_text(invocation=NEW0))])
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation=NEW1))])
    async with httpx.AsyncClient(transport=health_transport([(0, None), (0.1, 200)])) as client:
        result = await wait_ready(
            [node0, node1], base_url="http://node0:30000", timeout=5.0, confirm_s=0.0, client=client
        )
    assert result.outcome == "ready"
    assert not any(command == "journal-follow" for command, _ in node1.calls)
