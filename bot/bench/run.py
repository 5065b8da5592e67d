"""Run a benchmark profile (levels x repeats) and store it as one `MeasurementSet`.

Order: repeats outermost, levels inside (`1, 64, 1, 64, 1, 64`), so a slow drift of the server
or the machine spreads over every level instead of landing on the last one. Each level and
repeat becomes one `Measurement` row (`concurrency`, `request_rate`, `repeat`, bench_serving's
key names in `metrics`, `client_bound`, `source`), all pointing at the set, whose `summary`
holds per-level means for display and whose `client` holds what the client measured about
itself. The statistics that judge a set against another live in `bot.bench.stats` and
`bot.bench.verdict`; they read these rows.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.bench.datasets import DatasetSpec, dataset_spec
from bot.bench.loadgen import LevelResult, LoadSpec, LoadWorkers, discover_model
from bot.bench.metrics import ServiceLevels
from bot.bench.remote import NodeRunner, resolve_command, run_remote
from bot.config.schema import BenchProfile, BenchServingCommand
from bot.store import AsyncStore, Store
from bot.store.bench_repo import UnknownMeasurementSetError, add_measurements, load_set
from bot.store.models import Measurement, MeasurementSet

__all__ = ["KEY_METRICS", "BenchPlan", "BenchRun", "BenchmarkTimeoutError", "jsonable", "run_plan"]

Backend = Literal["builtin", "bench_serving"]
KEY_METRICS = (
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2e_latency_ms",
    "accept_length",
    "goodput",
)
"""What the set summary, the table and the chart show per level."""


@dataclass(frozen=True)
class BenchPlan:
    """Everything one `flagbot bench` needs, resolved from the profile and the command's options."""

    target: str
    base_url: str
    profile_name: str
    profile: BenchProfile
    concurrency: tuple[int, ...]
    repeats: int
    backend: Backend = "builtin"
    label: str = ""
    snapshot_id: int | None = None
    model: str | None = None
    bench_serving: BenchServingCommand = field(default_factory=BenchServingCommand)
    extra_cost_us: float = 0.0
    """Artificial client CPU per event (tests and demonstrations of a client-bound run)."""
    sglang_version: str | None = None
    """The target's configured SGLang version: which bench_serving module runs when the host
    cannot say (`bot.bench.remote.resolve_command`)."""
    timeout_s: float | None = None
    """The bound of the whole run, every level and repeat (the target's `timeouts.benchmark`;
    None: unbounded, a server that is no configured target)."""
    reach_url: str | None = None
    """Where the bot host sends the load when it is not `base_url` (the local end of an SSH
    forward to node 0's loopback: `bot.target.http_route`); `base_url` stays what is recorded."""
    node_url: str | None = None
    """Where a client on node 0 (bench_serving) reaches the server when it is not `base_url`."""
    http_way: str = ""
    """How the server was reached (`direct`, `through an SSH forward on node 0`), for the thread."""
    tokenizer: str | None = None
    """The target's tokenizer file (`[targets.NAME.bench] tokenizer`) for counting chunk tokens
    and a dataset's prompt lengths."""
    dataset: DatasetSpec | None = None
    """What the plan sends (`planning.plan_for` resolves the profile's or the command's word;
    None: the profile's, which must then need no prompt file)."""
    slo: ServiceLevels | None = None
    """The goodput objectives (None: the profile's `slo`)."""

    def levels(self) -> list[tuple[int | None, float | None]]:
        """Each level as (concurrency, request rate), the way its measurements are stored: a
        concurrency sweep's levels (with the profile's one `request_rate`, or closed loop), or
        a rate sweep's rates (`request_rates`, capped by `max_concurrency`) with no concurrency,
        so its levels are named `rate=R` (`samples.level_of`)."""
        rates = self.profile.request_rates
        if rates is not None:
            return [(None, rate) for rate in rates]
        return [(c, self.profile.request_rate) for c in self.concurrency]

    def dataset_sent(self) -> DatasetSpec:
        return self.dataset if self.dataset is not None else dataset_spec(self.profile)

    def objectives(self) -> ServiceLevels:
        if self.slo is not None:
            return self.slo
        slo = self.profile.slo
        return ServiceLevels(slo.ttft_ms, slo.tpot_ms, slo.e2e_ms)

    @classmethod
    def build(
        cls,
        *,
        target: str,
        base_url: str,
        profile_name: str,
        profile: BenchProfile,
        concurrency: Sequence[int] | None = None,
        repeats: int | None = None,
        backend: Backend | None = None,
        **extra: Any,
    ) -> BenchPlan:
        return cls(
            target=target,
            base_url=base_url,
            profile_name=profile_name,
            profile=profile,
            concurrency=tuple(concurrency or profile.concurrency),
            repeats=repeats or profile.repeats,
            backend=backend or profile.backend,
            **extra,
        )

    @property
    def load_url(self) -> str:
        """The base URL flagbot's own load generator uses."""
        return self.reach_url or self.base_url

    def reached_through(self, configured: str, reach_url: str, node_url: str, way: str) -> BenchPlan:
        """This plan sent by the route the target session resolved, when it measures the
        configured server (an explicit `--base-url` elsewhere is used as given)."""
        if self.base_url.rstrip("/") != configured.rstrip("/"):
            return self
        return replace(self, reach_url=reach_url, node_url=node_url, http_way=way)

    def spec(self, concurrency: int | None, request_rate: float | None = None) -> LoadSpec:
        """The load of one level (`levels()`), identical for both backends (flagbot's generator
        then warms the plan's later runs lighter: `run_plan`). A rate sweep's level is capped
        by `max_concurrency`; a concurrency level keeps the profile's `request_rate`."""
        p = self.profile
        if p.request_rates is not None:
            rate, cap = request_rate, p.max_concurrency
            count = p.num_requests
        else:
            assert concurrency is not None, "a concurrency sweep's level has a concurrency"
            rate, cap = p.request_rate, concurrency
            count = p.requests_at(concurrency)
        return LoadSpec(
            base_url=self.load_url,
            endpoint=p.endpoint,
            model=self.model,
            input_len=p.input_len,
            output_len=p.output_len,
            num_requests=None if p.duration is not None else count,
            duration_s=p.duration.total_seconds() if p.duration is not None else None,
            concurrency=cap,
            request_rate=rate,
            warmup_requests=p.warmup_requests,
            seed=p.seed,
            request_timeout_s=p.request_timeout.total_seconds(),
            level_timeout_s=p.level_timeout.total_seconds(),
            workers=p.client_workers,
            extra_cost_us=self.extra_cost_us,
            tokenizer=self.tokenizer,
            dataset=self.dataset_sent(),
            burstiness=p.burstiness,
            slo=self.objectives(),
            sweep="rate" if p.request_rates is not None else "concurrency",
        )

    def params(self) -> dict[str, Any]:
        """What the set records about how it was measured (to refuse comparing unlike sets)."""
        p = self.profile
        reached = {"http_way": self.http_way} if self.http_way else {}  # how the server was reached
        return {
            **reached,
            "profile": self.profile_name,
            "backend": self.backend,
            "base_url": self.base_url,
            "concurrency": list(self.concurrency) if p.request_rates is None else None,
            "repeats": self.repeats,
            "request_rate": p.request_rate,
            "request_rates": p.request_rates,
            "max_concurrency": p.max_concurrency,
            "burstiness": p.burstiness,
            "dataset": self.dataset_sent().describe(),
            "slo": self.objectives().describe() or None,
            "input_len": p.input_len,
            "output_len": p.output_len,
            "num_requests": (
                {str(c): p.requests_at(c) for c in self.concurrency}
                if p.request_rates is None
                else p.num_requests
            )
            if p.duration is None
            else None,
            "duration_s": p.duration.total_seconds() if p.duration is not None else None,
            "warmup_requests": p.warmup_requests,
            "endpoint": p.endpoint,
            "seed": p.seed,
        }


