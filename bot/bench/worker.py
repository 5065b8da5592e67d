"""The load generator's worker: a forked process that serves a plan's runs, one at a time.

Why a process of its own: a Python client costs CPU per streamed token (plain httpx ~380 µs,
httpx over the aiohttp transport ~90 µs, as measured when the client was chosen). Inside the
bot's event loop that cost would both slow the bot and stretch every timestamp the benchmark
takes. Here nothing else competes for the loop, and the worker measures its own CPU time and
loop lag so a saturated client is reported as such (`client_health`).

Protocol with the parent (`loadgen.LoadWorkers`), over a `multiprocessing` pipe, once per run
(a level and repeat): parent -> `("run", WorkerPlan)`; worker -> `("ready", info)` after its
warmup; parent -> `("start", t0)` (a time on the shared monotonic clock, the same for every
worker; None: "now", for a worker that runs alone); worker -> `("done", WorkerResult)` or
`("error", text)`, after which it exits. Warmup requests are never part of the result. The
process serves runs until the parent closes the pipe: a worker that has warmed against a server
(same URL, model, endpoint and prompt length) skips the warmup of its later runs, the prompt it
calibrated still holds, and the server is warm by then. The runs share one event loop
(`worker_main` says why), but every run opens its own HTTP client: a server closes keep-alive
connections left idle between runs (uvicorn after 5 s), and a request sent on one it is closing
would fail in the measurement; a warm worker opens its first connection (and resolves the host)
with a `/v1/models` request before it reports ready, as its warmup did in the first run. The
prompt stream goes on from run to run (one seeded generator per worker and plan, `prompt_salt`
apart from other plans'), so no prompt is sent twice: a server's prefix cache never answers a
measured prompt it has seen before.

The client is aiohttp directly by default, httpx over the `httpx-aiohttp` transport on request
(`client="httpx"`): measured with `bench/loadgen_capacity.py` on this machine kind, aiohttp costs
~24 µs of CPU per streamed event at the margin against httpx's ~40 µs, reads ~26 k events/s
(httpx ~14 k) with mean and median figures within 5 % of the twin's truth, and adds half the
TTFT (~1.5 ms against ~3 ms) — the httpx layer's request and response objects are the difference.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import math
import random
import time
import traceback
from array import array
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Literal

from bot.bench.metrics import RequestRecord
from bot.bench.prompt_groups import SALT_WORDS, PromptRow, SharedPrefixGroups, group_order, system_prompt
from bot.bench.prompts import calibrate, make_prompt
from bot.bench.sse import Chunk, SSEDecoder, interpret
from bot.bench.tokenizer import TokenCounter, load_token_counter
from bot.bench.worker_meters import IdleMeter, lag_probe, spin

if TYPE_CHECKING:
    import aiohttp
    import httpx

    from bot.config.datasets import DatasetKind  # not at run time: see bot.bench.prompt_groups

__all__ = ["WorkerPlan", "WorkerResult", "arrival_gap", "note_chunk", "worker_main"]

ClientKind = Literal["httpx", "aiohttp"]


@dataclass(frozen=True)
class WorkerPlan:
    """This worker's share of one benchmark level."""

    index: int
    url: str
    endpoint: Literal["chat", "completions"]
    model: str
    input_len: int
    output_len: int
    num_requests: int | None
    duration_s: float | None
    concurrency: int | None
    request_rate: float | None
    warmup_requests: int
    warmup_max_tokens: int
    seed: int
    request_timeout_s: float
    level_timeout_s: float
    client: ClientKind = "aiohttp"
    extra_cost_us: float = 0.0
    """Artificial CPU per event: lets tests and docs show what a saturated client looks like."""
    headers: tuple[tuple[str, str], ...] = ()
    prompt_salt: int = 0
    """Sets this plan's prompt stream apart from other plans' with the same seed."""
    tokenizer: str | None = None
    """The target's tokenizer file: counts a chunk's tokens when the stream has no running usage."""
    dataset: DatasetKind = "random"
    shared_prefix: SharedPrefixGroups | None = None
    """`generated-shared-prefix`: the groups; prompts are `system_words` + `question_words` words."""
    system_words: int = 0
    question_words: int = 0
    rows: tuple[PromptRow, ...] = ()
    """`sharegpt`/`jsonl`: this worker's share of the sampled requests, sent in order (cycled)."""
    row_prefix: str = ""
    """The run's salt words in front of every file prompt (`datasets.run_prefix`)."""
    workers: int = 1
    """Workers of the level: a shared-prefix request's place in the group order is
    `k * workers + index` for this worker's k-th request."""
    burstiness: float = 1.0
    """Open loop: the gamma shape of the gaps between arrivals (1: Poisson)."""


