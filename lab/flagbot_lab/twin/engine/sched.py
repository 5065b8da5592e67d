"""The twin's scheduler: continuous batching, queueing, prefill and paced token emission.

Model (what a benchmark against the twin should see, and why it is built this way):

* At most `max_running` requests decode at once (SGLang's *effective* max_running_requests, the
  figure the seeds' incident is about); further requests wait in a FIFO queue. A request is also
  held back while the KV pool (`max_total_tokens`) could not hold its prompt plus its output.
* Prefill is one engine shared by all requests: a request's first token is due once every
  earlier prefill is done plus `prompt_tokens / prefill_tok_s`. So TTFT = queue wait + prefill
  wait + own prefill, and a burst of arrivals shows rising TTFT as on a real GPU.
* Decode speed per stream comes from the scenario's aggregate curve (tok/s over the running
  batch, linearly interpolated, flat after its last point) divided by the batch size, times the
  throughput factor of the flags and a per-start noise factor; each request also has its own
  duration noise. The gap to a stream's next token is computed when it emits a token, from the
  batch size at that moment.
* `time_scale` (the scenario's decode_scale) multiplies every serving duration, so a test can
  run a 121 tok/s model ten times faster and still see the same shape.

Token times are absolute deadlines (`due`), each computed from the previous deadline, never
from when the token was actually written: late wake-ups never accumulate into drift, and the
schedule depends only on arrival times and the seed, so it is reproducible. The clock is passed
in (`now`), so unit tests drive this in virtual time; `Pacer` drives it from the asyncio loop
with one timer for all streams, which is what lets one process pace thousands of streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import random
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Job", "Pacer", "Scheduler", "ThroughputModel", "lognormal_factor"]


def lognormal_factor(rng: random.Random, cv: float) -> float:
    """A positive multiplier with mean 1 and the given coefficient of variation."""
    if cv <= 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return math.exp(rng.gauss(-sigma * sigma / 2, sigma))


@dataclass(frozen=True)
class ThroughputModel:
    """Decode and prefill speed. `points` are (running batch, aggregate tok/s), any order."""

    single_stream_tok_s: float
    points: tuple[tuple[float, float], ...] = ()
    prefill_tok_s: float = 10000.0
    factor: float = 1.0
    time_scale: float = 1.0
    _curve: tuple[tuple[float, float], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pts = {1.0: self.single_stream_tok_s}
        for batch, agg in self.points:
            if batch >= 1 and agg > 0:
                pts[float(batch)] = float(agg)
        object.__setattr__(self, "_curve", tuple(sorted(pts.items())))

    def aggregate(self, batch: int) -> float:
        """Aggregate tok/s at this running batch, before factor and noise."""
        curve = self._curve
        n = float(max(1, batch))
        if n <= curve[0][0]:
            return curve[0][1] * n / curve[0][0]
        for (x0, y0), (x1, y1) in itertools.pairwise(curve):
            if n <= x1:
                return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
        return curve[-1][1]

    def token_gap(self, batch: int) -> float:
        """Seconds between two tokens of one stream when `batch` streams decode."""
        n = max(1, batch)
        return self.time_scale * n / (self.aggregate(n) * self.factor)

    def prefill_time(self, tokens: int) -> float:
        return self.time_scale * tokens / (self.prefill_tok_s * self.factor)


TokenSink = Callable[["Job", int, float], None]
"""Called as (job, token index, scheduled time) when a token is emitted."""


class Job:
    """One request inside the scheduler, with what it was meant to do and what it did."""

    __slots__ = (
        "act_first",
        "act_last",
        "admitted",
        "arrival",
        "cancelled",
        "due",
        "emitted",
        "fail_at",
        "finished",
        "internal",
        "late_max",
        "late_sum",
        "noise",
        "on_done",
        "on_token",
        "prompt_tokens",
        "rid",
        "sched_first",
        "sched_last",
        "target_tokens",
        "trace",
    )

    def __init__(
        self,
        rid: str,
        prompt_tokens: int,
        target_tokens: int,
        *,
        on_token: TokenSink | None = None,
        on_done: Callable[[Job], None] | None = None,
        fail_at: int | None = None,
        internal: bool = False,
        trace: bool = False,
    ) -> None:
        self.rid = rid
        self.prompt_tokens = max(1, prompt_tokens)
        self.target_tokens = max(1, target_tokens)
        self.on_token = on_token
        self.on_done = on_done
        self.fail_at = fail_at
        self.internal = internal
        self.trace: tuple[array[float], array[float]] | None = (array("d"), array("d")) if trace else None
        self.arrival = 0.0
        self.admitted: float | None = None
        self.due = math.inf
        self.emitted = 0
        self.noise = 1.0
        self.cancelled = False
        self.finished = False
        self.sched_first = self.act_first = self.sched_last = self.act_last = 0.0
        self.late_sum = 0.0
        self.late_max = -math.inf

    @property
    def failed(self) -> bool:
        return (
            self.finished and self.fail_at is not None and self.emitted == self.fail_at < self.target_tokens
        )

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.target_tokens


@dataclass
class Counters:
    """Cumulative figures for /metrics (user requests only, not health checks or warmup)."""

    requests: int = 0
    finished: int = 0
    failed: int = 0
    aborted: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    emitted_all: int = 0


class Scheduler:
    """The queue, the running batch and the deadline heap. All times are the caller's clock."""

    def __init__(
        self,
        model: ThroughputModel,
        *,
        max_running: int,
        max_total_tokens: int | None = None,
        seed: int = 0,
        request_cv: float = 0.0,
        on_prefill: Callable[[list[Job], float], None] | None = None,
    ) -> None:
        self.model = model
        self.max_running = max(1, max_running)
        self.max_total_tokens = max_total_tokens
        self.request_cv = request_cv
        self.rng = random.Random(seed)  # noqa: S311 - simulation noise, not secrets
        self.on_prefill = on_prefill
        self.waiting: deque[Job] = deque()
        self.running: dict[str, Job] = {}
        self.used_tokens = 0
        self.counters = Counters()
        self._heap: list[tuple[float, int, Job]] = []
        self._seq = 0
        self._prefill_free = -math.inf

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_queue(self) -> int:
        return len(self.waiting)

    def tokens_in_use(self) -> int:
        """KV tokens the running batch holds now (prompts plus what they generated so far)."""
        return sum(j.prompt_tokens + j.emitted for j in self.running.values())

    def submit(self, job: Job, now: float) -> None:
        job.arrival = now
        job.noise = lognormal_factor(self.rng, self.request_cv)
        if not job.internal:
            self.counters.requests += 1
        self.waiting.append(job)
        self._admit(now)

    def cancel(self, job: Job, now: float) -> None:
        """The client went away: drop the job wherever it is (its heap entry is skipped lazily)."""
        if job.finished or job.cancelled:
            return
        job.cancelled = True
        if job.admitted is None:
            with contextlib.suppress(ValueError):
                self.waiting.remove(job)
            return
        if not job.internal:
            self.counters.aborted += 1
        self._release(job)
        self._admit(now)

    def next_due(self) -> float | None:
        heap = self._heap
        while heap and (heap[0][2].cancelled or heap[0][2].finished):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run_due(self, now: float, horizon: float | None = None) -> int:
        """Emit every token due by `horizon` (default `now`); `now` is the actual time stamped."""
        limit = now if horizon is None else horizon
        heap = self._heap
        emitted = 0
        freed = -math.inf
        while heap and heap[0][0] <= limit:
            due, _, job = heapq.heappop(heap)
            if job.cancelled or job.finished:
                continue
            emitted += 1
            if self._emit(job, due, now):
                freed = max(freed, due)
        if freed > -math.inf:
            self._admit(freed)
        return emitted

    def _emit(self, job: Job, due: float, now: float) -> bool:
        """Emit job's next token (or its failure); True when the job left the batch."""
        index = job.emitted
        late = now - due
        if index == 0:
            job.sched_first, job.act_first = due, now
        job.sched_last, job.act_last = due, now
        job.late_sum += late
        if late > job.late_max:
            job.late_max = late
        if job.trace is not None:
            job.trace[0].append(due)
            job.trace[1].append(now)
        if job.fail_at is not None and index >= job.fail_at:
            job.finished = True
            if not job.internal:
                self.counters.failed += 1
            self._release(job)
            if job.on_done is not None:
                job.on_done(job)
            return True
        job.emitted = index + 1
        self.counters.emitted_all += 1
        if not job.internal:
            self.counters.generation_tokens += 1
        if job.on_token is not None:
            job.on_token(job, index, due)
        if job.emitted >= job.target_tokens:
            job.finished = True
            if not job.internal:
                self.counters.finished += 1
            self._release(job)
            if job.on_done is not None:
                job.on_done(job)
            return True
        nxt = due + self.model.token_gap(len(self.running)) * job.noise
        job.due = nxt
        self._seq += 1
        heapq.heappush(self._heap, (nxt, self._seq, job))
        return False

    def _release(self, job: Job) -> None:
        if self.running.pop(job.rid, None) is not None:
            self.used_tokens -= job.kv_tokens

    def _fits(self, job: Job) -> bool:
        if len(self.running) >= self.max_running:
            return False
        if self.max_total_tokens is None or not self.running:
            return True
        return self.used_tokens + job.kv_tokens <= self.max_total_tokens

    def _admit(self, at: float) -> None:
        """Move waiting jobs into the batch, FIFO, while they fit; `at` is when a slot opened."""
        admitted: list[Job] = []
        while self.waiting and self._fits(self.waiting[0]):
            job = self.waiting.popleft()
            start = max(at, job.arrival)
            job.admitted = start
            self.running[job.rid] = job
            self.used_tokens += job.kv_tokens
            prefill_start = max(start, self._prefill_free)
            first = prefill_start + self.model.prefill_time(job.prompt_tokens) * job.noise
            self._prefill_free = first
            job.due = first
            self._seq += 1
            heapq.heappush(self._heap, (first, self._seq, job))
            if not job.internal:
                self.counters.prompt_tokens += job.prompt_tokens
            admitted.append(job)
        if admitted and self.on_prefill is not None:
            self.on_prefill(admitted, at)


