"""The twin's scheduler: continuous batching, queueing, prefill and paced token emission.

Model (what a benchmark against the twin should see, and why it is built this way):

* At most `max_running` requests decode at once (SGLang's *effective* max_running_requests, the
  figure the seeds' incident is about); further requests wait in a queue, in the order
  `--schedule-policy` gives it (fcfs: arrival). A request is also held back while the KV pool
  (`max_total_tokens`) could not hold its uncached prompt plus `new_token_ratio` times its
  output; a running request whose next token finds the pool full gets requests retracted.
* Prefill is one engine shared by all requests: a request's first token is due once every
  earlier prefill is done plus its uncached prompt tokens / `prefill_tok_s` (in
  `--chunked-prefill-size` passes). So TTFT = queue wait + prefill wait + own prefill, a burst
  of arrivals shows rising TTFT as on a real GPU, and a prefix-cache hit shortens it. A long
  prefill stalls the decode of running streams (one chunk at a time with mixed chunking).
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

from .prefix import Node, PrefixCache, key_tokens

__all__ = ["Job", "Pacer", "Scheduler", "Serving", "ThroughputModel", "lognormal_factor"]


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

RetractSink = Callable[[int, int, float, float], None]
"""Called as (retracted requests, tokens gained, old new_token_ratio, new ratio) on a retraction."""

CLIP_MAX_NEW_TOKENS = 4096
"""0.5.10 `schedule_policy.py` `CLIP_MAX_NEW_TOKENS`: the output estimate never counts more."""
INIT_NEW_TOKEN_RATIO = 0.7
"""0.5.10 `environ.py` `SGLANG_INIT_NEW_TOKEN_RATIO`, times `--schedule-conservativeness`."""
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20
UNCHUNKED_LONG_PREFILL = 8192
"""With `--chunked-prefill-size -1`, a prefill longer than this (SGLang's usual chunk size on a
large GPU) stalls decode as a long one would (`Scheduler._prefill`)."""
LPM_QUEUE_LIMIT = 128
"""0.5.10 `SchedulePolicy._determine_active_policy`: lpm acts as fcfs beyond this many waiting."""


@dataclass(frozen=True)
class Serving:
    """The server arguments that shape scheduling, read from the resolved arguments (SGLang names).

    The defaults are SGLang's, except `chunked_prefill_size` (0: a prompt is one prefill).
    """

    radix_cache: bool = True
    chunked_prefill_size: int = 0
    mixed_chunk: bool = False
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0

    @property
    def policy(self) -> str:
        """0.5.10 `_validate_and_adjust_policy`: a cache-aware policy without the cache is fcfs."""
        if self.schedule_policy in ("lpm", "dfs-weight") and not self.radix_cache:
            return "fcfs"
        return self.schedule_policy


class Job:
    """One request inside the scheduler, with what it was meant to do and what it did."""

    __slots__ = (
        "act_first",
        "act_last",
        "admitted",
        "arrival",
        "cached_tokens",
        "cancelled",
        "due",
        "emitted",
        "extend_tokens",
        "fail_at",
        "finished",
        "held",
        "internal",
        "key",
        "late_max",
        "late_sum",
        "node",
        "noise",
        "on_done",
        "on_token",
        "prompt_tokens",
        "retractions",
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
        key: str | None = None,
    ) -> None:
        self.rid = rid
        self.prompt_tokens = max(1, prompt_tokens)
        self.target_tokens = max(1, target_tokens)
        self.on_token = on_token
        self.on_done = on_done
        self.fail_at = fail_at
        self.internal = internal
        self.key = key
        """The prompt's prefix-cache key (`prefix.py`); None: never shares a prefix."""
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
        self.cached_tokens = 0
        """Prompt tokens the prefix cache held at the (first) admission: `cached_tokens` in usage."""
        self.extend_tokens = 0
        """Tokens the last admission had to prefill (prompt and output so far, less the hit)."""
        self.retractions = 0
        self.held = 0
        """KV tokens this job holds outside the prefix cache while it runs."""
        self.node: Node | None = None

    @property
    def failed(self) -> bool:
        return (
            self.finished and self.fail_at is not None and self.emitted == self.fail_at < self.target_tokens
        )

    @property
    def outstanding(self) -> int:
        """Output tokens still to come, as the admission estimate counts them."""
        return min(self.target_tokens - self.emitted, CLIP_MAX_NEW_TOKENS)


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
    cached_tokens: int = 0
    retracted: int = 0


