"""`rollback`, `reconcile` and `bench` in Slack: mutating commands that are no playbook.

Each opens an investigation thread with a status card like a playbook run, and calls what the
CLI calls (`bot.target.heal`, `bot.target.rollback`, `bot.bench.run.run_plan`). Each holds the
target's lease for its work (`bot.loop.lease_guard.hold_lease`): a rollback or a benchmark
while a `try` restarts the target would each spoil the other, so a busy target is refused with
its holder named (the CLI's bench does the same; `bench wait=DURATION` waits for it). Before a
rollback or a reconcile, a run left behind by a flagbot that stopped is settled, as before any
mutating command.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from bot.commands import CommandError, Invocation
from bot.config import Settings
from bot.slack.dispatch import Where, open_thread, settle_unfinished, target_of
from bot.slack.render import CardState
from bot.slack.reporter import SlackThreadReporter
from bot.slack.services import SlackServices
from bot.target.evidence import ChartBlock, Evidence, TableBlock, TextBlock, evidence_from_json

LEASE_STEP = "take the target's lease"
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


@asynccontextmanager
async def _leased(
    services: SlackServices,
    reporter: SlackThreadReporter,
    target: str,
    purpose: str,
    user: str,
    wait_s: float,
) -> AsyncIterator[Any]:
    """The target's lease for the block, the card's lease step kept up to date."""
    from bot.loop.lease_guard import hold_lease, holder_id

    index = next(i for i, (name, _) in enumerate(reporter.card.steps) if name == LEASE_STEP)

    def waiting(busy: Any, remaining_s: float) -> None:
        text = f"waiting up to {remaining_s:.0f} s for the lease of {target}: {busy.lease.describe()}"
        services.spawn(reporter.note(text))

    await reporter.step(0, index, LEASE_STEP, "running", "")
    async with hold_lease(
        services.store,
        target,
        purpose=purpose,
        holder=holder_id(f"slack:{user}"),
        ttl_s=services.lease_ttl_s,
        wait_s=wait_s,
        on_wait=waiting,
    ) as held:
        await reporter.step(0, index, LEASE_STEP, "ok", "")
        if held.taken_over is not None:
            await reporter.note(f"took over an expired lease of {target} ({held.taken_over.describe()})")
        yield held


async def _guarded(reporter: SlackThreadReporter, work: Callable[[], Awaitable[Any]]) -> Any:
    """Run `work`; a busy target refuses the card, an error fails it: one the user can act on
    (the target unreachable, the load failed, no such set) is said on the card; anything else
    also propagates, to be reported with an error id."""
    from bot.bench.loadgen import LoadError
    from bot.store.leases import LeaseHeld
    from bot.target.errors import TargetError

    try:
        try:
            return await work()
        except BaseException:  # the step that was running did not finish
            steps = reporter.card.steps
            steps[:] = [(name, "failed" if status == "running" else status) for name, status in steps]
            raise
    except (TargetError, LoadError, OSError, LookupError) as exc:  # the card says it all
        await reporter.conclude("failed", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None
    except LeaseHeld as exc:
        await reporter.refuse(
            f"{exc}; `bench wait=DURATION` waits for it" if reporter.card.playbook == "bench" else str(exc)
        )
        return None
    except Exception as exc:
        shown = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        await reporter.conclude("failed", shown)
        raise


# --- rollback and reconcile -------------------------------------------------------------------


async def run_target_change(
    services: SlackServices, client: Any, invocation: Invocation, *, text: str, user: str, where: Where
) -> Any:
    """`rollback` (heal a diverged target, then back to the known-good flags) or `reconcile`
    (every node back on the flags flagbot meant), in a thread; the result's JSON form."""
    from bot.loop.engine import Engine
    from bot.loop.report import MemoryReporter

    settings = services.settings
    name = invocation.name
    target = target_of(settings, invocation)
    card = _card(name, target, user, text, ["settle unfinished runs", LEASE_STEP, name])
    reporter = await open_thread(client, where, card)

    async def work() -> dict[str, Any]:
        await reporter.step(0, 0, "settle unfinished runs", "running", "")
        engine = Engine(settings, services.store, MemoryReporter(), lease_ttl_s=services.lease_ttl_s)
        await settle_unfinished(engine, reporter, target)
        await reporter.step(0, 0, "settle unfinished runs", "ok", "")
        async with _leased(services, reporter, target, name, user, 0.0):
            await reporter.step(0, 2, name, "running", "")
            data = await _change(settings, services, target, name)
        for block in data.get("evidence", []):
            await reporter.evidence(evidence_from_json(block), 0)
        await reporter.step(0, 2, name, "ok" if data["ok"] else "failed", "")
        await reporter.conclude("succeeded" if data["ok"] else "failed", _summary(name, data))
        return data

    return await _guarded(reporter, work)