class Pacer:
    """Drives a Scheduler from an asyncio loop with a single timer (`loop.call_at`).

    asyncio's epoll waits in whole milliseconds (timeouts are rounded up), so a timer alone
    leaves tokens up to a millisecond late: 5% of a 20 ms gap. The pacer therefore arms its
    timer `lead` seconds before the next deadline and, once woken, sleeps the sub-millisecond
    remainder with `time.sleep` (nanosleep, about 0.1 ms precision) before emitting every token
    due within `slack`. It only ever sleeps when the loop had nothing else due: a busy loop
    wakes late and emits at once. I/O waits at most one millisecond meanwhile.
    """

    def __init__(
        self, sched: Scheduler, loop: asyncio.AbstractEventLoop, lead: float = 0.0011, slack: float = 0.0001
    ) -> None:
        self.sched = sched
        self.loop = loop
        self.lead = lead
        self.slack = slack
        self._handle: asyncio.TimerHandle | None = None
        self._armed_at = math.inf

    def now(self) -> float:
        return self.loop.time()

    def submit(self, job: Job) -> None:
        self.sched.submit(job, self.loop.time())
        self.kick()

    def cancel(self, job: Job) -> None:
        self.sched.cancel(job, self.loop.time())
        self.kick()

    def kick(self) -> None:
        """Re-arm the timer if the earliest deadline moved before it."""
        due = self.sched.next_due()
        if due is None:
            return
        when = due - self.lead
        if when < self._armed_at - 1e-6:
            if self._handle is not None:
                self._handle.cancel()
            self._armed_at = when
            self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_at = math.inf
        due = self.sched.next_due()
        if due is None:
            return
        wait = due - self.loop.time()
        if wait > self.lead:
            self.kick()  # woke too early (the deadline moved): wait again
            return
        if wait > self.slack:
            time.sleep(wait - self.slack / 2)
        now = self.loop.time()
        self.sched.run_due(now, now + self.slack)
        self.kick()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
