"""`rollback`, `reconcile` and `bench` in Slack: mutating commands that are no playbook.

Each opens an investigation thread with a status card like a playbook run, and calls the
application layer (`bot.app.target_commands.rollback_or_reconcile`, `bot.app.bench.run_bench`),
which settles a run a stopped flagbot left (rollback, reconcile) and holds the target's lease
for the work: a busy target is refused with its holder named (`bench wait=DURATION` waits for
it). This module only turns the progress into the card and the thread, and the result into
evidence.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from bot.app.bench import BenchRequest, BenchResult, plan_bench, with_rerun
from bot.app.bench import run_bench as bench_use_case
from bot.app.context import evidence_dir
from bot.app.errors import AppError
from bot.app.target_commands import TargetChange, change_steps, rollback_or_reconcile
from bot.app.targets import target_of
from bot.bench.loadgen import LevelResult, LoadError
from bot.bench.samples import level_of
from bot.commands import Invocation
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter
from bot.slack.services import SlackServices
from bot.slack.threads import Where, open_thread
from bot.store.leases import LeaseHeld, LeaseInfo, WaitCancelled
from bot.target.errors import TargetError
from bot.target.evidence import ChartBlock, Evidence, TableBlock, TextBlock

T = TypeVar("T")
_COLUMNS = (
    ("concurrency", None),
    ("repeats", None),
    ("ok/failed", None),
    ("out tok/s", "output_throughput"),
    ("req/s", "request_throughput"),
    ("TTFT p50", "median_ttft_ms"),
    ("TTFT p99", "p99_ttft_ms"),
    ("TPOT mean", "mean_tpot_ms"),
    ("ITL p50", "median_itl_ms"),
    ("ITL p99", "p99_itl_ms"),
    ("E2E p50", "median_e2e_latency_ms"),
    ("client", None),
)
"""The benchmark table: the CLI's columns, read from the stored set's per-level summary."""


def _card(name: str, target: str, user: str, text: str, steps: list[str]) -> CardState:
    return CardState(
        experiment_id=None,
        playbook=name,
        target=target,
        actor=f"<@{user}>",
        command=f"/flagbot {text}".strip(),
        steps=[(step, "pending") for step in steps],
        status="running",
    )


@dataclass
class CardProgress:
    """The application layer's progress on the status card and in the thread."""

    services: SlackServices
    reporter: SlackThreadReporter
    target: str

    async def step(self, index: int, name: str, status: str) -> None:
        await self.reporter.step(0, index, name, status, "")

    async def note(self, text: str) -> None:
        await self.reporter.note(text)

    async def evidence(self, block: Evidence) -> None:
        await self.reporter.evidence(block, 0)

    def lease_wait(self, busy: LeaseHeld, remaining_s: float) -> None:
        text = f"waiting up to {remaining_s:.0f} s for the lease of {self.target}: {busy.lease.describe()}"
        self.services.spawn(self.reporter.note(text))

    async def lease_taken_over(self, target: str, expired: LeaseInfo) -> None:
        await self.reporter.note(f"took over an expired lease of {target} ({expired.describe()})")

    def level_done(self, repeat: int, repeats: int, result: LevelResult) -> None:
        return None  # the card shows the benchmark step; the table follows at the end


