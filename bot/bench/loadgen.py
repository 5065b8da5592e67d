"""flagbot's load generator: one benchmark level, run in forked worker processes.

    result = run_load(LoadSpec(base_url="http://10.0.0.1:30000", concurrency=64, num_requests=128))
    result.metrics["output_throughput"], result.client_bound

What it does, and why (docs/bench.md has the whole story):

* requests stream from `/v1/completions` or `/v1/chat/completions` with
  `stream_options.include_usage`, `ignore_eos` and a fixed `max_tokens`, so every request
  produces exactly `output_len` tokens, as bench_serving's random dataset does;
* load is closed-loop (`concurrency` slots, each sending its next request when the last one
  ends) or open-loop (seeded Poisson arrivals at `request_rate`, optionally capped by
  `concurrency` exactly like bench_serving's `--request-rate` with `--max-concurrency`); a level
  ends after `num_requests` or after `duration_s` (then in-flight requests finish);
* warmup requests run first in every worker and are never measured; a worker kept for a
  plan's later runs (`LoadWorkers`) is warm and skips them;
* the work is split over `workers` processes that start together on the shared monotonic
  clock; never in the caller's event loop (`run_load_async` waits in a thread). They are forked
  from a fork server that has imported the worker once (`_worker_context`): a spawned process
  would start a new interpreter and import flagbot's whole CLI again (the console script is
  `__main__`), about a second per level and repeat on a busy machine, all of it overhead;
* metrics carry bench_serving's names and definitions (`metrics.summarize`) and the level is
  judged for client saturation (`client_health.judge`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.machinery
import multiprocessing
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any, Literal, overload

import httpx

from bot.bench.client_health import ClientHealth, WorkerStats, judge
from bot.bench.datasets import (
    DatasetError,
    DatasetSpec,
    PromptRow,
    read_prompt_file,
    run_prefix,
    sample_rows,
    words_for,
)
from bot.bench.metrics import RequestRecord, ServiceLevels, summarize
from bot.bench.prompt_groups import GroupShape
from bot.bench.server_reads import AcceptLengthReads
from bot.bench.tokenizer import TokenCounter, TokenizerError, load_token_counter
from bot.bench.worker import ClientKind, WorkerPlan, WorkerResult, worker_main
from bot.http import get as http_get

__all__ = [
    "LevelResult",
    "LoadError",
    "LoadSpec",
    "LoadWorkers",
    "discover_model",
    "run_load",
    "run_load_async",
]

START_MARGIN_S = 0.02
"""Workers are all ready (warm, bodies made, collector frozen) before the start time is chosen;
this margin only covers the pipe and waking each worker up. A worker that runs a level alone
starts on its own clock the moment it is told to, with no margin to wait out."""
EXIT_GRACE_S = 60.0
WORKER_MODULES = ("bot.bench.worker", "aiohttp", "httpx", "httpx_aiohttp")
"""Imported once by the fork server, so a forked worker starts with its HTTP clients loaded
(importing them in every worker cost ~0.2 s per level and repeat)."""
_MAIN_SWAP = threading.Lock()
"""Held while a worker starts with `__main__` marked (see `_main_not_rerun`)."""


class LoadError(RuntimeError):
    """The level could not run at all (server unreachable, warmup failed, a worker crashed)."""


@dataclass(frozen=True)
class LoadSpec:
    base_url: str
    endpoint: Literal["chat", "completions"] = "completions"
    model: str | None = None
    """None: the first model of `/v1/models`, as bench_serving picks it."""
    input_len: int = 1024
    output_len: int = 256
    num_requests: int | None = 64
    duration_s: float | None = None
    concurrency: int | None = 1
    """Closed loop: the slots. With `request_rate`: the cap on requests in flight (None: no cap)."""
    request_rate: float | None = None
    warmup_requests: int = 2
    warmup_max_tokens: int | None = None
    """Output tokens of each warmup request (None: min(output_len, 32)). Once the server is warm
    (a later level of the same plan) 1 is enough: the request still opens the worker's connection
    and calibrates its prompt length, without paying a full decode per level and repeat."""
    seed: int = 1
    request_timeout_s: float = 600.0
    level_timeout_s: float = 1800.0
    workers: int = 1
    client: ClientKind = "aiohttp"
    extra_cost_us: float = 0.0
    api_key: str | None = None
    prompt_salt: int = 0
    """Sets the prompts apart from another plan's with the same seed (`run_plan` gives each
    measurement set its own), so a server's prefix cache never answers a prompt it has seen."""
    tokenizer: str | None = None
    """A tokenizer file on the bot host (`[targets.NAME.bench] tokenizer`): counts each chunk's
    tokens when the server sends no running usage (`bot.bench.tokenizer`), and the lengths of a
    dataset's prompts (`bot.bench.datasets`)."""
    dataset: DatasetSpec = field(default_factory=DatasetSpec)
    burstiness: float = 1.0
    """Open loop: 1 is Poisson; gamma-distributed gaps otherwise (`worker.arrival_gap`)."""
    slo: ServiceLevels = field(default_factory=ServiceLevels)
    """What a request must meet to count in `goodput` (none set: no goodput)."""
    sweep: Literal["concurrency", "rate"] = "concurrency"
    """Which sweep the level belongs to: a rate sweep's level is stored by its rate alone
    (`concurrency` is then only the cap on requests in flight)."""

    def check(self) -> None:
        if self.num_requests is None and self.duration_s is None:
            raise ValueError("give num_requests or duration_s")
        if self.request_rate is None and not self.concurrency:
            raise ValueError("a closed loop needs a concurrency")
        if self.request_rate is not None and self.request_rate <= 0:
            raise ValueError("request_rate must be positive (None for a closed loop)")
        if self.workers < 1 or self.input_len < 1 or self.output_len < 1:
            raise ValueError("workers, input_len and output_len must be at least 1")
        if not self.burstiness > 0:
            raise ValueError("burstiness must be positive (1: Poisson)")
        if self.dataset.kind in ("sharegpt", "jsonl") and self.dataset.prompt_file is None:
            raise ValueError(f"dataset {self.dataset.kind} needs its prompt file")

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.endpoint == "chat" else "/v1/completions"