class BenchmarkTimeoutError(TimeoutError):
    """The whole benchmark run outlived the target's `timeouts.benchmark`; what it measured
    before is stored, the run is not summarised."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"benchmark exceeded timeouts.benchmark ({seconds:g} s)")
        self.seconds = seconds


@dataclass
class BenchRun:
    set: MeasurementSet
    measurements: list[Measurement]
    levels: list[tuple[int, LevelResult]]
    """(repeat, result) in the order they ran."""

    def workload(self) -> str:
        """What was sent and how its lengths were counted, and the goodput objectives, in words
        for the evidence: `dataset generated-shared-prefix (...), lengths approximated: ...`."""
        params = self.set.params or {}
        lengths = next(
            (m for _, r in self.levels if isinstance(m := r.metrics.get("dataset_lengths"), str)), None
        )
        parts = [f"dataset {params.get('dataset') or 'random'}" + (f", lengths {lengths}" if lengths else "")]
        if isinstance(params.get("burstiness"), int | float) and params["burstiness"] != 1:
            parts.append(f"gamma arrivals, burstiness {params['burstiness']:g}")
        if params.get("slo"):
            parts.append(f"goodput = requests/s meeting {params['slo']}")
        return "; ".join(parts)


def jsonable(value: Any) -> Any:
    """Strict JSON (PostgreSQL refuses NaN/Infinity): non-finite floats become "inf"/"nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


