"""Node 0's HTTP API: SGLang 0.5.10's endpoints over the twin's scheduler (reference §4).

Lifecycle (`status`): "starting" from the moment uvicorn's lines are printed (`/health` and
`/health_generate` answer 503 with an empty body, everything else already works), "up" after
the warmup request (200), "shutdown" after SIGTERM (503 plus SGLang's log line).

Generation requests go through `genreq` (parse, SGLang's 400 wording), then become a `Job` on
the shared scheduler. A stream is written from the scheduler's timer callback, token by token;
a non-streaming request waits for its job. A disconnecting client cancels its job and frees its
slot, as SGLang aborts a request whose connection closed. Each finished, failed or aborted user
request appends one record to the ground-truth file and updates `/metrics`.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import logfmt
from .genreq import BadRequestError, GenSpec, parse_chat, parse_completion, parse_generate, validate_length
from .helpers import METRICS_TYPE, WARMUP_HEADER
from .httpd import HttpError, Request, Responder, Response, Stream
from .metrics import MetricsState, render
from .sched import Job, Pacer
from .shapes import ChatReply, CompletionReply, DecodeSteps, GenerateReply, Reply, error_body
from .tokens import filler_offset
from .truth import TruthWriter, request_record, trace_enabled

__all__ = ["Api", "ServeInfo"]

FLUSH_TEXT = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)
NATURAL_LENGTH = (16, 1024)
"""Without ignore_eos, EOS comes after a seeded uniform number of tokens in this range."""
FAILURE_MESSAGE = "Internal server error: the scheduler failed while processing this request."


@dataclass
class ServeInfo:
    """What the endpoints report; built once per start from the resolved arguments.

    `server_info` and `model_info` come from the startup resolution (the same figures the
    startup lines printed); `server_info` takes the current generation throughput.
    """

    server_info: Callable[[float], dict[str, Any]]
    model_info: dict[str, Any]
    served_model_name: str
    context_len: int
    max_total_num_tokens: int
    enable_metrics: bool = False
    ranks: str = ""
    eos_id: int = 2
    failure_fraction: float = 0.0
    spec_accept_length: float | None = None
    cache_report: bool = False
    """`--enable-cache-report`: OpenAI usage reports the prefix cache's hits."""