@dataclass
class LevelResult:
    """One level: bench_serving-named `metrics`, the client's health, and the raw records."""

    spec: LoadSpec
    metrics: dict[str, Any]
    health: ClientHealth
    records: list[RequestRecord]
    prompt_words: int
    source: str = "flagbot"
    """Who measured: flagbot's generator, or `bench_serving` on node 0 (`remote`)."""
    warnings: list[str] = field(default_factory=list)

    @property
    def client_bound(self) -> bool:
        return self.health.client_bound

    def to_json(self) -> dict[str, Any]:
        return {
            "concurrency": self.spec.concurrency,
            "request_rate": self.spec.request_rate,
            "source": self.source,
            "client_bound": self.client_bound,
            "metrics": self.metrics,
            "client": self.health.to_json(),
            "warnings": [*self.health.warnings, *self.warnings],
        }


def discover_model(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> str:
    """The first model id the server lists (what bench_serving uses when `--model` is absent)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = http_get(f"{base_url.rstrip('/')}/v1/models", headers=headers, timeout=timeout)
        response.raise_for_status()
        return str(response.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        raise LoadError(
            f"{base_url}/v1/models: cannot read a model id ({type(exc).__name__}: {exc})"
        ) from None


def _shares(total: int | None, parts: int) -> list[int | None]:
    if total is None:
        return [None] * parts
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass(frozen=True)
class Prepared:
    """A level's dataset made ready in the parent, before any load: a prompt file's sampled rows
    and the run's salt prefix, a shared-prefix dataset's words per part, and how lengths were
    counted (for the evidence)."""

    rows: tuple[PromptRow, ...] = ()
    row_prefix: str = ""
    system_words: int = 0
    question_words: int = 0
    lengths: str = "calibrated from the server's usage (random words)"


def plans(spec: LoadSpec, model: str, prepared: Prepared | None = None) -> list[WorkerPlan]:
    """Each worker's share: slots, requests and rate split evenly (Poisson streams superpose;
    gamma streams of the same shape and scale do too, the sum keeping the mean rate); a prompt
    file's rows dealt round the workers."""
    prepared = prepared or Prepared()
    workers = min(spec.workers, spec.concurrency or spec.workers)
    if spec.num_requests is not None:
        workers = max(1, min(workers, spec.num_requests))
    headers = (("Authorization", f"Bearer {spec.api_key}"),) if spec.api_key else ()
    gsp = spec.dataset.shared_prefix if spec.dataset.kind == "generated-shared-prefix" else None
    out = []
    for index, (slots, count) in enumerate(
        zip(_shares(spec.concurrency, workers), _shares(spec.num_requests, workers), strict=True)
    ):
        out.append(
            WorkerPlan(
                index=index,
                url=spec.base_url.rstrip("/") + spec.path,
                endpoint=spec.endpoint,
                model=model,
                input_len=spec.input_len,
                output_len=spec.output_len,
                num_requests=count,
                duration_s=spec.duration_s,
                concurrency=slots,
                request_rate=spec.request_rate / workers if spec.request_rate else None,
                warmup_requests=spec.warmup_requests if index == 0 else min(spec.warmup_requests, 1),
                warmup_max_tokens=spec.warmup_max_tokens or min(spec.output_len, 32),
                seed=spec.seed,
                request_timeout_s=spec.request_timeout_s,
                level_timeout_s=spec.level_timeout_s,
                client=spec.client,
                extra_cost_us=spec.extra_cost_us,
                headers=headers,
                prompt_salt=spec.prompt_salt,
                tokenizer=spec.tokenizer,
                dataset=spec.dataset.kind,
                shared_prefix=GroupShape.of(gsp) if gsp is not None else None,
                system_words=prepared.system_words,
                question_words=prepared.question_words,
                rows=prepared.rows[index::workers] or prepared.rows,
                row_prefix=prepared.row_prefix,
                workers=workers,
                burstiness=spec.burstiness,
            )
        )
    return out