async def _change(settings: Settings, services: SlackServices, target: str, name: str) -> dict[str, Any]:
    from bot.cli_target import cache_dir
    from bot.target.heal import heal_if_diverged
    from bot.target.rollback import rollback
    from bot.target.session import TargetSession

    cache = cache_dir(settings)
    async with TargetSession.open(target, settings.targets[target], store=services.store) as ts:
        healed = await heal_if_diverged(ts, cache_dir=cache)
        healed_json = None if healed is None else healed.to_json()
        if name == "reconcile":
            if healed_json is not None:
                return healed_json
            text = f"{target} is not diverged: every node runs the drop-in flagbot left; nothing to do."
            return {
                "target": target,
                "ok": True,
                "diverged_nodes": [],
                "evidence": [TextBlock(text).to_json()],
            }
        data = (await rollback(ts, trigger="on-demand", cache_dir=cache)).to_json()
    if healed_json is not None:
        data["reconciled"] = healed_json
        data["evidence"] = healed_json["evidence"] + data["evidence"]
    return data


def _summary(name: str, data: dict[str, Any]) -> str:
    if name == "reconcile":
        nodes = data.get("diverged_nodes") or []
        return f"reconciled {', '.join(nodes)}" if nodes else "not diverged: nothing to do"
    if data.get("error"):
        return f"rollback failed: {data['error']}"
    return f"back on {data.get('to') or 'the known-good flags'} in {float(data.get('duration_s') or 0):.0f} s"


# --- bench ------------------------------------------------------------------------------------


def bench_plan(settings: Settings, invocation: Invocation, *, label: str | None = None) -> Any:
    """The benchmark the words ask for (CommandError for an unknown profile); checked before the ack."""
    from bot.bench.run import BenchPlan

    target = target_of(settings, invocation)
    config = settings.targets[target]
    options = invocation.options
    profile = options.get("profile") or config.benchmark_profile
    if profile not in settings.bench:
        raise CommandError(
            f"no benchmark profile {profile!r}; profiles: {', '.join(settings.bench)}",
            usage="bench [profile=NAME]",
        )
    return BenchPlan.build(
        target=target,
        base_url=config.http_base(),
        profile_name=profile,
        profile=settings.bench[profile],
        concurrency=[int(c) for c in options["concurrency"].split(",")] if "concurrency" in options else None,
        repeats=int(options["repeats"]) if "repeats" in options else None,
        backend=options.get("backend") or settings.bench[profile].backend,  # type: ignore[arg-type]
        bench_serving=config.bench_serving,
        label=label,
    )


def _wait_s(invocation: Invocation) -> float:
    from bot.config.schema import parse_duration

    delay = parse_duration(invocation.options.get("wait", "0"))
    return delay.total_seconds() if isinstance(delay, timedelta) else 0.0


