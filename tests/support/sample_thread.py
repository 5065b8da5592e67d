"""The seeds' regression (effective max_running_requests 48 -> 26) posted as flagbot posts it.

A real `try` needs the two-node testbed; the page's browser test and the README screenshot do
not, so this posts the same thread through flagbot's own `SlackThreadReporter` and renderer,
with the real slack_sdk client, into the stand-in's Web API (which checks Slack's limits): a
status card edited step by step, each block emitted during the step of a real try that emits
it (so it lands in the same reply), a hardware warning, a parsed-vs-effective table, a journal
excerpt with its command, a long excerpt uploaded as a file, a benchmark chart uploaded as an
image, the verdict with decisive and undecided cells, and the end broadcast to the channel
mentioning the requester, then the card's buttons.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.decisions import next_actions
from bot.bench.chart import render_chart
from bot.config import load_settings
from bot.loop.playbook import load_playbooks, playbook_dirs
from bot.loop.report import RunOutcome, RunStart
from bot.slack.render import CardState, status_card
from bot.slack.reporter import SlackThreadReporter, metadata
from bot.store import AsyncStore, Store
from bot.store.loop_models import Experiment
from bot.target.evidence import (
    ChartBlock,
    ComparisonRow,
    Evidence,
    JournalExcerpt,
    MetricComparison,
    TableBlock,
    TextBlock,
    VerdictBlock,
)
from flagbot_lab.standin import Standin
from tests.support.host_flags import seed_flag_lists
from tests.support.slack_bot import RunningBot, running_bot

EXPERIMENT = 7
FLAGS = "--enable-flashinfer-allreduce-fusion --enable-fused-moe-sum-all-reduce"
COMMAND = f"/flagbot try {FLAGS} target=lab"
SUMMARY = "effective max_running_requests 48 -> 26 (parsed 48 -> 48)"
CHANGES = [{"op": "add", "flag": flag} for flag in FLAGS.split()]
DECISIVE = "max_running_requests: 48 -> 26 (-45.8%) regressed (tolerance 0)"
UNDECIDED = "median_ttft_ms@c=32: +173.6% [-99.6%, +169014.3%] undecided"
"""A cell whose interval says nothing yet: it stays in the thread, never in the broadcast."""
RBAC = '[slack.rbac]\nadmins = ["U0ADMIN"]\noperators = ["U0OPER"]\nviewers = ["*"]\n'


@dataclass(frozen=True)
class Row:
    """One benchmark repeat, as the chart reads it."""

    concurrency: int | None
    metrics: dict[str, Any]
    client_bound: bool = False


@dataclass
class SampleThread:
    """Where the sample landed: the channel, the card (the thread's root), the replies posted."""

    channel: str
    card_ts: str
    posted: list[str] = field(default_factory=list)


def _rows(slots: int) -> list[Row]:
    """The twin's curve: 121 tok/s per stream up to 1582 tok/s; requests beyond `slots` queue."""
    rows = []
    for level in (1, 4, 16, 32, 64):
        running = min(level, slots)
        rate = min(121.0 * running, 1582.0)
        queue = max(0, level - slots) * 95.0
        for repeat in range(2):
            jitter = 1 + 0.01 * repeat
            rows.append(
                Row(
                    level,
                    {
                        "output_throughput": rate * jitter,
                        "median_ttft_ms": (180.0 + queue) * jitter,
                        "p99_ttft_ms": (420.0 + 2 * queue) * jitter,
                        "median_itl_ms": 8.3 * jitter,
                        "p99_itl_ms": 14.0 * jitter,
                    },
                )
            )
    return rows


def chart(path: Path) -> Path:
    """The before/after benchmark chart flagbot attaches to a try (matplotlib, Agg)."""
    return render_chart(
        _rows(26),
        path,
        title=f"experiment #{EXPERIMENT}: after (set #14)",
        reference=_rows(48),
        reference_title="before (set #13)",
    )


def evidence(chart_path: Path) -> list[Evidence]:
    """The evidence a try of both flags on the seeds' deployment posts, in order."""
    journal = (
        "[2025-11-29 21:04:11] server_args=ServerArgs(model_path='/models/Qwen3.5-122B-A10B-FP8', tp_size=2, ...)",
        "[2025-11-29 21:05:02] Load weight end. type=Qwen3_5MoeForCausalLM, avail mem=56.28 GB",
        "[2025-11-29 21:05:09] Memory pool end. avail mem=8.69 GB",
        "[2025-11-29 21:05:09] max_total_num_tokens=1830912, chunked_prefill_size=8192, max_running_requests=26",
        "[2025-11-29 21:05:31] The server is fired up and ready to roll!",
    )
    long_journal = tuple(
        f"[2025-11-29 21:0{4 + i // 20}:{i % 60:02d}] node1 sglang[4121]: capture cuda graph bs {i * 2}"
        for i in range(36)
    )
    return [
        MetricComparison(
            "Capacity: parsed vs effective",
            (
                ComparisonRow("max_running_requests (parsed)", "48", "48", "0", "no-effect"),
                ComparisonRow("max_running_requests (effective)", "48", "26", "-45.8%", "regressed"),
                ComparisonRow("available memory after pool (GiB)", "18.78", "8.69", "-53.7%", "worse"),
                ComparisonRow("output tok/s at concurrency 64", "1581", "1579", "-0.1%", "no-effect"),
            ),
            note="effective: what the scheduler allocated at start (journal); parsed: the server's own args",
        ),
        TableBlock(
            "Flags on each node after the restart",
            ("node", "flag", "requested", "in effect"),
            (
                ("node1", "--enable-flashinfer-allreduce-fusion", "on", "off (needs SM 9.x/10.x)"),
                ("node1", "--enable-fused-moe-sum-all-reduce", "on", "on (10.09 GiB workspace)"),
                ("node2", "--enable-flashinfer-allreduce-fusion", "on", "off (needs SM 9.x/10.x)"),
                ("node2", "--enable-fused-moe-sum-all-reduce", "on", "on (10.09 GiB workspace)"),
            ),
        ),
        JournalExcerpt(
            "Why 26: the scheduler's own line",
            "node1",
            "journalctl -u sglang.service -b --no-pager | grep -E 'avail mem|max_running_requests'",
            journal,
            match_count=4,
            highlight=journal[3],
        ),
        JournalExcerpt(
            "Startup on node1",
            "node1",
            "journalctl -u sglang.service -b --no-pager",
            long_journal,
            highlight=long_journal[30],
        ),
        TextBlock(
            ":warning: `--enable-flashinfer-allreduce-fusion` needs SM 9.x/10.x: on GB10 (SM 12.1) it is a "
            "no-op, so only `--enable-fused-moe-sum-all-reduce` changed the start.",
            "Hardware gating",
        ),
        ChartBlock(
            "Benchmark: before vs after",
            str(chart_path),
            "output tok/s and TTFT/ITL percentiles per concurrency; before dashed",
        ),
        VerdictBlock(
            "regressed",
            SUMMARY,
            (
                "verdict: regressed (guarded by max_running_requests); 3 repeats a side, look 1 of 3",
                DECISIVE,
                UNDECIDED,
                "output_throughput@c=64: -0.1% [-1.2%, +1.0%] no effect",
                "the fused-MoE workspace (10.09 GiB) leaves 79 state-cache slots: 79 // 3 = 26",
                "throughput is unchanged at concurrency 64, so a benchmark alone misses it",
                "next: Revert, or Isolate to confirm the culprit",
            ),
        ),
    ]


def emitted_by(block: Evidence) -> str:
    """The step of a real try that emits `block` (preflight warns, compare charts and judges,
    the start's observation shows capacity and the journal)."""
    if isinstance(block, TextBlock) and block.title == "Hardware gating":
        return "preflight"
    if isinstance(block, ChartBlock | VerdictBlock):
        return "compare"
    return "await_start"


async def post_sample_thread(
    standin: Standin, token: str, chart_png: Path, *, channel: str = "C0FLAGBOT", user: str = "U0OPER"
) -> SampleThread:
    """Post the sample investigation into `channel` as flagbot would, asked by `user`.

    `chart_png` is the benchmark chart (made by `chart()` when the file does not exist yet).
    """
    if not chart_png.exists():
        chart(chart_png)
    client = AsyncWebClient(token=token, base_url=standin.api_url)
    book = load_playbooks(playbook_dirs())["try"]
    card = CardState(
        experiment_id=None,
        playbook="try",
        target="lab",
        actor=f"<@{user}>",
        command=COMMAND,
        steps=[(step.name, "pending") for step in book.steps],
    )
    blocks, text = status_card(card)
    root = await client.chat_postMessage(channel=channel, blocks=blocks, text=text, metadata=metadata(None))
    reporter = SlackThreadReporter(client, channel, str(root["ts"]), card)
    await reporter.started(RunStart(EXPERIMENT, "try", "lab", f"slack:{user}", {"changes": CHANGES}))
    blocks = evidence(chart_png)
    for index, step in enumerate(book.steps):
        await reporter.step(EXPERIMENT, index, step.name, "running", "")
        for block in blocks:
            if emitted_by(block) == step.name:
                await reporter.evidence(block, EXPERIMENT)
        await reporter.step(EXPERIMENT, index, step.name, "ok", "")
    # the buttons the application layer chooses for this outcome with the decision pending (the
    # reporter has no store here to read the experiment from)
    chosen = next_actions(pending_regression())
    card.next_actions, card.primary_action = chosen.actions, chosen.primary
    steps = [
        {
            "action": "compare",
            "result": {"verdict": "regressed", "decided_by": f"the capacity guard decided ({DECISIVE})"},
        },
        {"action": "decide", "result": {"kept": None}},
    ]
    await reporter.finished(RunOutcome(EXPERIMENT, "try", "lab", "succeeded", "regressed", SUMMARY, steps))
    return SampleThread(channel, str(root["ts"]), reporter.posted)


def pending_regression() -> Experiment:
    """The sample's try as stored: both flags applied, regressed, its decision pending."""
    return Experiment(
        id=EXPERIMENT,
        target="lab",
        playbook="try",
        params={"changes": CHANGES},
        status="succeeded",
        verdict="regressed",
        state={
            "schema_version": 2,
            "after": {"set_id": 2},
            "restart": {"applied": True},
            "conclusion": {"verdict": "regressed"},
        },
        actor="slack:U0OPER",
    )


@asynccontextmanager
async def bot_without_hosts(workdir: Path, *, known_flags: bool = True) -> AsyncIterator[RunningBot]:
    """flagbot's app in HTTP mode on the stand-in, SQLite in `workdir`; its one target (`lab`)
    listens nowhere, so a run that needs the host fails at its first remote step. `known_flags`:
    its flag list (0.5.10's) is in the cache, as if its host had been read before, so flags are
    judged before the ack; without it, a command with flags is acknowledged as being checked and
    answered once the host (which cannot answer) has been asked."""
    db = workdir / "flagbot.db"
    config = workdir / "flagbot.toml"
    config.write_text(
        f'default_target = "lab"\n[database]\nsqlite_path = "{db}"\n{RBAC}'
        '[targets.lab]\nunit = "sglang.service"\nbase_url = "http://127.0.0.1:9"\n'
        'nodes = [{ host = "127.0.0.1", port = 9 }]\n[targets.lab.ssh]\nconnect_timeout = 1\n'
    )
    store = Store.open(f"sqlite:///{db}")
    store.upgrade()
    async_store = AsyncStore(store)
    settings = load_settings(config, required=True)
    if known_flags:
        seed_flag_lists(settings)
    try:
        async with running_bot(settings, async_store) as running:
            yield running
    finally:
        await async_store.aclose()