class Scheduler:
    """The queue, the running batch, the prefix cache and the deadline heap (caller's clock)."""

    def __init__(
        self,
        model: ThroughputModel,
        *,
        max_running: int,
        max_total_tokens: int | None = None,
        seed: int = 0,
        request_cv: float = 0.0,
        on_prefill: Callable[[list[Job], float], None] | None = None,
        serving: Serving | None = None,
        on_retract: RetractSink | None = None,
    ) -> None:
        self.model = model
        self.max_running = max(1, max_running)
        self.max_total_tokens = max_total_tokens
        self.request_cv = request_cv
        self.rng = random.Random(seed)  # noqa: S311 - simulation noise, not secrets
        self.on_prefill = on_prefill
        self.on_retract = on_retract
        self.serving = serving or Serving()
        self.cache = PrefixCache() if self.serving.radix_cache else None
        self.waiting: deque[Job] = deque()
        self.running: dict[str, Job] = {}
        self.used_tokens = 0
        """KV tokens in the pool: the prefix cache's (locked or not) plus what running jobs hold."""
        self.counters = Counters()
        self._heap: list[tuple[float, int, Job]] = []
        self._seq = 0
        self._prefill_free = -math.inf
        self._busy: deque[list[float]] = deque()
        """Prefill forward passes still ahead, [start, end], in time order (decode waits on them)."""
        self._outstanding = 0
        init = min(INIT_NEW_TOKEN_RATIO * self.serving.schedule_conservativeness, 1.0)
        self.min_new_token_ratio = min(init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.new_token_ratio_decay = (init - self.min_new_token_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.new_token_ratio = init

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_queue(self) -> int:
        return len(self.waiting)

    def tokens_in_use(self) -> int:
        """KV tokens not free for new work: SGLang's `#token` leaves out what the cache could evict."""
        if self.cache is None:
            return self.used_tokens
        return self.used_tokens - self.cache.evictable_tokens

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
        if job.admitted is not None and not job.internal:
            self.counters.aborted += 1  # a retracted job waiting again was admitted once
        if job.rid not in self.running:
            with contextlib.suppress(ValueError):
                self.waiting.remove(job)
            return
        self._release(job)
        self._admit(now)

    def flush_cache(self) -> bool:
        """`/flush_cache`: empty the prefix cache, only with nothing running or waiting."""
        if self.running or self.waiting:
            return False
        if self.cache is not None:
            self.used_tokens -= self.cache.total_tokens
            self.cache.reset()
        return True

    def next_due(self) -> float | None:
        heap = self._heap
        while heap and (heap[0][2].cancelled or heap[0][2].finished or heap[0][0] != heap[0][2].due):
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
            if job.cancelled or job.finished or due != job.due:
                continue  # stale: the job left, or was retracted and rescheduled
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
        if job.target_tokens - index <= CLIP_MAX_NEW_TOKENS:
            self._outstanding -= 1  # the estimate counts this token no more
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
        # this runs once per token: the common case stays a few comparisons
        job.held += 1  # the token's KV, held until the job leaves
        self.used_tokens += 1
        running = len(self.running)
        if self.new_token_ratio > self.min_new_token_ratio:
            self.new_token_ratio = max(
                self.new_token_ratio - self.new_token_ratio_decay / running, self.min_new_token_ratio
            )
        cap = self.max_total_tokens
        if cap is not None and cap - self.used_tokens < running and not self._decode_fits(job):
            return True  # retracted: re-queued, its slot is free
        nxt = due + self.model.token_gap(len(self.running)) * job.noise
        if self._busy:
            nxt = self._after_prefills(due, nxt)
        job.due = nxt
        self._seq += 1
        heapq.heappush(self._heap, (nxt, self._seq, job))
        return False

    def _schedule(self, job: Job, due: float) -> None:
        job.due = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, job))

    def _after_prefills(self, start: float, end: float) -> float:
        """When a decode step from `start` (alone due at `end`) really ends, prefills included.

        0.5.10 `Scheduler.get_next_batch_to_run` runs a prefill batch first whenever there is one:
        without mixed chunking, decode waits out every prefill pass in its way; with
        `--enable-mixed-chunk` (`mix_with_running`) the decode step rides in the chunk's
        forward pass and ends with it, so the stall is one chunk, not the whole prompt.
        """
        busy = self._busy
        while busy and busy[0][1] <= start:
            busy.popleft()  # emissions come in time order: a pass over by now is over for good
        mixed = self.serving.mixed_chunk
        for s, e in busy:
            if s >= end:
                break
            if mixed:
                return max(end, e)
            end += e - max(s, start)
        return end

    def _decode_fits(self, job: Job) -> bool:
        """0.5.10 `update_running_batch`: the next step needs a token per running request; if
        the pool (after evicting the cache) cannot give them, retract requests (`retract_decode`).
        False when `job` itself was retracted."""
        cap = self.max_total_tokens
        if cap is None or self._free_after_evicting(len(self.running)) >= len(self.running):
            return True
        order = sorted(self.running.values(), key=lambda j: (j.emitted, -j.prompt_tokens), reverse=True)
        free_before = cap - self.used_tokens
        old_ratio = self.new_token_ratio
        retracted: list[Job] = []
        while not retracted or self._free_after_evicting(len(order)) < len(order):
            if len(order) == 1:
                break  # always keep one
            victim = order.pop()
            self._release(victim)
            victim.due = math.inf
            victim.retractions += 1
            self.waiting.append(victim)
            retracted.append(victim)
        self._evict(len(order) * RETRACT_DECODE_STEPS)
        decoded = sum(j.emitted for j in order)
        wanted = sum(j.target_tokens for j in order)
        self.new_token_ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(order)) / (wanted + 1))
        self.counters.retracted += sum(1 for j in retracted if not j.internal)
        if self.on_retract is not None:
            self.on_retract(
                len(retracted), (cap - self.used_tokens) - free_before, old_ratio, self.new_token_ratio
            )
        return job not in retracted

    def _free_after_evicting(self, wanted: int) -> int:
        assert self.max_total_tokens is not None
        free = self.max_total_tokens - self.used_tokens
        if free < wanted:
            self._evict(wanted - free)
            free = self.max_total_tokens - self.used_tokens
        return free

    def _evict(self, tokens: int) -> None:
        if self.cache is not None and tokens > 0:
            self.used_tokens -= self.cache.evict(tokens)

    def _release(self, job: Job) -> None:
        if self.running.pop(job.rid, None) is None:
            return
        self.used_tokens -= job.held
        self._outstanding -= job.outstanding
        job.held = 0
        if job.node is not None and self.cache is not None:
            self.cache.unlock(job.node)
        job.node = None

    def _room(self) -> int:
        """What the KV pool can still promise (0.5.10 `PrefillAdder.rem_total_tokens`): free plus
        evictable, less the output the running requests are still expected to write."""
        assert self.max_total_tokens is not None
        evictable = self.cache.evictable_tokens if self.cache is not None else 0
        reserved = math.ceil(self._outstanding * self.new_token_ratio)
        return self.max_total_tokens - self.used_tokens + evictable - reserved

    def _order_waiting(self) -> None:
        """0.5.10 `SchedulePolicy.calc_priority`: lpm puts the longest cached prefix first (a
        stable sort, so ties stay first come first served), lof the longest output, random
        shuffles; fcfs, and lpm with more than 128 waiting, keep arrival order."""
        policy = self.serving.policy
        waiting = self.waiting
        if len(waiting) < 2:
            return
        if policy == "lpm" and self.cache is not None and len(waiting) <= LPM_QUEUE_LIMIT:
            cache = self.cache
            ranked = sorted(waiting, key=lambda j: -cache.match(j.key).tokens if j.key else 0)
        elif policy == "lof":
            ranked = sorted(waiting, key=lambda j: -j.target_tokens)
        elif policy == "random":
            ranked = list(waiting)
            self.rng.shuffle(ranked)
        else:
            return
        self.waiting = deque(ranked)

    def _cached(self, job: Job) -> int:
        """Prompt tokens the cache holds for this job; at least one token is always computed
        (`Req.init_next_round_input`: the match is capped at input length - 1). The key's
        marker unit (`prefix.py`) is not a prompt token, so it never counts as a hit."""
        if self.cache is None or job.key is None:
            return 0
        return max(0, min(self.cache.match(job.key).tokens - 1, job.prompt_tokens - 1))  # less the marker

    def _admit(self, at: float) -> None:
        """Move waiting jobs into the batch in policy order while they fit; `at` is when a slot
        opened. Jobs admitted together are one prefill batch: each matches the cache as it was
        before the batch, as in 0.5.10 `get_new_batch_prefill` (a batch shares no prefix)."""
        if not self.waiting:
            return
        self._order_waiting()
        admitted: list[Job] = []
        pending = 0
        cap = self.max_total_tokens
        while self.waiting and len(self.running) < self.max_running:
            job = self.waiting[0]
            cached = self._cached(job)
            extend = job.prompt_tokens + job.emitted - cached
            if cap is not None and self.running:
                need = extend + math.ceil(job.outstanding * self.new_token_ratio)
                if need + pending > self._room():
                    break
            self.waiting.popleft()
            pending += extend
            job.extend_tokens = extend
            if job.admitted is None:
                job.admitted = max(at, job.arrival)
                job.cached_tokens = cached
                if not job.internal:
                    self.counters.prompt_tokens += job.prompt_tokens
                    self.counters.cached_tokens += cached
            self.running[job.rid] = job
            self._outstanding += job.outstanding
            admitted.append(job)
        for job in admitted:
            self._hold(job, at)
            start = max(at, job.arrival)
            self._schedule(job, self._prefill(start, job.extend_tokens, job.noise))
        if admitted and self.on_prefill is not None:
            self.on_prefill(admitted, at)

    def _hold(self, job: Job, at: float) -> None:
        """Give the job its prompt's KV: in the cache (shared, locked while it runs) if it has a
        key, else its own; plus the output it had before a retraction."""
        private = job.prompt_tokens + job.emitted
        if self.cache is not None and job.key is not None:
            node, added = self.cache.insert(job.key, at)
            self.cache.lock(node)
            job.node = node
            self.used_tokens += added
            private -= min(job.prompt_tokens, key_tokens(job.key))
        job.held = private
        self.used_tokens += private
        if self.max_total_tokens is not None:
            self._evict(self.used_tokens - self.max_total_tokens)

    def _prefill(self, start: float, tokens: int, noise: float) -> float:
        """Queue `tokens` of prefill on the one prefill engine; when its last pass ends.

        With `--chunked-prefill-size` the prompt goes in chunks (0.5.10 `PrefillAdder`
        `add_one_req` / `add_chunked_req`), one forward pass each: every pass after the first
        costs one more fixed step (a batch-1 decode step: weights are read once per pass), so
        small chunks lengthen TTFT. A *long* prefill (more than one chunk; with chunking off,
        more than `UNCHUNKED_LONG_PREFILL` tokens) also stalls decode (`_after_prefills`): the
        scenario's decode curve was measured with a benchmark's own prompts prefilled in between,
        so a prefill of one ordinary pass is already in it and is not counted twice.
        """
        t = max(start, self._prefill_free)
        size = self.serving.chunked_prefill_size
        long = tokens > (size if size > 0 else UNCHUNKED_LONG_PREFILL)
        if size <= 0:
            size = tokens
        floor = self.model.token_gap(1)
        mixed = self.serving.mixed_chunk
        busy = self._busy
        left, first = tokens, True
        while left > 0:
            chunk = min(size, left)
            end = t + self.model.prefill_time(chunk) * noise + (0.0 if first else floor)
            if long and not mixed and busy and busy[-1][1] == t:
                busy[-1][1] = end  # back to back: decode waits them out as one
            elif long:
                busy.append([t, end])
            t, left, first = end, left - chunk, False
        self._prefill_free = t
        return t


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