def arrival_gap(rng: random.Random, rate: float, burstiness: float) -> float:
    """Seconds to the next arrival at `rate` requests/s: exponential for `burstiness` 1
    (Poisson, bench_serving's `get_request`), else gamma with shape `burstiness` and scale
    1 / (rate x burstiness), as vLLM's `bench serve --burstiness` draws it: the mean gap stays
    1 / rate, and a burstiness below 1 bunches arrivals, above 1 evens them out."""
    if burstiness == 1.0:
        return rng.expovariate(rate)
    return rng.gammavariate(burstiness, 1.0 / (rate * burstiness))


@dataclass
class WorkerResult:
    records: list[RequestRecord]
    cpu_s: float
    wall_s: float
    events: int
    lag_s: array[float]
    idle_s: float | None
    """Time the loop spent waiting in its selector (nothing to do); None when not measurable."""
    prompt_words: int
    warmup_prompt_tokens: int | None
    t0: float = 0.0
    """The run's start on the shared monotonic clock (the parent's, or this worker's own "now")."""
    extra: dict[str, Any] = field(default_factory=dict)


WarmKey = tuple[str, str, str, int]
"""(url, model, endpoint, input_len): what a calibrated prompt length is valid for."""


@dataclass
class _Kept:
    """What a worker process keeps from one run of its plan to the next."""

    warmed: dict[WarmKey, tuple[int, int | None]] = field(default_factory=dict)
    """Calibrated prompt words and the server's prompt tokens, per server and shape."""
    prompts: dict[tuple[int, int, int], random.Random] = field(default_factory=dict)
    counters: dict[str, TokenCounter] = field(default_factory=dict)
    """Loaded tokenizer files, by path (loaded once per process, not per run)."""
    systems: dict[tuple[int, int, int, int], str] = field(default_factory=dict)
    """Shared system prompts by (seed, salt, group, words): made once per process and set."""

    def system_prompt(self, plan: WorkerPlan, group: int) -> str:
        key = (plan.seed, plan.prompt_salt, group, plan.system_words)
        if key not in self.systems:
            self.systems[key] = system_prompt(plan.seed, plan.prompt_salt, group, plan.system_words)
        return self.systems[key]

    def token_counter(self, plan: WorkerPlan) -> TokenCounter | None:
        if plan.tokenizer is None:
            return None
        if plan.tokenizer not in self.counters:
            self.counters[plan.tokenizer] = load_token_counter(plan.tokenizer)
        return self.counters[plan.tokenizer]

    def prompt_rng(self, plan: WorkerPlan) -> random.Random:
        """The worker's prompt generator, continued from run to run (seeded per plan)."""
        key = (plan.seed, plan.index, plan.prompt_salt)
        if key not in self.prompts:
            seed = plan.seed * 1009 + plan.index + (plan.prompt_salt << 40)
            self.prompts[key] = random.Random(seed)  # noqa: S311 - benchmark data
        return self.prompts[key]


def worker_main(conn: Connection) -> None:
    """Process entry point: serve the runs the parent sends on `conn` until it closes the pipe.

    Why one event loop for all the plan's runs and no collection of the whole heap: the heap is
    mostly what the fork server imported (aiohttp, httpx: ~48,000 objects), which is never
    garbage. Frozen once here, it is left out of every collection this process makes; a new
    loop per run and an unfreeze with a full collection after it cost ~16-30 ms between two
    runs (the next run's `run` waited for it) and ~28 ms before a plan's first `ready`. After
    a run only what is younger than that freeze is collected (the run's records, client and
    setup: ~100 objects live at `ready`), and what survives (the kept state, the loop) is
    frozen in turn. Only survivors of a collection are frozen, and they are the process's
    lasting state, so frozen garbage does not pile up (counted against a twin: none after a
    warm run, 6 objects once after the first).
    """
    gc.freeze()
    kept = _Kept()
    try:
        with asyncio.Runner() as runner:
            while True:
                command, plan = conn.recv()
                if command != "run":
                    return
                runner.run(_Worker(plan, conn, kept).main())
                gc.collect()  # while the parent stores the result: the run's garbage goes now
                gc.freeze()
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return  # the parent closed the pipe (its plan ended, or it discarded this worker)
    except BaseException:
        with contextlib.suppress(OSError):
            conn.send(("error", traceback.format_exc(limit=8)))
    finally:
        conn.close()