def prepare(
    spec: LoadSpec,
    count_tokens: TokenCounter | None,
    candidates: list[tuple[str, str | int]] | None,
    run: int,
) -> Prepared:
    """The level's dataset, sampled and sized in the parent (a bad file fails here, before load)."""
    counted = f"counted with the tokenizer file {spec.tokenizer}" if count_tokens else None
    dataset = spec.dataset
    if dataset.kind == "generated-shared-prefix":
        shape = dataset.shared_prefix
        return Prepared(
            system_words=words_for(shape.system_prompt_len, count_tokens),
            question_words=words_for(shape.question_len, count_tokens),
            lengths=counted or "approximated: one token per word (no tokenizer file)",
        )
    if dataset.kind in ("sharegpt", "jsonl"):
        assert candidates is not None
        rows = sample_rows(
            candidates,
            spec.num_requests,
            seed=spec.seed,
            count_tokens=count_tokens,
            fixed_output_len=dataset.fixed_output_len,
            context_len=dataset.context_len,
        )
        return Prepared(
            rows=tuple(rows),
            row_prefix=run_prefix(spec.prompt_salt, run),
            lengths=counted or "approximated: 4 characters per token (no tokenizer file)",
        )
    return Prepared()


class LoadWorkers:
    """The load worker processes of one plan, kept for all its runs (levels and repeats).

    Why: starting a worker for every run (fork, event loop, HTTP client, a warmup request to
    open a connection and calibrate the prompt) cost ~50 ms a run, ~0.4 s an experiment. A kept
    worker skips the warmup of its later runs (`bot.bench.worker`); a run that needs more
    workers than the plan has so far starts the missing ones, and a worker found dead or with
    a message nobody asked for is replaced with all the others. A run that fails in any way (a
    worker's error, a timeout, an interrupt) discards every worker: none is reused in an
    unknown state. Runs are one at a time; `close` may come from another thread while one is
    in progress (a cancelled caller), and then ends it by stopping the workers.
    """

    def __init__(self) -> None:
        self._context = _worker_context()
        self._workers: list[tuple[Any, Connection]] = []
        self._lock = threading.Lock()
        self._busy = False
        self._closed = False
        self._runs = 0
        """Runs so far: each run's prompt-file salt prefix is its own (`datasets.run_prefix`)."""
        self._files: dict[tuple[str, int, int], list[tuple[str, str | int]]] = {}
        """Prompt files read, by (path, size, mtime): read once per plan, not per level."""
        self._accept_lengths = AcceptLengthReads()

    def __enter__(self) -> LoadWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, spec: LoadSpec) -> LevelResult:
        """Run one level and return its result. Blocks; from async code use `run_async`."""
        spec.check()
        counter = None
        if spec.tokenizer is not None:
            try:  # here, so a bad file fails the level before any load, with the file's problem
                counter = load_token_counter(spec.tokenizer)
            except TokenizerError as exc:
                raise LoadError(str(exc)) from None
        try:
            prepared = prepare(spec, counter, self._candidates(spec.dataset), self._runs)
        except DatasetError as exc:
            raise LoadError(str(exc)) from None
        self._runs += 1
        model = spec.model or discover_model(spec.base_url, api_key=spec.api_key)
        spec = replace(spec, model=model)
        with self._lock:
            self._check_open()
            self._busy = True
        try:
            worker_plans = plans(spec, model, prepared)
            conns = self._started(len(worker_plans))
            for conn, plan in zip(conns, worker_plans, strict=True):
                _send(conn, ("run", plan))
            warmup_budget = spec.request_timeout_s * max(1, spec.warmup_requests) + 120.0
            ready = [_receive(conn, "ready", warmup_budget) for conn in conns]
            # one worker starts on its own clock at once; several start together, a margin ahead
            start = time.perf_counter() + START_MARGIN_S if len(conns) > 1 else None
            with self._lock:
                self._check_open()  # closed while the workers warmed: no load after a cancel
            for conn in conns:
                _send(conn, ("start", start))
            results: list[WorkerResult] = [
                _receive(conn, "done", spec.level_timeout_s + spec.request_timeout_s + EXIT_GRACE_S)
                for conn in conns
            ]
            _check_answered(ready, results)
        except BaseException:
            self._discard()
            raise
        finally:
            with self._lock:
                self._busy = False
                closed = self._closed
            if closed:
                self._discard()
        level = _merge(spec, results[0].t0 if start is None else start, results, ready)
        level.metrics["accept_length"] = self._accept_lengths.after_level(
            spec.base_url, completed=int(level.metrics.get("completed") or 0), api_key=spec.api_key
        )
        level.metrics["dataset"] = spec.dataset.describe()
        level.metrics["dataset_lengths"] = prepared.lengths
        return level

    def read_prompts(self, dataset: DatasetSpec) -> None:
        """Read the dataset's prompt file now (LoadError naming what is wrong with it), so a plan
        checks it before it stores anything; its levels then reuse what was read. Blocks: from
        async code in a thread."""
        self._candidates(dataset)

    def _candidates(self, dataset: DatasetSpec) -> list[tuple[str, str | int]] | None:
        """A prompt file's candidate requests, read once per plan (again if the file changed)."""
        if dataset.kind not in ("sharegpt", "jsonl") or dataset.prompt_file is None:
            return None
        path = dataset.prompt_file
        try:
            info = path.stat()
        except OSError as exc:
            raise LoadError(f"prompt file {path.name}: cannot read it ({exc.strerror or exc})") from None
        key = (str(path), info.st_size, info.st_mtime_ns)
        if key not in self._files:
            try:
                self._files[key] = read_prompt_file(path, dataset.kind)
            except DatasetError as exc:
                raise LoadError(str(exc)) from None
        return self._files[key]

    async def run_async(self, spec: LoadSpec) -> LevelResult:
        """`run` from an event loop: the loop only waits; the load runs in other processes."""
        return await asyncio.to_thread(self.run, spec)

    def close(self) -> None:
        """End every worker (a run in progress in another thread fails and discards them)."""
        with self._lock:
            self._closed = True
            if self._busy:
                for proc, _ in self._workers:
                    proc.kill()
                return
        self._discard()

    async def aclose(self) -> None:
        """`close` from an event loop: the workers' exits are waited for in a thread."""
        await asyncio.to_thread(self.close)

    @property
    def pids(self) -> list[int]:
        """The live workers' process ids, in worker order (diagnostics and tests)."""
        return [int(proc.pid) for proc, _ in self._workers if proc.pid is not None]

    def _check_open(self) -> None:
        if self._closed:
            raise LoadError("the load workers were closed")

    def _started(self, count: int) -> list[Connection]:
        """The first `count` workers' pipes, starting the ones that do not exist yet."""
        if any(not proc.is_alive() or conn.poll(0) for proc, conn in self._workers):
            self._discard()  # died between runs, or has something stale to say
        while len(self._workers) < count:
            parent, child = self._context.Pipe()
            proc = self._context.Process(
                target=worker_main, args=(child,), daemon=True, name=f"flagbot-load-{len(self._workers)}"
            )
            with _main_not_rerun():
                proc.start()
            child.close()
            with self._lock:
                self._workers.append((proc, parent))
                if self._closed:  # `close` came while this one started: it saw no worker to stop
                    proc.kill()
                self._check_open()
        return [conn for _, conn in self._workers[:count]]

    def _discard(self) -> None:
        """End every worker and reap it: killed, then its pipe closed, so nothing more is read.

        Why an idle worker at a plan's end is killed too, rather than left to read EOF and exit:
        a plan ends a few milliseconds after its last run, and the worker reads EOF only once
        its post-run collection is done (`bot.bench.worker.worker_main`; the wait was 17-38 ms
        per plan while that collection covered the whole heap), then closes its event loop and
        thread pool, where a killed worker's exit takes ~4 ms. Its results are in and it holds
        nothing but its memory, so the kill loses nothing; it is reaped before this returns."""
        workers, self._workers = self._workers, []
        for proc, conn in workers:
            proc.kill()
            conn.close()
        for proc, _ in workers:
            proc.join()