async def _call(store: Store | AsyncStore, func: Callable[..., Any], *args: Any) -> Any:
    """A repository call on the store, off the event loop when the store is an AsyncStore."""
    if isinstance(store, AsyncStore):
        return await store.run(func, store.store, *args)
    return func(store, *args)


async def run_plan(
    plan: BenchPlan,
    *,
    store: Store | AsyncStore | None = None,
    node: NodeRunner | None = None,
    on_level: Callable[[int, LevelResult], None] | None = None,
    extend: int | None = None,
    first_repeat: int = 0,
) -> BenchRun:
    """Run every level and repeat; each `Measurement` is stored as soon as it exists (one
    transaction each, `bot.store.bench_repo`), so an interrupted run keeps what it measured.

    flagbot's own generator asks `/v1/models` once per plan and keeps its worker processes for
    all the plan's runs (`LoadWorkers`): only the plan's first run warms the server with the
    profile's full warmup; a kept worker is warm and skips the warmup of its later runs, and a
    worker that joins later (a level split over more workers) warms with one-token requests,
    which calibrate its prompt (the server is warm by then). bench_serving warms every run
    itself, as it always does.

    `extend=SET_ID` appends the plan's repeats, numbered from `first_repeat`, to that stored set
    (a try's before side sized up, or its after side at the next look) and recomputes the set's
    summary over all its repeats; the returned run holds only the new measurements.

    The whole run is bounded by `plan.timeout_s` (the target's `timeouts.benchmark`): past it
    the run stops and raises BenchmarkTimeoutError (a playbook's measure step fails with it
    and the run rolls back as for any failed step)."""
    if plan.timeout_s is None:
        return await _run_plan(plan, store, node, on_level, extend, first_repeat)
    bound = asyncio.timeout(plan.timeout_s)
    try:
        async with bound:
            return await _run_plan(plan, store, node, on_level, extend, first_repeat)
    except TimeoutError:
        if bound.expired():
            raise BenchmarkTimeoutError(plan.timeout_s) from None
        raise


async def _run_plan(
    plan: BenchPlan,
    store: Store | AsyncStore | None,
    node: NodeRunner | None,
    on_level: Callable[[int, LevelResult], None] | None,
    extend: int | None,
    first_repeat: int,
) -> BenchRun:
    if plan.backend == "bench_serving" and node is None:
        raise ValueError("backend bench_serving needs a session to the target's node 0")
    workers = LoadWorkers()  # flagbot's own workers, kept for all the plan's runs
    if plan.backend == "builtin":  # a prompt file that cannot be used fails before anything is stored
        await asyncio.to_thread(workers.read_prompts, plan.dataset_sent())
    mset = MeasurementSet(
        target=plan.target,
        snapshot_id=plan.snapshot_id,
        profile=plan.profile_name,
        backend=plan.backend,
        label=plan.label,
        params=jsonable(plan.params()),
    )
    earlier: Sequence[Measurement] = ()
    if extend is not None:
        if store is None:
            raise ValueError("extending a stored set needs the store")
        loaded = await _call(store, load_set, extend)
        if loaded is None:
            raise UnknownMeasurementSetError(f"no measurement set {extend}")
        mset, earlier = loaded.set, loaded.measurements
    elif store is not None:
        mset = await _call(store, Store.add, mset)  # the row alone: it has no measurements yet
    measurements: list[Measurement] = []
    levels: list[tuple[int, LevelResult]] = []
    model = plan.model
    if plan.backend == "builtin" and model is None:
        model = await asyncio.to_thread(discover_model, plan.load_url)
    # this set's own prompts: never ones an earlier set sent to the same running server
    salt = mset.id if mset.id is not None else secrets.randbits(31)
    command = plan.bench_serving
    if plan.backend == "bench_serving" and node is not None:  # the host's module, asked once per plan
        command = await resolve_command(node, command, fallback_version=plan.sglang_version)
    try:
        for repeat in range(first_repeat, first_repeat + plan.repeats):
            for concurrency, request_rate in plan.levels():
                spec = plan.spec(concurrency, request_rate)
                if plan.backend == "builtin":
                    spec = replace(spec, model=model, prompt_salt=salt)
                    if levels:
                        spec = replace(
                            spec, warmup_requests=min(spec.warmup_requests, 1), warmup_max_tokens=1
                        )
                if plan.backend == "bench_serving":
                    assert node is not None
                    url = (
                        plan.bench_serving.base_url or plan.node_url or plan.base_url
                    )  # as node 0 reaches it
                    result = await run_remote(node, spec, command=command, base_url=url)
                else:
                    result = await workers.run_async(spec)
                levels.append((repeat, result))
                if on_level is not None:
                    on_level(repeat, result)
                row = Measurement(
                    target=plan.target,
                    snapshot_id=plan.snapshot_id,
                    profile=plan.profile_name,
                    concurrency=concurrency,
                    request_rate=request_rate,
                    repeat=repeat,
                    metrics=jsonable({**result.metrics, "client": result.health.to_json()}),
                    client_bound=result.client_bound,
                    source=result.source,
                    set_id=mset.id,
                )
                if store is not None and mset.id is not None:
                    await _call(store, add_measurements, mset.id, [row])
                measurements.append(row)
    finally:
        await workers.aclose()
    if extend is not None:
        mset.summary = jsonable(summarize_rows([*earlier, *measurements]))
        mset.client = jsonable(merge_client(mset.client, client_summary(levels)))
        mset.client_bound = mset.client_bound or any(result.client_bound for _, result in levels)
        mset.params = {**mset.params, "repeats": first_repeat + plan.repeats}
    else:
        mset.summary = jsonable(summarize_levels(levels))
        mset.client = jsonable(client_summary(levels))
        mset.client_bound = any(result.client_bound for _, result in levels)
    if store is not None:
        mset = await _call(store, Store.add, mset)
    return BenchRun(mset, measurements, levels)