class _Worker:
    def __init__(self, plan: WorkerPlan, conn: Connection, kept: _Kept) -> None:
        self.plan = plan
        self.conn = conn
        self.warmed = kept.warmed
        self.rng = kept.prompt_rng(plan)
        self.count_text = kept.token_counter(plan)
        self.kept = kept
        self.words = plan.input_len
        self.made = 0  # measured prompts made in this run: the place in the group order or the rows
        self.order = (
            group_order(plan.seed, plan.prompt_salt, plan.shared_prefix) if plan.shared_prefix else []
        )
        self.events = 0
        self.records: list[RequestRecord] = []
        self.headers = {"Content-Type": "application/json", **dict(plan.headers)}
        self._stream: Callable[[RequestRecord, bytes], Any]
        self._close: Callable[[], Any]
        self._get: Callable[[str], Awaitable[None]]

    # -- the run -----------------------------------------------------------------------------

    async def main(self) -> None:
        await self._open_client()
        try:
            warm_start = time.perf_counter()
            key = (self.plan.url, self.plan.model, self.plan.endpoint, self.plan.input_len)
            earlier = self.warmed.get(key)
            if earlier is not None:  # warmed by an earlier run of this process: the server is warm
                self.words, reported = earlier
                await self._touch()
            else:
                reported = await self._warmup()
                if self.plan.warmup_requests:
                    self.warmed[key] = (self.words, reported)
            ready = {
                "prompt_words": self.words,
                "warmup_prompt_tokens": reported,
                "warmup_s": 0.0 if earlier is not None else time.perf_counter() - warm_start,
                "warmup_skipped": earlier is not None,
            }
            bodies = self._bodies()  # before "ready": after "start" a worker only waits for t0
            # keep collector pauses out of the timings: with the young generations empty and all
            # older objects frozen (`worker_main`), a collection in the run sees only its own objects
            gc.collect()
            self.conn.send(("ready", ready))
            command, start = self.conn.recv()
            if command != "start":
                return
            t0 = time.perf_counter() if start is None else start
            await asyncio.sleep(max(0.0, t0 - time.perf_counter()))
            result = await self._measured(t0, bodies)
            result.warmup_prompt_tokens = reported
            self.conn.send(("done", result))
        finally:
            await self._close()

    async def _touch(self) -> None:
        """Open this run's first connection before the clock starts: one `/v1/models` request
        (cheap, no generation). A failure is left to the measured requests to show."""
        url = self.plan.url.rsplit("/v1/", 1)[0] + "/v1/models"
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.plan.request_timeout_s):
                await self._get(url)

    async def _warmup(self) -> int | None:
        """Sequential requests: the server is warm, connections exist, prompt length calibrated.

        A failed warmup request is retried (up to twice the warmup count): a server that fails
        a share of its requests is a thing to measure, not a reason to refuse. None succeeding
        is: the level would measure nothing.
        """
        reported: int | None = None
        wanted = self.plan.warmup_requests
        succeeded = 0
        error = None
        for _ in range(2 * wanted + 1 if wanted else 0):
            record = RequestRecord(scheduled=0.0, send=0.0)
            await self._one(record, self._body(self.plan.warmup_max_tokens, warmup=True))
            if not record.ok:
                error = record.error
                continue
            succeeded += 1
            reported = record.prompt_tokens
            if self.plan.dataset == "random":  # the other datasets' lengths are their own
                self.words = calibrate(self.plan.input_len, self.words, reported)
            if succeeded == wanted:
                break
        if wanted and not succeeded:
            raise RuntimeError(f"every warmup request failed: {error}")
        return reported

    def _next_prompt(self, *, warmup: bool) -> tuple[str, int]:
        """The next prompt of the plan's dataset and the output tokens it asks for.

        A warmup request sends the dataset's next request without taking its place (a shared
        prefix is warmed, as bench_serving's warmup with its first request does); a file
        prompt's warmup goes behind fresh salt words instead of the run's, so no measured
        request finds its whole prompt cached by the warmup."""
        plan = self.plan
        made = self.made
        if not warmup:
            self.made += 1
        if plan.shared_prefix is not None and self.order:
            group = self.order[(made * plan.workers + plan.index) % len(self.order)]
            question = make_prompt(self.rng, plan.question_words)
            return f"{self.kept.system_prompt(plan, group)}\n\n{question}", plan.shared_prefix.output_len
        if plan.dataset in ("sharegpt", "jsonl") and plan.rows:
            row = plan.rows[made % len(plan.rows)]
            prefix = make_prompt(self.rng, SALT_WORDS) if warmup else plan.row_prefix
            return f"{prefix} {row.prompt}", row.output_len
        return make_prompt(self.rng, self.words), plan.output_len

    def _body(self, max_tokens: int | None = None, *, warmup: bool = False) -> bytes:
        plan = self.plan
        prompt, output_len = self._next_prompt(warmup=warmup)
        body: dict[str, Any] = {
            "model": plan.model,
            "max_tokens": max_tokens or output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            # the running usage on every chunk gives each chunk's token count (SGLang, vLLM)
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        }
        if plan.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return json.dumps(body).encode()

    def _bodies(self) -> Callable[[int], bytes]:
        """Bodies made before the clock starts when the count is known; else on demand."""
        if self.plan.num_requests is None:
            return lambda _: self._body()
        made = [self._body() for _ in range(self.plan.num_requests)]
        return made.__getitem__

    async def _measured(self, t0: float, body: Callable[[int], bytes]) -> WorkerResult:
        plan = self.plan
        stop = asyncio.Event()
        lags = array("d")
        probe = asyncio.create_task(lag_probe(stop, lags))
        idle = IdleMeter(asyncio.get_running_loop())
        cpu0, wall0 = time.process_time(), time.perf_counter()
        deadline = t0 + plan.duration_s if plan.duration_s is not None else math.inf
        try:
            async with asyncio.timeout(plan.level_timeout_s):
                if plan.request_rate is None:
                    await self._closed(body, deadline)
                else:
                    await self._open(t0, body, deadline)
        except TimeoutError:
            pass  # records of unfinished requests say so; the level result shows them as failed
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        idle_s = idle.stop()
        stop.set()
        await probe
        for record in self.records:
            if not record.ok and record.error is None:
                record.error = f"level timeout after {plan.level_timeout_s:g} s"
                record.end = record.end or time.perf_counter()
        return WorkerResult(self.records, cpu, wall, self.events, lags, idle_s, self.words, None, t0)

    async def _closed(self, body: Callable[[int], bytes], deadline: float) -> None:
        """Fixed concurrency: each slot sends its next request the moment its last one ends."""
        counter = itertools.count()
        limit = self.plan.num_requests

        async def slot() -> None:
            while True:
                index = next(counter)
                now = time.perf_counter()
                if (limit is not None and index >= limit) or now >= deadline:
                    return
                record = RequestRecord(scheduled=now, send=now)
                self.records.append(record)
                await self._one(record, body(index))

        await asyncio.gather(*(slot() for _ in range(self.plan.concurrency or 1)))

    async def _open(self, t0: float, body: Callable[[int], bytes], deadline: float) -> None:
        """Poisson or gamma arrivals (seeded, `arrival_gap`); a concurrency cap delays sends as
        bench_serving's semaphore does, and the delay is kept (`send - scheduled`) instead of hidden."""
        plan = self.plan
        assert plan.request_rate is not None
        arrivals = random.Random(plan.seed * 7919 + plan.index)  # noqa: S311 - benchmark schedule
        cap = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None
        tasks: list[asyncio.Task[None]] = []
        when = t0
        for index in itertools.count():
            if (plan.num_requests is not None and index >= plan.num_requests) or when >= deadline:
                break
            await asyncio.sleep(max(0.0, when - time.perf_counter()))
            record = RequestRecord(scheduled=when, send=when)
            self.records.append(record)
            tasks.append(asyncio.create_task(self._capped(cap, record, body(index))))
            when += arrival_gap(arrivals, plan.request_rate, plan.burstiness)
        await asyncio.gather(*tasks)

    async def _capped(self, cap: asyncio.Semaphore | None, record: RequestRecord, body: bytes) -> None:
        if cap is None:
            await self._one(record, body)
            return
        async with cap:
            await self._one(record, body)

    # -- one request -------------------------------------------------------------------------

    async def _one(self, record: RequestRecord, body: bytes) -> None:
        record.send = time.perf_counter()
        try:
            async with asyncio.timeout(self.plan.request_timeout_s):
                await self._stream(record, body)
        except TimeoutError:
            record.error = f"request timeout after {self.plan.request_timeout_s:g} s"
        except asyncio.CancelledError:
            record.error = "cancelled (level timeout)"
            record.end = time.perf_counter()
            raise
        except Exception as exc:  # every transport error is a failed request, grouped by kind
            record.error = f"{type(exc).__name__}: {exc}"
        if not record.end:
            record.end = time.perf_counter()
        if record.error is None and not record.chunks:
            record.error = "stream ended without generated text"
        record.ok = record.error is None

    async def _consume(self, record: RequestRecord, reads: AsyncIterator[bytes]) -> None:
        decoder = SSEDecoder()
        cost = self.plan.extra_cost_us / 1e6
        count_text = self.count_text
        async for data in reads:
            now = time.perf_counter()
            for payload in decoder.feed(data):
                self.events += 1
                if cost:
                    spin(cost)
                note_chunk(record, interpret(payload), now, count_text)
            record.end = now

    # -- clients -----------------------------------------------------------------------------

    async def _open_client(self) -> None:
        # The CLI imports this module (for WorkerPlan) but never opens a client here; the forked worker
        # does, and its fork server has preloaded the clients (loadgen.WORKER_MODULES).
        # deferred: aiohttp costs the CLI ~0.1 s; only the forked load worker needs it
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=60, enable_cleanup_closed=True)
        session = aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=False)

        async def get(url: str) -> None:  # both clients share this session's connections
            async with session.get(url, headers=self.headers) as response:
                await response.read()

        self._get = get
        if self.plan.client == "aiohttp":
            self._stream = lambda record, body: self._aiohttp(session, record, body)
            self._close = session.close
            return
        import httpx  # deferred: only a client="httpx" plan needs it, in the forked worker
        from httpx_aiohttp import AiohttpTransport  # deferred: likewise, only for client="httpx"

        client = httpx.AsyncClient(
            transport=AiohttpTransport(client=session),
            timeout=httpx.Timeout(self.plan.request_timeout_s),
            trust_env=False,
        )
        self._stream = lambda record, body: self._httpx(client, record, body)

        async def close() -> None:
            await client.aclose()
            await session.close()

        self._close = close

    async def _httpx(self, client: httpx.AsyncClient, record: RequestRecord, body: bytes) -> None:
        async with client.stream("POST", self.plan.url, content=body, headers=self.headers) as response:
            if response.status_code != 200:
                text = (await response.aread()).decode("utf-8", "replace")
                record.error = f"HTTP {response.status_code}: {_message(text)}"
                return
            await self._consume(record, response.aiter_raw())

    async def _aiohttp(self, session: aiohttp.ClientSession, record: RequestRecord, body: bytes) -> None:
        async with session.post(self.plan.url, data=body, headers=self.headers) as response:
            if response.status != 200:
                text = (await response.read()).decode("utf-8", "replace")
                record.error = f"HTTP {response.status}: {_message(text)}"
                return
            await self._consume(record, response.content.iter_any())