def _send(conn: Connection, message: tuple[str, Any]) -> None:
    try:
        conn.send(message)
    except OSError as exc:  # the worker is gone (killed, or it died)
        raise LoadError(f"a load worker cannot be reached ({type(exc).__name__}: {exc})") from None


def _check_answered(ready: list[dict[str, Any]], results: list[WorkerResult]) -> None:
    """A run whose workers all skipped their warmup (kept from an earlier run) and got no answer
    at all fails as a failed warmup would have: the server stopped answering since the plan
    began, and a run of nothing but errors would be stored as a measurement of it."""
    if not all(r.get("warmup_skipped") for r in ready):
        return
    records = [record for result in results for record in result.records]
    if records and not any(record.ok for record in records):
        raise LoadError(f"every request of the run failed: {records[0].error}")


def run_load(spec: LoadSpec) -> LevelResult:
    """Run one level with workers of its own and return its result. Blocks; from async code
    use `run_load_async`; for several levels of one plan, `LoadWorkers`."""
    with LoadWorkers() as workers:
        return workers.run(spec)


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Start a worker without re-running the parent's `__main__` in it.

    multiprocessing re-executes the parent's main script in every child it starts (spawn and
    fork server alike), so functions defined there unpickle. The workers' entry point lives in
    `bot.bench.worker`, so that re-run is pure cost: for the `flagbot` console script it imports
    the whole CLI again, ~0.4 s per worker per level and repeat. multiprocessing's own rule skips
    the re-run when `__main__` is a package's `__main__` module (`python -m pkg`); the main
    module is marked so while the worker starts, and put back at once.
    """
    with _MAIN_SWAP:  # levels run in threads (`run_load_async`): one swap at a time
        main = sys.modules["__main__"]
        spec = getattr(main, "__spec__", None)
        main.__spec__ = importlib.machinery.ModuleSpec("bot.__main__", None)
        try:
            yield
        finally:
            main.__spec__ = spec


def prestart() -> None:
    """Start the workers' fork server now, so its imports overlap the work before the first level.

    Returns at once: the server imports `WORKER_MODULES` in its own process while the caller
    goes on (preflight, snapshots); the first level then only forks. Without a fork server
    (spawn), there is nothing to start ahead."""
    if _worker_context().get_start_method() == "forkserver":
        forkserver.ensure_running()


def _worker_context() -> SpawnContext | ForkServerContext:
    """Fork server with the worker module preloaded (single-threaded, so forking it is safe even
    though the caller has threads); spawn where fork servers do not exist."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    return context