async def _guarded(reporter: SlackThreadReporter, work: Callable[[], Awaitable[T]]) -> T | None:
    """Run `work`; a busy target refuses the card, an error fails it: one the user can act on
    (the target unreachable, the load failed, no such set) is said on the card; anything else
    also propagates, to be reported with an error id."""
    try:
        try:
            return await work()
        except BaseException:  # the step that was running did not finish
            steps = reporter.card.steps
            steps[:] = [(name, "failed" if status == "running" else status) for name, status in steps]
            raise
    except (TargetError, LoadError, OSError, LookupError, AppError) as exc:  # the card says it all
        await reporter.conclude("failed", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        await reporter.tell_requester()
        return None
    except WaitCancelled as exc:  # `cancel waiter=ID` while it waited: nothing ran
        await reporter.refuse(str(exc))
        return None
    except LeaseHeld as exc:
        await reporter.refuse(
            f"{exc}; `bench wait=DURATION` waits for it" if reporter.card.playbook == "bench" else str(exc)
        )
        return None
    except Exception as exc:
        shown = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        await reporter.conclude("failed", shown)
        await reporter.tell_requester()
        raise


# --- rollback and reconcile -------------------------------------------------------------------


async def run_target_change(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
) -> TargetChange | None:
    """`rollback` (heal a diverged target, then back to the known-good flags) or `reconcile`
    (every node back on the flags flagbot meant), in a thread."""
    name = invocation.name
    target = target_of(services.settings, invocation)
    reporter = await open_thread(
        client, where, _card(name, target, user, text, change_steps(name)), store=services.store
    )
    progress = CardProgress(services, reporter, target)

    async def work() -> TargetChange:
        change = await rollback_or_reconcile(
            services.context, target, name, actor=f"slack:{user}", progress=progress
        )
        for block in change.evidence:
            await reporter.evidence(block, 0)
        await reporter.conclude("succeeded" if change.ok else "failed", change.summary())
        await reporter.tell_requester()
        return change

    return await _guarded(reporter, work)


# --- bench ------------------------------------------------------------------------------------


async def run_bench(
    services: SlackServices,
    client: AsyncWebClient,
    invocation: Invocation,
    *,
    text: str,
    user: str,
    where: Where,
) -> BenchResult | None:
    """`bench` in a thread, under the target's lease: the rows as a table, the chart as an image,
    the comparison with `compare-to=` a stored set; the set is stored like the CLI's."""
    settings = services.settings
    target_of(settings, invocation)  # a configured target: Slack measures no other server
    request = BenchRequest.of(settings, invocation, label=f"slack bench by {user}")
    request = await with_rerun(services.context, request)  # `rerun=ID`: that experiment's set
    setup = plan_bench(settings, request)
    plan = setup.plan
    reporter = await open_thread(
        client,
        where,
        _card("bench", plan.target, user, text, setup.steps(request.compare_to, request.compared_with)),
        store=services.store,
    )
    progress = CardProgress(services, reporter, plan.target)

    async def work() -> BenchResult:
        result = await bench_use_case(
            services.context,
            setup,
            request,
            actor=f"slack:{user}",
            progress=progress,
            chart_path=lambda set_id: evidence_dir(settings) / f"bench-set-{set_id}.png",
        )
        for block in _bench_evidence(result):
            await reporter.evidence(block, 0)
        if result.lease_lost:
            await reporter.note(f":warning: {result.lease_lost} during the run: its figures may be disturbed")
        summary = f"stored as measurement set #{result.set_id}"
        if request.compared_with is not None:
            summary += f"; compared with {request.compared_with}"
        if result.reference is not None:
            lines = (
                [f"comparison failed: {result.comparison_error}"]
                if result.comparison is None
                else list(result.comparison.result.lines())
            )
            await reporter.evidence(
                TextBlock("\n".join(lines), f"Set #{result.set_id} against {request.reference_name()}"), 0
            )
            summary += f"; {lines[0]}" if lines else ""
        if result.run.set.client_bound:
            summary += "; CLIENT-BOUND levels: those figures are the load generator's limit"
        await reporter.conclude("succeeded", summary)
        await reporter.tell_requester()
        return result

    return await _guarded(reporter, work)


def _bench_evidence(result: BenchResult) -> list[Evidence]:
    plan, run = result.plan, result.run
    levels = run.set.summary.get("levels", [])
    columns: tuple[tuple[str, str | None], ...] = _COLUMNS
    if any(isinstance(level.get("goodput"), int | float) for level in levels):  # objectives were set
        columns = (*_COLUMNS[:-1], ("goodput req/s", "goodput"), _COLUMNS[-1])
    rows = []
    for level in levels:
        cells = []
        for column, key in columns:
            if key is not None:
                cells.append(_number(level.get(key), 2 if "tpot" in key or "itl" in key else 1))
            elif column == "ok/failed":
                cells.append(f"{level['completed']}/{level['failed']}")
            elif column == "client":
                cells.append(
                    f"CLIENT-BOUND {level['client_bound']}/{level['repeats']}"
                    if level.get("client_bound")
                    else "ok"
                )
            elif level["concurrency"] is None:  # a rate sweep's level
                cells.append(level_of(None, level.get("request_rate")))
            else:
                cells.append(str(level[column]))
        rows.append(tuple(cells))
    title = (
        f"Benchmark: set #{run.set.id}, {plan.target}, profile {plan.profile_name}, backend {plan.backend}"
    )
    table = TableBlock(
        title,
        tuple(c for c, _ in columns),
        tuple(rows),
        f"latencies in ms; means over repeats; {run.workload()}",
    )
    blocks: list[Evidence] = [table]
    if result.chart is not None:
        alt = "output tok/s and TTFT/ITL percentiles per concurrency" + (
            "; the reference dashed" if result.reference is not None else ""
        )
        blocks.append(ChartBlock("Benchmark", str(result.chart), alt))
    return blocks


def _number(value: object, digits: int) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}"


__all__ = ["CardProgress", "run_bench", "run_target_change"]