def summarize_levels(levels: Sequence[tuple[int, LevelResult]]) -> dict[str, Any]:
    """Per concurrency: repeats, failed requests, client-bound repeats and the mean of each key metric."""
    return _summary(
        [(_stored_concurrency(r.spec), r.spec.request_rate, r.metrics, r.client_bound) for _, r in levels]
    )


def summarize_rows(measurements: Sequence[Measurement]) -> dict[str, Any]:
    """`summarize_levels` over stored measurements (a set that was extended)."""
    return _summary([(m.concurrency, m.request_rate, m.metrics, m.client_bound) for m in measurements])


def _stored_concurrency(spec: LoadSpec) -> int | None:
    """A level's concurrency as its measurement stores it: none for a rate sweep's level, whose
    `concurrency` is only the cap (the metrics keep it as `max_concurrency`)."""
    return None if spec.sweep == "rate" else spec.concurrency


def _summary(runs: Sequence[tuple[int | None, float | None, dict[str, Any], bool]]) -> dict[str, Any]:
    """Per level (a concurrency, or a rate sweep's rate): the rows of the set's summary."""
    by_level: dict[tuple[int | None, float | None], list[tuple[dict[str, Any], bool]]] = {}
    for concurrency, request_rate, metrics, bound in runs:
        level = (concurrency, request_rate if concurrency is None else None)
        by_level.setdefault(level, []).append((metrics, bound))
    rows = []
    for (concurrency, request_rate), results in by_level.items():
        row: dict[str, Any] = {
            "concurrency": concurrency,
            **({"request_rate": request_rate} if concurrency is None and request_rate is not None else {}),
            "repeats": len(results),
            "completed": sum(int(m.get("completed") or 0) for m, _ in results),
            "failed": sum(int(m.get("failed") or 0) for m, _ in results),
            "client_bound": sum(1 for _, bound in results if bound),
        }
        for key in KEY_METRICS:
            values = [v for m, _ in results if isinstance(v := m.get(key), int | float)]
            row[key] = sum(values) / len(values) if values else None
        rows.append(row)
    return {"levels": rows}


def merge_client(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """A set's client figures after more repeats: the worst of both, every bound level."""
    if not before:
        return after

    def worst(key: str) -> float | None:
        values = [float(v) for v in (before.get(key), after.get(key)) if isinstance(v, int | float)]
        return max(values, default=None)

    return {
        "client": before.get("client") or after.get("client"),
        "max_cpu_util": worst("max_cpu_util"),
        "max_loop_lag_p90_ms": worst("max_loop_lag_p90_ms"),
        "bound": [*before.get("bound", []), *after.get("bound", [])],
    }


def client_summary(levels: Sequence[tuple[int, LevelResult]]) -> dict[str, Any]:
    """The worst the client saw in any level, and which levels it limited."""
    figures = [result.health.figures for _, result in levels]
    utils = [f["cpu_util"] for f in figures if isinstance(f.get("cpu_util"), int | float)]
    lags = [f["loop_lag_p90_ms"] for f in figures if isinstance(f.get("loop_lag_p90_ms"), int | float)]
    return {
        "client": levels[0][1].source if levels else None,
        "max_cpu_util": max(utils, default=None),
        "max_loop_lag_p90_ms": max(lags, default=None),
        "bound": [
            {"concurrency": r.spec.concurrency, "repeat": repeat, "reasons": r.health.reasons}
            for repeat, r in levels
            if r.client_bound
        ],
    }