async def run_bench(
    services: SlackServices, client: Any, invocation: Invocation, *, text: str, user: str, where: Where
) -> Any:
    """`bench` in a thread, under the target's lease: the rows as a table, the chart as an image,
    the comparison with `compare-to=` a stored set; the set is stored like the CLI's."""
    plan = bench_plan(services.settings, invocation, label=f"slack bench by {user}")
    compare_to = invocation.options.get("compare-to")
    measure = f"benchmark (profile {plan.profile_name}, {plan.backend})"
    steps = [LEASE_STEP, measure] + ([f"compare with set #{compare_to}"] if compare_to else [])
    reporter = await open_thread(client, where, _card("bench", plan.target, user, text, steps))

    async def work() -> Any:
        reference = await _reference(services, compare_to)
        async with _leased(services, reporter, plan.target, "bench", user, _wait_s(invocation)) as held:
            await reporter.step(0, 1, measure, "running", "")
            run = await _measure(services, plan)
            await reporter.step(0, 1, measure, "ok", "")
            lost = held.lost_reason if held.lost.is_set() else None
        for block in await _bench_evidence(services, plan, run, reference):
            await reporter.evidence(block, 0)
        if lost:
            await reporter.note(f":warning: {lost} during the run: its figures may be disturbed")
        summary = f"stored as measurement set #{run.set.id}"
        if reference is not None:
            await reporter.step(0, 2, steps[2], "running", "")
            lines = await _compare(services, reference.set.id, run.set.id)
            await reporter.evidence(
                TextBlock("\n".join(lines), f"Set #{run.set.id} against set #{compare_to}"), 0
            )
            await reporter.step(0, 2, steps[2], "ok", "")
            summary += f"; {lines[0]}" if lines else ""
        if run.set.client_bound:
            summary += "; CLIENT-BOUND levels: those figures are the load generator's limit"
        await reporter.conclude("succeeded", summary)
        return run

    return await _guarded(reporter, work)


async def _reference(services: SlackServices, compare_to: str | None) -> Any:
    from bot.store.bench_repo import load_set

    if compare_to is None:
        return None
    found = await services.store.run(load_set, services.store.store, int(compare_to))
    if found is None:
        raise LookupError(f"compare-to={compare_to}: no measurement set with that id")
    return found


async def _measure(services: SlackServices, plan: Any) -> Any:
    from bot.bench.run import run_plan

    if plan.backend != "bench_serving":
        return await run_plan(plan, store=services.store)
    from bot.target.session import TargetSession

    target = services.settings.targets[plan.target]
    async with TargetSession.open(plan.target, target, store=services.store) as ts:
        return await run_plan(plan, store=services.store, node=ts.node0)


async def _bench_evidence(services: SlackServices, plan: Any, run: Any, reference: Any) -> list[Evidence]:
    from bot.bench.chart import render_chart
    from bot.cli_target import cache_dir

    rows = []
    for level in run.set.summary.get("levels", []):
        cells = []
        for column, key in _COLUMNS:
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
            else:
                cells.append(str(level[column]))
        rows.append(tuple(cells))
    title = (
        f"Benchmark: set #{run.set.id}, {plan.target}, profile {plan.profile_name}, backend {plan.backend}"
    )
    table = TableBlock(
        title, tuple(c for c, _ in _COLUMNS), tuple(rows), "latencies in ms; means over repeats"
    )
    path = cache_dir(services.settings).parent / "evidence" / f"bench-set-{run.set.id}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(
        render_chart,
        run.measurements,
        path,
        title=f"{plan.target} · profile {plan.profile_name} · set #{run.set.id} ({plan.backend})",
        reference=reference.measurements if reference is not None else (),
        reference_title=f"set #{reference.set.id}" if reference is not None else None,
    )
    alt = "output tok/s and TTFT/ITL percentiles per concurrency" + (
        "; the reference dashed" if reference else ""
    )
    return [table, ChartBlock("Benchmark", str(path), alt)]


async def _compare(services: SlackServices, reference_id: int, candidate_id: int) -> list[str]:
    from bot.bench.compare_sets import compare_by_id
    from bot.bench.verdict import VerdictSettings

    settings = VerdictSettings.from_config(services.settings.verdicts)
    try:
        compared = await services.store.run(
            compare_by_id, services.store.store, reference_id, candidate_id, settings
        )
    except (ArithmeticError, ValueError) as exc:  # the measurements stay stored and shown
        return [f"comparison failed: {type(exc).__name__}: {exc}"]
    return list(compared.result.lines())


def _number(value: Any, digits: int) -> str:
    import math

    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}"
