"""The twin's scheduler in virtual time: queueing, TTFT, the throughput curve, reproducibility.

The scheduler takes its clock as an argument, so these tests replay arrivals and deadlines in
order without sleeping; the last test checks the asyncio pacer against the real clock.
"""

from __future__ import annotations

import asyncio
import itertools
import re

import pytest

from flagbot_lab.twin.engine import logfmt
from flagbot_lab.twin.engine.batchlog import BatchLogger
from flagbot_lab.twin.engine.prefix import ids_key, text_key
from flagbot_lab.twin.engine.sched import Job, Pacer, Scheduler, Serving, ThroughputModel
from flagbot_lab.twin.engine.tokens import count_text_tokens

CURVE = ((8, 400.0), (64, 1600.0))


def model(**kw: float) -> ThroughputModel:
    args: dict[str, float] = {"single_stream_tok_s": 100.0, "prefill_tok_s": 10_000.0}
    args.update(kw)
    return ThroughputModel(points=CURVE, **args)


class Recorder:
    """Token times per job id, as the scheduler stamped them."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.done: list[str] = []

    def job(self, rid: str, prompt: int, tokens: int, **kw: object) -> Job:
        self.times[rid] = []
        return Job(
            rid,
            prompt,
            tokens,
            on_token=lambda j, i, due: self.times[j.rid].append(due),
            on_done=lambda j: self.done.append(j.rid),
            **kw,  # type: ignore[arg-type]
        )


def simulate(sched: Scheduler, arrivals: list[tuple[float, Job]], until: float | None = None) -> None:
    """Replay arrivals and token deadlines in time order (virtual clock: actual == scheduled)."""
    pending = sorted(arrivals, key=lambda a: a[0])
    i = 0
    while True:
        due = sched.next_due()
        arrival = pending[i][0] if i < len(pending) else None
        if due is None and arrival is None:
            return
        if arrival is not None and (due is None or arrival <= due):
            sched.submit(pending[i][1], arrival)
            i += 1
            continue
        assert due is not None
        if until is not None and due > until:
            return
        sched.run_due(due)


def test_requests_beyond_max_running_wait_in_fifo_order() -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=2)
    jobs = [rec.job(f"r{i}", 10, 20) for i in range(5)]
    for job in jobs:
        sched.submit(job, 0.0)
    assert sched.num_running == 2
    assert sched.num_queue == 3
    simulate(sched, [])
    assert rec.done[:2] == ["r0", "r1"]
    first_done = max(rec.times["r0"][-1], rec.times["r1"][-1])
    # r2 starts only when a slot frees: its queue wait is the first pair's whole run
    assert jobs[2].admitted == pytest.approx(min(rec.times["r0"][-1], rec.times["r1"][-1]))
    assert rec.times["r2"][0] > first_done - 1e-9 or jobs[2].admitted is not None
    assert jobs[2].admitted is not None and jobs[4].admitted is not None
    assert jobs[4].admitted >= jobs[2].admitted  # FIFO
    assert all(len(rec.times[j.rid]) == 20 for j in jobs)
    assert sched.counters.finished == 5


def test_ttft_is_queue_wait_plus_serialised_prefill() -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=8)
    a, b = rec.job("a", 1000, 2), rec.job("b", 500, 2)
    simulate(sched, [(0.0, a), (0.0, b)])
    # prefill 10k tok/s: a needs 0.1 s; b waits for a's prefill, then needs 0.05 s
    assert rec.times["a"][0] == pytest.approx(0.1)
    assert rec.times["b"][0] == pytest.approx(0.15)


def test_ttft_includes_queueing_when_the_batch_is_full() -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=1)
    a, b = rec.job("a", 100, 11), rec.job("b", 100, 1)
    simulate(sched, [(0.0, a), (0.0, b)])
    a_end = rec.times["a"][-1]
    assert rec.times["a"][0] == pytest.approx(0.01)
    assert a_end == pytest.approx(0.01 + 10 / 100.0)  # 10 gaps at 100 tok/s single stream
    assert b.admitted == pytest.approx(a_end)
    assert rec.times["b"][0] == pytest.approx(a_end + 0.01)


def test_time_scale_compresses_every_serving_duration() -> None:
    rec = Recorder()
    sched = Scheduler(model(time_scale=0.1), max_running=1)
    job = rec.job("a", 1000, 11)
    simulate(sched, [(0.0, job)])
    assert rec.times["a"][0] == pytest.approx(0.01)
    assert rec.times["a"][-1] - rec.times["a"][0] == pytest.approx(0.01)


def aggregate_rate(batch: int, factor: float = 1.0) -> float:
    """Tokens per second delivered with `batch` long streams decoding together."""
    rec = Recorder()
    sched = Scheduler(model(factor=factor), max_running=1000)
    jobs = [rec.job(f"r{i}", 1, 10_000) for i in range(batch)]
    simulate(sched, [(0.0, j) for j in jobs], until=5.0)
    total = 0.0
    for ts in rec.times.values():
        steady = [t for t in ts if t >= 1.0]  # past the (serialised) prefills
        total += (len(steady) - 1) / (steady[-1] - steady[0])
    return total


@pytest.mark.parametrize(
    ("batch", "expected"),
    [(1, 100.0), (4, 100 + 300 * 3 / 7), (8, 400.0), (36, 1000.0), (64, 1600.0), (128, 1600.0)],
)
def test_aggregate_throughput_follows_the_interpolated_curve(batch: int, expected: float) -> None:
    assert aggregate_rate(batch) == pytest.approx(expected, rel=0.01)


def test_throughput_factor_scales_the_curve() -> None:
    assert aggregate_rate(8, factor=0.5) == pytest.approx(200.0, rel=0.01)


def schedule(seed: int, cv: float = 0.2) -> list[float]:
    rec = Recorder()
    sched = Scheduler(model(), max_running=4, seed=seed, request_cv=cv)
    simulate(sched, [(i * 0.013, rec.job(f"r{i}", 50 + i, 30)) for i in range(12)])
    return [t for rid in sorted(rec.times) for t in rec.times[rid]]


def test_same_seed_same_schedule_other_seed_other_schedule() -> None:
    assert schedule(7) == schedule(7)
    assert schedule(7) != schedule(8)
    noiseless = schedule(7, cv=0.0)
    assert noiseless == schedule(8, cv=0.0)


def test_kv_pool_limits_admission_below_max_running() -> None:
    sched = Scheduler(model(), max_running=10, max_total_tokens=1000)
    for i in range(5):
        sched.submit(Job(f"r{i}", 200, 100), 0.0)
    assert sched.num_running == 3  # 3 x 300 fits in 1000, a fourth does not
    assert sched.num_queue == 2


def test_cancel_frees_the_slot_for_the_next_request() -> None:
    sched = Scheduler(model(), max_running=1)
    a, b = Job("a", 10, 100), Job("b", 10, 5)
    sched.submit(a, 0.0)
    sched.submit(b, 0.0)
    assert sched.num_queue == 1
    sched.cancel(a, 0.5)
    assert sched.num_running == 1 and "b" in sched.running
    assert b.admitted == 0.5
    assert sched.counters.aborted == 1


def test_failing_job_stops_at_its_failure_point() -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=4)
    job = rec.job("a", 10, 50, fail_at=7)
    simulate(sched, [(0.0, job)])
    assert len(rec.times["a"]) == 7
    assert job.failed and rec.done == ["a"]
    assert sched.counters.failed == 1 and sched.num_running == 0


async def test_pacer_emits_on_time_from_one_timer() -> None:
    loop = asyncio.get_running_loop()
    sched = Scheduler(model(single_stream_tok_s=200.0), max_running=8)
    pacer = Pacer(sched, loop)
    finished = asyncio.Event()
    jobs = [Job(f"r{i}", 10, 40, on_done=lambda j: finished.set() if sched.num_running == 0 else None, trace=True)
            for i in range(4)]  # fmt: skip
    for job in jobs:
        pacer.submit(job)
    await asyncio.wait_for(finished.wait(), 10)
    pacer.close()
    lateness = [act - due for job in jobs if job.trace for due, act in zip(*job.trace, strict=True)]
    assert len(lateness) == 160
    # one timer paces every token: none is emitted early (lateness is the machine's load, not asserted)
    assert min(lateness) > -0.005


# -- the twin reacts: prefix cache, chunked prefill, schedule policy, retraction ------------------

SYSTEM = "You are a careful assistant. Answer in one short paragraph, citing sources. " * 30


def shared(rec: Recorder, rid: str, system: str, question: str, tokens: int = 5) -> Job:
    prompt = system + question
    return rec.job(rid, count_text_tokens(prompt), tokens, key=text_key(prompt))


def ttft(rec: Recorder, job: Job) -> float:
    return rec.times[job.rid][0] - job.arrival


@pytest.mark.parametrize("radix", [True, False])
def test_a_cached_prefix_shortens_prefill_unless_the_cache_is_off(radix: bool) -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=8, serving=Serving(radix_cache=radix))
    a, b = shared(rec, "a", SYSTEM, "First question?"), shared(rec, "b", SYSTEM, "Second question?")
    simulate(sched, [(0.0, a), (1.0, b)])
    assert a.cached_tokens == 0
    if radix:
        assert b.cached_tokens == len(SYSTEM) // 4
        assert ttft(rec, b) < ttft(rec, a) / 10
        assert sched.counters.cached_tokens == b.cached_tokens
    else:
        assert b.cached_tokens == 0
        assert ttft(rec, b) == pytest.approx(ttft(rec, a), rel=0.01)


def test_unrelated_prompts_get_no_hit_and_unchanged_ttft() -> None:
    rec = Recorder()
    on, off = (
        Scheduler(model(), max_running=8),
        Scheduler(model(), max_running=8, serving=Serving(radix_cache=False)),
    )
    for sched in (on, off):
        jobs = [
            rec.job(f"{id(sched)}-{i}", 400, 5, key=ids_key(range(i * 1000 + 1, i * 1000 + 401)))
            for i in range(4)
        ]
        simulate(sched, [(i * 0.3, j) for i, j in enumerate(jobs)])
        assert all(j.cached_tokens == 0 for j in jobs)
    firsts = [ts[0] for ts in rec.times.values()]
    assert firsts[:4] == pytest.approx([f - 0 for f in firsts[4:]])


def test_kv_pressure_evicts_the_least_recently_used_prefix() -> None:
    other = "Summarise the following report in three bullet points for an executive. " * 30
    third = "Translate the text below into French, keeping the formatting intact. " * 30
    outcome = {}
    for pool in (100_000, 1400):  # the small pool holds two of the three prefixes
        rec = Recorder()
        sched = Scheduler(model(), max_running=1, max_total_tokens=pool)
        arrivals = [
            (0.0, shared(rec, "a", SYSTEM, "One?")),
            (1.0, shared(rec, "b", other, "Two?")),
            (2.0, shared(rec, "c", third, "Three?")),
            (3.0, shared(rec, "d", SYSTEM, "Four?")),
        ]
        simulate(sched, arrivals)
        outcome[pool] = arrivals[3][1].cached_tokens
    assert outcome[100_000] == len(SYSTEM) // 4
    assert outcome[1400] == 0  # SYSTEM was the least recently used, so it went first


def decode_gaps_around_a_long_prefill(serving: Serving) -> tuple[float, float]:
    """(largest gap of a running stream while a 8000-token prompt is prefilled, its TTFT)."""
    rec = Recorder()
    sched = Scheduler(model(), max_running=8, serving=serving)
    runner, long = rec.job("run", 10, 200), rec.job("long", 8000, 2)
    simulate(sched, [(0.0, runner), (0.5, long)])
    times = rec.times["run"]
    return max(b - a for a, b in itertools.pairwise(times)), ttft(rec, long)


def test_large_prefill_chunks_stall_decode_longer_with_mixed_chunking() -> None:
    big_gap, big_ttft = decode_gaps_around_a_long_prefill(
        Serving(chunked_prefill_size=4096, mixed_chunk=True)
    )
    small_gap, small_ttft = decode_gaps_around_a_long_prefill(
        Serving(chunked_prefill_size=512, mixed_chunk=True)
    )
    assert big_gap > 4 * small_gap  # one 4096-token pass against one 512-token pass
    assert small_gap >= 512 / 10_000  # a decode step rides in a chunk's pass and ends with it
    assert small_ttft > big_ttft  # sixteen passes cost more fixed steps than two


def test_without_mixed_chunking_decode_waits_for_the_whole_prefill() -> None:
    gap, _ = decode_gaps_around_a_long_prefill(Serving(chunked_prefill_size=512))
    assert gap >= 8000 / 10_000  # every pass of the prompt runs before the next decode step
    mixed_gap, _ = decode_gaps_around_a_long_prefill(Serving(chunked_prefill_size=512, mixed_chunk=True))
    assert mixed_gap < gap / 4


def shared_prefix_hits(policy: str) -> int:
    """Four groups of four requests, all queued at once, interleaved; a pool for two prefixes."""
    systems = [
        f"{name} team: follow the house style guide closely. " * 25
        for name in ("Alpha", "Bravo", "Charlie", "Delta")
    ]
    rec = Recorder()
    sched = Scheduler(model(), max_running=2, max_total_tokens=900, serving=Serving(schedule_policy=policy))
    jobs = [shared(rec, f"r{i}", systems[i % 4], f"Question {i}?", tokens=10) for i in range(16)]
    simulate(sched, [(0.0, j) for j in jobs])
    assert len(rec.done) == 16
    return sum(1 for j in jobs if j.cached_tokens > 100)


def test_lpm_gets_more_cache_hits_than_fcfs_on_shared_prefix_traffic() -> None:
    fcfs, lpm = shared_prefix_hits("fcfs"), shared_prefix_hits("lpm")
    assert lpm == 12  # every group after its first request: cached groups go first
    assert fcfs == 0  # round robin over four groups evicts each prefix before its next turn


def test_lpm_without_the_radix_cache_is_fcfs() -> None:
    assert Serving(schedule_policy="lpm", radix_cache=False).policy == "fcfs"


def test_running_out_of_kv_retracts_with_sglangs_line_and_requeues() -> None:
    rec = Recorder()
    lines: list[str] = []
    sched = Scheduler(
        model(),
        max_running=8,
        max_total_tokens=2000,
        on_retract=lambda n, gained, old, new: lines.append(
            logfmt.retract(0.0, " TP0", retracted=n, gained=gained, old_ratio=old, new_ratio=new)
        ),
    )
    jobs = [rec.job(f"r{i}", 100, 400) for i in range(6)]
    simulate(sched, [(0.0, j) for j in jobs])
    assert lines, "admitted by a decaying output estimate, six requests outgrow a pool of 2000"
    assert re.fullmatch(
        r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d TP0\] KV cache pool is full\. Retract requests\. "
        r"#retracted_reqs: [1-9]\d*, #new_tokens_gained: \d+, #new_token_ratio: \d\.\d{4} -> \d\.\d{4}",
        lines[0],
    )
    retracted = [j for j in jobs if j.retractions]
    assert retracted and sched.counters.retracted == sum(j.retractions for j in jobs)
    assert all(len(rec.times[j.rid]) == 400 for j in jobs)  # re-queued, re-prefilled, finished
    victim = retracted[0]
    gaps = [b - a for a, b in itertools.pairwise(rec.times[victim.rid])]
    assert max(gaps) > 10 * min(gaps)  # the retraction shows up as latency


def test_schedule_conservativeness_scales_the_new_token_ratio() -> None:
    assert Scheduler(model(), max_running=1).new_token_ratio == pytest.approx(0.7)
    careful = Scheduler(model(), max_running=1, serving=Serving(schedule_conservativeness=0.5))
    assert careful.new_token_ratio == pytest.approx(0.35)
    assert careful.min_new_token_ratio == pytest.approx(0.35 * 0.14)


def test_flush_cache_empties_the_cache_only_when_idle() -> None:
    rec = Recorder()
    sched = Scheduler(model(), max_running=4)
    busy = shared(rec, "a", SYSTEM, "One?", tokens=50)
    sched.submit(busy, 0.0)
    assert not sched.flush_cache()  # SGLang refuses with requests running
    simulate(sched, [])
    assert sched.used_tokens > 0 and sched.tokens_in_use() == 0  # all of it evictable cache
    assert sched.flush_cache()
    assert sched.used_tokens == 0
    later = shared(rec, "b", SYSTEM, "Two?")
    simulate(sched, [(1.0, later)])
    assert later.cached_tokens == 0


def test_the_prefill_batch_line_reports_new_and_cached_tokens() -> None:
    rec = Recorder()
    lines: list[str] = []
    sched = Scheduler(model(), max_running=4)
    log = BatchLogger(sched, lines.append, ranks="", max_total_tokens=100_000)
    sched.on_prefill = log.on_prefill
    first, second = shared(rec, "a", SYSTEM, "One?"), shared(rec, "b", SYSTEM, "Two?")
    simulate(sched, [(0.0, first), (1.0, second)])
    cached = second.cached_tokens
    assert f"#new-token: {second.prompt_tokens - cached}, #cached-token: {cached}," in lines[1]
    assert "#cached-token: 0," in lines[0]