async def run_load_async(spec: LoadSpec) -> LevelResult:
    """`run_load` from an event loop: the loop only waits; the load runs in other processes."""
    return await asyncio.to_thread(run_load, spec)


@overload
def _receive(conn: Connection, expected: Literal["ready"], timeout: float) -> dict[str, Any]: ...
@overload
def _receive(conn: Connection, expected: Literal["done"], timeout: float) -> WorkerResult: ...
def _receive(conn: Connection, expected: str, timeout: float) -> object:
    """The payload of the worker's next message, which must be `expected` (see `bot.bench.worker`)."""
    if not conn.poll(timeout):
        raise LoadError(f"a load worker sent no {expected!r} within {timeout:g} s")
    try:
        kind, payload = conn.recv()
    except (EOFError, OSError):  # the worker died (killed, or crashed hard)
        raise LoadError("a load worker exited without a result") from None
    if kind == "error":
        raise LoadError(f"load worker failed: {str(payload).strip().splitlines()[-1]}\n{payload}")
    if kind != expected:
        raise LoadError(f"a load worker sent {kind!r}, expected {expected!r}")
    return payload


def _merge(
    spec: LoadSpec, start: float, results: list[WorkerResult], ready: list[dict[str, Any]]
) -> LevelResult:
    records = [record for result in results for record in result.records]
    metrics = summarize(
        records,
        start=start,
        requested_input_len=spec.input_len,
        request_rate=spec.request_rate,
        max_concurrency=spec.concurrency,
        slo=spec.slo,
    )
    health = judge(
        [WorkerStats(r.cpu_s, r.wall_s, r.events, r.lag_s, r.idle_s) for r in results],
        median_itl_ms=metrics.get("median_chunk_itl_ms"),  # the loop sees chunks, not tokens
        open_loop=spec.request_rate is not None,
        capped=spec.concurrency is not None,
        request_rate=spec.request_rate,
        p90_dispatch_delay_ms=metrics.get("p90_dispatch_delay_ms"),
    )
    health.figures["prompt_words"] = ready[0].get("prompt_words") if ready else None
    health.figures["warmup_prompt_tokens"] = ready[0].get("warmup_prompt_tokens") if ready else None
    health.figures["warmup_s"] = max((float(r.get("warmup_s") or 0.0) for r in ready), default=0.0)
    warnings = []
    if metrics["output_tokens_source"] not in (None, "usage"):
        warnings.append(
            "the server sent no usage for some requests: their output tokens are counted from chunks"
        )
    words = int(ready[0].get("prompt_words") or spec.input_len) if ready else spec.input_len
    return LevelResult(spec, metrics, health, records, words, warnings=warnings)
