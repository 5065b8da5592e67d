"""The twin's process: `python -m sglang.launch_server <flags>` ends up in `main` here.

Sequence, as SGLang 0.5.10 runs it (reference §2.4, §4.1, §7): resolve the arguments (argparse
errors exit 2 before anything else), print the bare post-init warnings, play the startup lines
paced by `timings.startup_scale` (with the multi-node rendezvous at its gate), exit with the
signal SGLang's main process dies of if the start fails; otherwise only now bind the port (connection refused until
here), print uvicorn's lines, answer 503 during warmup, run the real warmup requests against
itself, print the ready line and answer 200. A node of rank >= 1 serves only SGLang's dummy
health server. SIGTERM/SIGINT while serving: SGLang's drain lines, then death by SIGKILL (the
sigterm watchdog's `kill_process_tree(os.getpid(), include_parent=True)` kills the main process
itself); while still loading, and on a node of rank >= 1: death by that signal at once (no
handler is installed yet, so the real main process dies of it).

How the twin ends is how systemd will report it (`Ending`): a failed start, a crash after ready
and a peer lost are SGLang's sigquit path, `code=killed, status=9/KILL`; an error of the twin
itself exits 1, uvicorn's bind failure 3, argparse 2 (`code=exited`). A real OOM kill needs
nothing here: SIGKILL cannot be caught, so the twin dies of it as SGLang does.

Around it: the ground-truth file (`truth.py`) gets a start record, request records and an exit
record; the state file (`statefile.py`) tells the node's `nvidia-smi` how much GPU memory the
twin holds in each phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import logfmt
from .api import Api, ServeInfo
from .batchlog import BatchLogger
from .hangs import hang_step
from .helpers import dummy_health_handler, self_request
from .httpd import HttpServer, Request
from .releases import release
from .rendezvous import Rendezvous, RendezvousError, fingerprint, split_addr
from .runinfo import (
    CRASH_LINES,
    RENDEZVOUS_FRAMES,
    eos_token_id,
    gpu_memory_used_mib,
    load_start,
    run_noise,
    spec_accept_length,
    start_record,
    throughput_model,
)
from .sched import Pacer, Scheduler, Serving
from .startup import Resolved
from .statefile import StateFile
from .truth import TruthWriter, now_unix

__all__ = ["Runtime", "main"]

DRAIN_POLL_S = 5.0
WARMUP_BODY = (
    b'{"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}'
)


@dataclass(frozen=True)
class Ending:
    """How the process ends: an exit status (`code=exited`) or, with `signal`, death by that
    signal (`code=killed`), which is what `Restart=on-abnormal` tells apart."""

    exit_code: int = 0
    signal: signal.Signals | None = None

    def to_json(self) -> dict[str, Any]:
        return {"exit_code": self.exit_code, "killed_by": self.signal.name if self.signal else None}


KILLS_ITSELF = Ending(signal=signal.SIGKILL)
"""SGLang's sigquit handlers and its sigterm watchdog end with `kill_process_tree(os.getpid())`,
which SIGKILLs the main process itself (`utils/common.py`)."""


def die_of(ending: Ending) -> int:
    """End this process as `ending` says: re-raise a signal with its default action (so the
    parent sees a death by signal, not an exit status), else return the exit status."""
    if ending.signal is None:
        return ending.exit_code
    if ending.signal != signal.SIGKILL:
        signal.signal(ending.signal, signal.SIG_DFL)
    os.kill(os.getpid(), ending.signal)
    return 128 + int(ending.signal)  # not reached: the signal's default action ends the process


def _write(stream: Any, text: str) -> None:
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def log(text: str) -> None:
    """SGLang's and uvicorn's own lines go to stderr."""
    _write(sys.stderr, text)


class Runtime:
    def __init__(self, argv: list[str], resolved: Resolved, start_seed: int) -> None:
        self.argv = argv
        self.r = resolved
        self.args = resolved.server_args
        self.scenario = resolved.scenario
        self.seed = start_seed
        self.scale = self.scenario.timings.startup_scale
        self.node_rank = int(self.args.get("node_rank") or 0)
        self.nnodes = int(self.args.get("nnodes") or 1)
        self.noise = run_noise(self.scenario, start_seed)
        self.truth = TruthWriter()
        self.state = StateFile(node_rank=self.node_rank, port=self.args.get("port"))
        self.phase = "loading"
        self.rdzv: Rendezvous | None = None
        self.http: HttpServer | None = None
        self.api: Api | None = None
        self.batch: BatchLogger | None = None
        self.pacer: Pacer | None = None
        self.draining = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.ending: asyncio.Future[Ending] | None = None

    # -- plumbing ---------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        assert exc is not None
        for text in traceback.format_exception(exc):
            _write(sys.stderr, text.rstrip("\n"))
        self._exit(1)

    def _exit(self, code: int) -> None:
        self._end(Ending(exit_code=code))

    def _end(self, ending: Ending) -> None:
        if self.ending is not None and not self.ending.done():
            self.ending.set_result(ending)

    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        used = gpu_memory_used_mib(self.r, phase)
        self.state.update(phase, used)

    def _fatal(self, exception_line: str, extra: list[str], frames: tuple[str, ...]) -> None:
        """A scheduler's traceback on this node's first rank, then the main process's sigquit."""
        now = time.time()
        ranks = logfmt.rank_prefix(
            self.r.tp_ranks[0] if self.r.tp_ranks else 0, tp_size=int(self.args.get("tp_size") or 1)
        )
        for text in logfmt.scheduler_exception(now, ranks, exception_line, frames):
            log(text)
        for text in extra:
            log(text)
        log(logfmt.sigquit(time.time()))

    # -- the process ------------------------------------------------------------------------

    async def run(self) -> Ending:
        loop = asyncio.get_running_loop()
        self.ending = loop.create_future()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        self.truth.write(start_record(self.r, self.argv, self.seed, self.noise))
        self.truth.flush()
        self.truth.start(loop)
        self._set_phase("loading")
        self._spawn(self._main())
        ending = await self.ending
        await self._shutdown(ending)
        return ending

    async def _main(self) -> None:
        failed = await self._play_steps()
        if failed is not None:
            self._end(failed)
            return
        if self.node_rank == 0:
            await self._serve_api()
        else:
            await self._serve_dummy()

    async def _play_steps(self) -> Ending | None:
        last_phase = ""
        hanging = self.r.hang_node in (None, self.node_rank)
        stop = hang_step(self.r.steps, self.r.hang_in, hanging=hanging) if self.r.failure is None else None
        for index, step in enumerate(self.r.steps):
            if index == stop:  # silent from here on, port closed; a signal still ends it
                await asyncio.Event().wait()
            if step.gate == "rendezvous" and self.nnodes > 1:
                self._set_phase("rendezvous")
                try:
                    await self._rendezvous()
                except RendezvousError as exc:
                    self._fatal(exc.exception_line, exc.extra, RENDEZVOUS_FRAMES)
                    return KILLS_ITSELF
            await asyncio.sleep(step.delay_s * self.scale)
            text = step.render(time.time())
            _write(sys.stdout if step.stream == "stdout" else sys.stderr, text)
            if step.phase and step.phase != last_phase and step.phase != "failure":
                last_phase = step.phase
                self._set_phase(step.phase)
        if self.r.failure is None:
            return None
        if self.r.killed_by is not None:
            return Ending(signal=signal.Signals(self.r.killed_by))
        return Ending(exit_code=self.r.exit_code or 1)

    async def _rendezvous(self) -> None:
        addr = self.args.get("dist_init_addr")
        timeout = (
            float(self.args.get("dist_timeout") or self.scenario.timings.rendezvous_timeout_s) * self.scale
        )
        host, port = split_addr(addr) if addr else ("127.0.0.1", 0)
        world = int(self.args.get("tp_size") or 1) * int(self.args.get("pp_size") or 1)
        self.rdzv = Rendezvous(
            nnodes=self.nnodes,
            node_rank=self.node_rank,
            host=host,
            port=port,
            fingerprint=fingerprint(self.argv),
            timeout_s=timeout,
            world_size=world,
            nccl_version=self.scenario.nccl_version,
        )
        if not addr:
            await asyncio.sleep(timeout)
            raise RendezvousError(
                f"torch.distributed.DistStoreError: Timed out after {round(timeout)} seconds."
            )
        await self.rdzv.run()
        self._spawn(self._watch_peers(self.rdzv))

    async def _watch_peers(self, rdzv: Rendezvous) -> None:
        err = await rdzv.watch()
        if not self.draining:
            self._fatal(err.exception_line, err.extra, RENDEZVOUS_FRAMES)
            self._end(KILLS_ITSELF)

    # -- node 0 -----------------------------------------------------------------------------

    def _serve_info(self) -> ServeInfo:
        args, eff = self.args, self.r.effective
        return ServeInfo(
            server_info=self.r.server_info,
            model_info=self.r.model_info(),
            served_model_name=str(args.get("served_model_name") or args["model_path"]),
            context_len=int(eff.get("context_len") or self.scenario.model.context_length),
            max_total_num_tokens=int(eff.get("max_total_num_tokens") or 0),
            enable_metrics=bool(args.get("enable_metrics")),
            ranks=self._first_ranks(),
            eos_id=eos_token_id(self.scenario),
            failure_fraction=self.scenario.faults.request_failure_fraction,
            spec_accept_length=spec_accept_length(args),
            cache_report=bool(args.get("enable_cache_report")),
        )

    def _first_ranks(self) -> str:
        args = self.args
        dp = int(args.get("dp_size") or 1)
        return logfmt.rank_prefix(
            0,
            tp_size=int(args.get("tp_size") or 1),
            dp_rank=0 if dp > 1 else None,
            pp_size=int(args.get("pp_size") or 1),
            ep_size=int(args.get("ep_size") or 1),
        )

    async def _serve_api(self) -> None:
        loop = asyncio.get_running_loop()
        info = self._serve_info()
        args, eff = self.args, self.r.effective
        dp = int(args.get("dp_size") or 1) if args.get("enable_dp_attention") else 1
        sched = Scheduler(
            throughput_model(self.r, self.noise),
            max_running=max(1, int(eff.get("max_running_requests") or 1)) * dp,
            max_total_tokens=(info.max_total_num_tokens * dp) or None,
            seed=self.seed,
            request_cv=self.scenario.noise.request_cv,
            serving=serving_of(args),
        )
        ranks = info.ranks
        # each retracted request frees its state slot (0.5.23 prints that for a hybrid model)
        hybrid = self.scenario.model.hybrid is not None
        mamba_line = hybrid and release(self.scenario.sglang_version).retract_mamba_gained
        sched.on_retract = lambda n, gained, old, new: log(
            logfmt.retract(
                time.time(), ranks, retracted=n, gained=gained, old_ratio=old, new_ratio=new,
                mamba_gained=n if mamba_line else None,
            )
        )  # fmt: skip
        self.pacer = Pacer(sched, loop)
        self.api = api = Api(
            info, self.pacer, self.truth, log, seed=self.seed, wall_offset=time.time() - loop.time()
        )
        self.batch = batch = BatchLogger(
            sched,
            log,
            ranks=info.ranks,
            max_total_tokens=info.max_total_num_tokens,
            decode_log_interval=int(args.get("decode_log_interval") or 40),
            hybrid=self.scenario.model.hybrid is not None,
            cuda_graph=not args.get("disable_cuda_graph"),
            spec_accept_len=info.spec_accept_length,
        )
        sched.on_prefill = batch.on_prefill
        api.gen_throughput = lambda: batch.gen_throughput
        await asyncio.sleep(self.scenario.timings.server_start_s * self.scale)
        host, port = str(args.get("host") or "127.0.0.1"), int(args.get("port") or 30000)
        self.http = HttpServer(api.handle, access_log=self._access, on_error=self._handler_error)
        lines = logfmt.uvicorn_startup(time.time(), pid=os.getpid(), host=host, port=port)
        for text in lines[:3]:
            log(text)
        try:
            await self.http.start(host, port)
        except OSError as exc:
            log(logfmt.uvicorn(time.time(), str(exc), level="ERROR"))
            self._exit(3)
            return
        log(lines[3])
        self._set_phase("warmup")
        batch.start()
        if not self.r.hang_during_warmup:
            self._spawn(self._warmup(host, port))

    async def _warmup(self, host: str, port: int) -> None:
        """SGLang's `_execute_server_warmup`: GET /model_info, then a real 8-token /generate."""
        assert self.api is not None
        await asyncio.sleep(self.scenario.timings.warmup_s * self.scale)
        if not self.args.get("skip_server_warmup"):
            wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}  # noqa: S104 - mapped, not bound
            target = wildcard.get(host, host)
            await self_request(target, port, "GET", "/model_info", b"")
            await self_request(target, port, "POST", "/generate", WARMUP_BODY)
        self.api.status = "up"
        # Everything built so far (flag catalog, server args, scenario) lives as long as the
        # process: keep it out of the cyclic GC's full passes, which would stall token pacing.
        gc.collect()
        gc.freeze()
        log(logfmt.ready(time.time()))
        self._set_phase("ready")
        crash_after = self.scenario.faults.crash_after_s
        if crash_after is not None:
            self._spawn(self._crash_later(crash_after))  # wall-clock seconds after ready (docs/twin.md)

    async def _crash_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        self._fatal(CRASH_LINES[0], list(CRASH_LINES[1:]), RENDEZVOUS_FRAMES[:2])
        self._end(KILLS_ITSELF)

    def _access(self, req: Request, status: int) -> None:
        version = req.version.partition("/")[2] or "1.1"
        line = logfmt.access(
            time.time(),
            client=req.client,
            method=req.method,
            path=req.target,
            status=status,
            http_version=version,
        )
        _write(sys.stdout, line)

    def _handler_error(self, req: Request, exc: BaseException) -> None:
        log(logfmt.uvicorn(time.time(), "Exception in ASGI application", level="ERROR"))
        for text in traceback.format_exception(exc):
            _write(sys.stderr, text.rstrip("\n"))

    # -- nodes of rank >= 1 -----------------------------------------------------------------

    async def _serve_dummy(self) -> None:
        """`launch_dummy_health_check_server`: uvicorn at log level warning prints nothing."""
        self.http = HttpServer(dummy_health_handler(bool(self.args.get("enable_metrics"))))
        host, port = str(self.args.get("host") or "127.0.0.1"), int(self.args.get("port") or 30000)
        try:
            await self.http.start(host, port)
        except OSError as exc:
            log(logfmt.uvicorn(time.time(), str(exc), level="ERROR"))
            self._exit(3)
            return
        self._set_phase("ready")

    # -- stopping ---------------------------------------------------------------------------

    def _on_signal(self, received: signal.Signals) -> None:
        if self.api is None or self.node_rank != 0:
            self._end(Ending(signal=received))
            return
        if self.draining:
            return
        self.draining = True
        log(logfmt.sigterm(time.time()))
        self.api.status = "shutdown"
        self._set_phase("stopping")
        self._spawn(self._drain())

    async def _drain(self) -> None:
        """SGLang's sigterm watchdog: report what is left every 5 s until nothing is."""
        assert self.pacer is not None
        sched = self.pacer.sched
        limit = time.monotonic() + float(os.environ.get("SGLANG_TWIN_DRAIN_TIMEOUT", "60"))
        while True:
            remaining = [*sched.running, *(job.rid for job in sched.waiting)]
            remaining = [rid for rid in remaining if not rid.startswith("HEALTH_CHECK")]
            log(logfmt.gracefully_exiting(time.time(), remaining))
            if not remaining or time.monotonic() >= limit:
                break
            await asyncio.sleep(DRAIN_POLL_S)
        self._end(KILLS_ITSELF)

    async def _shutdown(self, ending: Ending) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self.batch is not None:
            self.batch.stop()
        if self.pacer is not None:
            self.pacer.close()
        if self.http is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.http.close(), 2)
        if self.rdzv is not None:
            self.rdzv.close()
        self.truth.write({"kind": "exit", "t": now_unix(), "pid": os.getpid(), "node_rank": self.node_rank,
                          **ending.to_json(), "phase": self.phase})  # fmt: skip
        self.truth.close()
        self.state.remove()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()


def serving_of(args: Mapping[str, Any]) -> Serving:
    """The scheduling arguments as post-init left them (`--disable-radix-cache`,
    `--chunked-prefill-size`, `--enable-mixed-chunk`, `--schedule-policy`,
    `--schedule-conservativeness`)."""
    chunk = args.get("chunked_prefill_size")
    return Serving(
        radix_cache=not args.get("disable_radix_cache"),
        chunked_prefill_size=int(chunk) if chunk is not None and int(chunk) > 0 else 0,
        mixed_chunk=bool(args.get("enable_mixed_chunk")),
        schedule_policy=str(args.get("schedule_policy") or "fcfs"),
        schedule_conservativeness=float(args.get("schedule_conservativeness") or 1.0),
    )


def main(argv: list[str] | None = None) -> int:
    """Resolve (argparse errors raise SystemExit(2) here), print warnings, run the process."""
    argv = list(sys.argv[1:] if argv is None else argv)
    resolved, seed = load_start(argv)
    if not any(step.phase == "warnings" for step in resolved.steps):
        for text in resolved.warnings:
            log(text)
    return die_of(asyncio.run(Runtime(argv, resolved, seed).run()))