def note_chunk(record: RequestRecord, chunk: Chunk, now: float, count_text: TokenCounter | None) -> None:
    """Add one stream event to `record`: a content chunk's arrival and its token count, the
    server's usage, an error in the stream.

    A chunk's tokens: the growth of the running `usage.completion_tokens` when the chunk carries
    it (`continuous_usage_stats`), else `count_text` over its text (the target's tokenizer),
    else 1. A content chunk counts at least one token.
    """
    if chunk.content:
        record.chunks.append(now)
        running = _int(chunk.usage.get("completion_tokens")) if chunk.usage is not None else None
        if running is not None:
            record.chunk_tokens.append(max(1, running - (record.completion_tokens or 0)))
            record.chunk_tokens_source = "usage"
        elif count_text is not None:
            record.chunk_tokens.append(max(1, count_text(chunk.text)))
            record.chunk_tokens_source = "tokenizer"
        else:
            record.chunk_tokens.append(1)
    if chunk.usage is not None:
        record.prompt_tokens = _int(chunk.usage.get("prompt_tokens"))
        record.completion_tokens = _int(chunk.usage.get("completion_tokens"))
    if chunk.error is not None and record.error is None:
        record.error = chunk.error


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _message(body: str) -> str:
    """The error message of an OpenAI/FastAPI error body, else its first 200 characters."""
    try:
        obj = json.loads(body)
    except ValueError:
        return body.strip()[:200]
    if isinstance(obj, dict):
        for candidate in (obj.get("error"), obj):
            if isinstance(candidate, dict) and isinstance(candidate.get("message"), str):
                return str(candidate["message"])[:200]
        if isinstance(obj.get("detail"), str):
            return str(obj["detail"])[:200]
    return body.strip()[:200]
