"""The scheduler's steady-state log lines (`Prefill batch, ...` / `Decode batch, ...`, §2.5).

Why they matter: flagbot greps the journal for them (running and queued requests, throughput),
so they must appear with SGLang's cadence. A `Prefill batch` line is printed for every group of
requests admitted in one scheduler tick; a `Decode batch` line every `--decode-log-interval`
decode steps while anything runs, one step being the current per-token gap of the batch.
`gen throughput` is what was really delivered since the previous decode line (wall clock), so
the log agrees with what a benchmark client measures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from . import logfmt
from .sched import Job, Scheduler

__all__ = ["BatchLogger"]

MIN_DECODE_LOG_PERIOD = 0.05


class BatchLogger:
    def __init__(
        self,
        sched: Scheduler,
        emit: Callable[[str], None],
        *,
        ranks: str,
        max_total_tokens: int,
        decode_log_interval: int = 40,
        hybrid: bool = False,
        cuda_graph: bool = True,
        spec_accept_len: float | None = None,
    ) -> None:
        self.sched = sched
        self.emit = emit
        self.ranks = ranks
        self.max_total_tokens = max(1, max_total_tokens)
        self.interval = max(1, decode_log_interval)
        self.hybrid = hybrid
        self.cuda_graph = cuda_graph
        self.spec_accept_len = spec_accept_len
        self.gen_throughput = 0.0
        self._wake = asyncio.Event()
        self._last_prefill = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def _mamba(self) -> float | None:
        return self.sched.num_running / self.sched.max_running if self.hybrid else None

    def on_prefill(self, jobs: list[Job], at: float) -> None:
        """Scheduler hook: one line per admission group (health checks log too, as in SGLang)."""
        now = time.monotonic()
        new_tokens = sum(j.extend_tokens for j in jobs)
        cached = sum(j.prompt_tokens + j.emitted - j.extend_tokens for j in jobs)
        elapsed = max(1e-6, now - self._last_prefill)
        self._last_prefill = now
        running_before = self.sched.num_running - len(jobs)
        self.emit(
            logfmt.prefill_batch(
                time.time(),
                self.ranks,
                new_seq=len(jobs),
                new_token=new_tokens,
                cached_token=cached,
                token_usage=(self.sched.tokens_in_use() - new_tokens) / self.max_total_tokens,
                running=running_before,
                queued=self.sched.num_queue,
                cuda_graph=False,
                input_throughput=new_tokens / elapsed,
                mamba_usage=self._mamba(),
            )
        )
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._decode_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _decode_loop(self) -> None:
        sched = self.sched
        last_t = time.monotonic()
        last_n = sched.counters.emitted_all
        while True:
            if sched.num_running == 0:
                self._wake.clear()
                await self._wake.wait()
                last_t = time.monotonic()
                last_n = sched.counters.emitted_all
            period = self.interval * sched.model.token_gap(max(1, sched.num_running))
            await asyncio.sleep(max(MIN_DECODE_LOG_PERIOD, period))
            if sched.num_running == 0:
                continue
            now = time.monotonic()
            count = sched.counters.emitted_all
            self.gen_throughput = (count - last_n) / max(1e-6, now - last_t)
            last_t, last_n = now, count
            spec = self.spec_accept_len
            used = sched.tokens_in_use()
            self.emit(
                logfmt.decode_batch(
                    time.time(),
                    self.ranks,
                    running=sched.num_running,
                    tokens=used,
                    token_usage=used / self.max_total_tokens,
                    cuda_graph=self.cuda_graph,
                    gen_throughput=self.gen_throughput,
                    queued=sched.num_queue,
                    accept_len=spec,
                    accept_rate=None if spec is None else (spec - 1) / max(1.0, spec),
                    mamba_usage=self._mamba(),
                )
            )