class Api:
    def __init__(
        self,
        info: ServeInfo,
        pacer: Pacer,
        truth: TruthWriter,
        emit: Callable[[str], None],
        *,
        seed: int,
        wall_offset: float,
        node_rank: int = 0,
    ) -> None:
        self.info = info
        self.pacer = pacer
        self.sched = pacer.sched
        self.truth = truth
        self.emit = emit
        self.rng = random.Random(seed ^ 0x5EED5EED)  # noqa: S311 - simulation noise, not secrets
        self.wall_offset = wall_offset
        self.node_rank = node_rank
        self.status = "starting"
        self.trace = trace_enabled()
        self.gen_throughput: Callable[[], float] = lambda: 0.0
        self.metrics = MetricsState(
            model_name=info.served_model_name, max_total_num_tokens=info.max_total_num_tokens
        )
        get, post = ("GET",), ("POST",)
        self.routes: dict[str, tuple[tuple[str, ...], Any]] = {
            "/health": (get, self.health),
            "/health_generate": (get, self.health),
            "/ping": (get, self.ping),
            "/server_info": (get, self.server_info),
            "/get_server_info": (get, self.get_server_info),
            "/model_info": (get, self.model_info),
            "/get_model_info": (get, self.get_model_info),
            "/v1/models": (get, self.models),
            "/flush_cache": (("GET", "POST"), self.flush_cache),
            "/v1/chat/completions": (post, self.chat),
            "/v1/completions": (post, self.completions),
            "/generate": (("POST", "PUT"), self.generate),
        }
        if info.enable_metrics:
            self.routes["/metrics"] = (get, self.metrics_endpoint)

    async def handle(self, req: Request, resp: Responder) -> Response | Stream:
        route = self.routes.get(req.path)
        if route is None:
            if req.path.startswith("/v1/models/") and req.method == "GET":
                return self.model_card(req.path[len("/v1/models/") :])
            raise HttpError(404)
        methods, fn = route
        if req.method not in methods:
            raise HttpError(405)
        result: Response | Stream = await fn(req, resp)
        return result

    # -- status and info --------------------------------------------------------------------

    async def health(self, req: Request, resp: Responder) -> Response:
        if self.status == "shutdown":
            self.emit(logfmt.health_during_shutdown(time.time()))
            return Response(503)
        if self.status != "up":
            return Response(503)
        if self.sched.num_running or self.sched.num_queue:
            return Response(200)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        job = Job(f"HEALTH_CHECK_{time.time()}", 1, 1, internal=True, on_done=lambda j: _resolve(done))
        self.pacer.submit(job)
        try:
            await done
        finally:
            self.pacer.cancel(job)
        return Response(200)

    async def ping(self, req: Request, resp: Responder) -> Response:
        return Response.text("")

    async def server_info(self, req: Request, resp: Responder) -> Response:
        info = self.info.server_info(self.gen_throughput())
        accept = self.info.spec_accept_length
        # SGLang's `get_internal_state` adds it with speculation on, once a decode step ran
        if accept is not None and self.sched.counters.emitted_all > 0:
            for state in info.get("internal_states") or ():
                state["avg_spec_accept_length"] = accept
        return Response.json(info)

    async def get_server_info(self, req: Request, resp: Responder) -> Response:
        self.emit(logfmt.get_server_info_deprecated(time.time()))
        return await self.server_info(req, resp)

    async def model_info(self, req: Request, resp: Responder) -> Response:
        return Response.json(self.info.model_info)

    async def get_model_info(self, req: Request, resp: Responder) -> Response:
        self.emit(logfmt.get_model_info_deprecated(time.time()))
        return await self.model_info(req, resp)

    def _card(self) -> dict[str, Any]:
        name = self.info.served_model_name
        return {
            "id": name,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": name,
            "parent": None,
            "max_model_len": self.info.context_len,
        }

    async def models(self, req: Request, resp: Responder) -> Response:
        return Response.json({"object": "list", "data": [self._card()]})

    def model_card(self, name: str) -> Response:
        if name == self.info.served_model_name:
            return Response.json(self._card())
        error = {
            "message": f"The model '{name}' does not exist",
            "type": "invalid_request_error",
            "param": "model",
            "code": "model_not_found",
        }
        return Response.json({"error": error}, 404)

    async def flush_cache(self, req: Request, resp: Responder) -> Response:
        running, queued = self.sched.num_running, self.sched.num_queue
        if running or queued:
            self.emit(logfmt.cache_not_flushed(time.time(), self.info.ranks, queued=queued, running=running))
            return Response.text(FLUSH_TEXT, 400)
        self.sched.flush_cache()
        self.emit(logfmt.cache_flushed(time.time(), self.info.ranks))
        return Response.text(FLUSH_TEXT)

    async def metrics_endpoint(self, req: Request, resp: Responder) -> Response:
        m, c = self.metrics, self.sched.counters
        m.num_running_reqs = self.sched.num_running
        m.num_queue_reqs = self.sched.num_queue
        m.num_used_tokens = self.sched.tokens_in_use()
        m.gen_throughput = self.gen_throughput()
        m.prompt_tokens_total = c.prompt_tokens
        m.generation_tokens_total = c.generation_tokens
        m.num_requests_total = c.finished + c.failed
        m.num_aborted_requests_total = c.aborted
        m.spec_accept_length = self.info.spec_accept_length
        return Response(200, render(m).encode(), METRICS_TYPE)

    # -- generation -------------------------------------------------------------------------

    async def chat(self, req: Request, resp: Responder) -> Response | Stream:
        return await self._run(req, resp, parse_chat, ChatReply, "/v1/chat/completions")

    async def completions(self, req: Request, resp: Responder) -> Response | Stream:
        return await self._run(req, resp, parse_completion, CompletionReply, "/v1/completions")

    async def generate(self, req: Request, resp: Responder) -> Response | Stream:
        return await self._run(req, resp, parse_generate, GenerateReply, "/generate")

    def _plan(self, spec: GenSpec) -> tuple[int, str]:
        """How many tokens this request will produce, and why it stops."""
        room = self.info.context_len - spec.prompt_tokens
        limit = max(1, min(room, spec.max_new if spec.max_new is not None else room))
        if spec.ignore_eos:
            return limit, "length"
        natural = self.rng.randint(*NATURAL_LENGTH)
        return (natural, "stop") if natural < limit else (limit, "length")

    async def _run(
        self, req: Request, resp: Responder, parse: Any, reply_cls: Any, endpoint: str
    ) -> Response | Stream:
        try:
            spec: GenSpec = parse(req.json())
            validate_length(spec, self.info.context_len)
        except BadRequestError as exc:
            if endpoint == "/generate":
                return Response.json({"error": {"message": str(exc)}}, 400)
            return Response.json(error_body(str(exc), 400, "BadRequestErrorError"), 400)
        if spec.max_new == 0:
            spec.max_new = 1
        rid = uuid.uuid4().hex
        target, reason = self._plan(spec)
        fail_at = None
        if self.info.failure_fraction > 0 and self.rng.random() < self.info.failure_fraction:
            fail_at = self.rng.randrange(target)
        reply: Reply = reply_cls(
            rid, spec.model or self.info.served_model_name, int(time.time()), spec.prompt_tokens,
            filler_offset(rid), self.info.eos_id,
        )  # fmt: skip
        reply.include_usage = spec.include_usage
        reply.cache_report = self.info.cache_report
        reply.continuous_usage = spec.continuous_usage
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        stream = resp.stream() if spec.stream else None
        last = target - 1

        steps = DecodeSteps(self.info.spec_accept_length)

        def on_token(job: Job, index: int, due: float) -> None:
            if stream is None:
                return
            reply.cached_tokens, reply.retractions = job.cached_tokens, job.retractions
            if index == last:
                stream.send(reply.last(index, reason, loop.time() - job.arrival, steps.first))
                return
            first = steps.take(index)
            if first is not None:
                stream.send(reply.token(index, first))

        job = Job(
            rid, spec.prompt_tokens, target, on_token=on_token,
            on_done=lambda j: _resolve(done), fail_at=fail_at, trace=self.trace, key=spec.prompt_key,
        )  # fmt: skip
        self.pacer.submit(job)
        try:
            await done
        finally:
            if not job.finished:
                self.pacer.cancel(job)
                self._record(job, endpoint, spec, "aborted", req)
        outcome = "failed" if job.failed else reason
        self._record(job, endpoint, spec, outcome, req)
        e2e = loop.time() - job.arrival
        if stream is not None:
            stream.end(reply.stream_error(FAILURE_MESSAGE) if job.failed else b"")
            return stream
        if job.failed:
            return Response.json(error_body(FAILURE_MESSAGE), 500)
        reply.cached_tokens, reply.retractions = job.cached_tokens, job.retractions
        return Response.json(reply.body(reason, job.emitted, e2e))

    def _record(self, job: Job, endpoint: str, spec: GenSpec, outcome: str, req: Request) -> None:
        extra: dict[str, Any] = {"max_new": spec.max_new, "ignore_eos": spec.ignore_eos}
        if req.headers.get(WARMUP_HEADER):
            extra["warmup"] = True
        self.truth.write(
            request_record(
                job, endpoint=endpoint, stream=spec.stream, outcome=outcome,
                wall_offset=self.wall_offset, node_rank=self.node_rank, extra=extra,
            )
        )  # fmt: skip
        m = self.metrics
        if job.emitted:
            m.ttft.observe(job.act_first - job.arrival)
            if job.emitted > 1:
                m.itl.observe((job.act_last - job.act_first) / (job.emitted - 1), job.emitted - 1)
        m.e2e.observe(job.act_last - job.arrival if job.emitted else 0.0)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
