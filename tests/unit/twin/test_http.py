"""The twin's HTTP/1.1 server in-process, read by httpx and by a raw socket.

It checks what the twin's clients depend on: keep-alive reuse, Content-Length bodies, chunked
SSE that arrives event by event, pipelined requests answered in order, chunked request
bodies, disconnects reaching the handler, and the OpenAI chunk shapes as a client parses them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from flagbot_lab.twin.engine.httpd import HttpError, HttpServer, Request, Responder, Response, Stream
from flagbot_lab.twin.engine.shapes import ChatReply, CompletionReply, GenerateReply


class App:
    def __init__(self) -> None:
        self.access: list[tuple[str, str, int]] = []
        self.cancelled = asyncio.Event()

    async def __call__(self, req: Request, resp: Responder) -> Response | Stream:
        if req.path == "/echo":
            return Response.json({"client": req.client, "method": req.method, "body": req.body.decode()})
        if req.path == "/missing":
            raise HttpError(404)
        if req.path == "/sse":
            count = int(req.params().get("n", "5"))
            stream = resp.stream()
            for i in range(count):
                stream.send(f"data: {json.dumps({'i': i})}\n\n".encode())
                await asyncio.sleep(0.02)
            stream.end(b"data: [DONE]\n\n")
            return stream
        if req.path == "/forever":
            stream = resp.stream()
            try:
                while True:
                    stream.send(b"data: {}\n\n")
                    await asyncio.sleep(0.01)
            finally:
                self.cancelled.set()
        if req.path == "/chat":
            return self.replay(resp, ChatReply("rid1", "m", 1, 7, 0, 2), include_usage=True)
        if req.path == "/completions":
            return self.replay(resp, CompletionReply("rid2", "m", 1, 7, 0, 2), include_usage=True)
        if req.path == "/generate":
            return self.replay(resp, GenerateReply("rid3", "m", 1, 7, 0, 2))
        raise HttpError(404)

    def replay(self, resp: Responder, reply: Any, include_usage: bool = False) -> Stream:
        reply.include_usage = include_usage
        stream = resp.stream()
        for i in range(3):
            stream.send(reply.token(i))
        stream.send(reply.last(3, "length", 0.5))
        stream.end()
        return stream


@pytest.fixture
async def served() -> AsyncIterator[tuple[App, str, int]]:
    app = App()
    server = HttpServer(app, access_log=lambda req, status: app.access.append((req.method, req.path, status)))
    await server.start("127.0.0.1", 0)
    try:
        yield app, f"http://127.0.0.1:{server.port}", server.port
    finally:
        await server.close()


async def test_keep_alive_reuses_one_connection(served: tuple[App, str, int]) -> None:
    app, base, _ = served
    async with httpx.AsyncClient(base_url=base) as client:
        first = (await client.post("/echo", content=b"hello")).json()
        second = (await client.get("/echo")).json()
    assert first["body"] == "hello" and first["method"] == "POST"
    assert first["client"] == second["client"]  # same peer port: the connection was kept
    assert app.access == [("POST", "/echo", 200), ("GET", "/echo", 200)]


async def test_fixed_length_response_headers(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    async with httpx.AsyncClient(base_url=base) as client:
        r = await client.get("/echo")
    assert r.headers["content-type"] == "application/json"
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.headers["server"] == "uvicorn"


async def test_errors_are_fastapi_shaped(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    async with httpx.AsyncClient(base_url=base) as client:
        r = await client.get("/missing")
    assert r.status_code == 404
    assert r.json() == {"detail": "Not Found"}


async def test_sse_events_arrive_one_by_one_with_chunked_framing(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    loop = asyncio.get_running_loop()
    arrivals: list[tuple[float, str]] = []
    async with httpx.AsyncClient(base_url=base) as client, client.stream("GET", "/sse?n=5") as r:
        assert r.headers["transfer-encoding"] == "chunked"
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        async for line in r.aiter_lines():
            if line:
                arrivals.append((loop.time(), line))
    assert [line for _, line in arrivals] == [f'data: {{"i": {i}}}' for i in range(5)] + ["data: [DONE]"]
    spread = arrivals[4][0] - arrivals[0][0]
    assert spread > 0.05  # streamed as produced, not buffered to the end


async def test_pipelined_requests_are_answered_in_order(served: tuple[App, str, int]) -> None:
    _, _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n"
        b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    bodies = [json.loads(part.split(b"\r\n\r\n", 1)[1]) for part in raw.split(b"HTTP/1.1 ")[1:]]
    assert [b["body"] for b in bodies] == ["one", "two", ""]
    assert b"connection: close" in raw.split(b"HTTP/1.1 ")[3]


async def test_expect_continue_gets_100_before_the_body(served: tuple[App, str, int]) -> None:
    _, _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
    interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b"data")
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200 OK")
    writer.close()


async def test_client_disconnect_cancels_the_handler(served: tuple[App, str, int]) -> None:
    app, _, port = served
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(reader.readuntil(b"data: {}"), 5)
    writer.close()
    await asyncio.wait_for(app.cancelled.wait(), 5)


async def sse_events(base: str, path: str) -> list[Any]:
    events: list[Any] = []
    async with httpx.AsyncClient(base_url=base) as client, client.stream("GET", path) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


async def test_chat_chunks_as_an_openai_client_reads_them(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    events = await sse_events(base, "/chat")
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "rid1" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["choices"][0]["delta"]["content"] == ""
    text = "".join(c["choices"][0]["delta"]["content"] or "" for c in chunks if c["choices"])
    assert len(text.split()) == 4
    finish = chunks[-2]
    assert finish["choices"][0]["finish_reason"] == "length" and finish["usage"] is None
    usage = chunks[-1]
    assert usage["choices"] == []
    assert usage["usage"]["completion_tokens"] == 4 and usage["usage"]["prompt_tokens"] == 7
    assert usage["usage"]["total_tokens"] == 11


async def test_completion_chunks_put_finish_reason_on_the_last_text(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    events = await sse_events(base, "/completions")
    chunks = events[:-1]
    texts = [c for c in chunks if c["choices"]]
    assert len(texts) == 4
    assert [c["choices"][0]["finish_reason"] for c in texts] == [None, None, None, "length"]
    assert chunks[-1]["usage"]["completion_tokens"] == 4


async def test_generate_events_are_cumulative(served: tuple[App, str, int]) -> None:
    _, base, _ = served
    events = await sse_events(base, "/generate")
    assert events[-1] == "[DONE]"
    texts = [e["text"] for e in events[:-1]]
    assert all(texts[i + 1].startswith(texts[i]) for i in range(len(texts) - 1))
    last = events[-2]
    assert len(last["output_ids"]) == 4
    assert last["meta_info"]["finish_reason"] == {"type": "length", "length": 4}
    assert last["meta_info"]["completion_tokens"] == 4 and "e2e_latency" in last["meta_info"]
    assert events[0]["meta_info"]["finish_reason"] is None


# -- the twin's API in-process ----------------------------------------------------------------


@pytest.fixture
async def api_base(tmp_path: Any) -> AsyncIterator[tuple[Any, str]]:
    from flagbot_lab.twin.engine.api import Api, ServeInfo
    from flagbot_lab.twin.engine.sched import Pacer, Scheduler, ThroughputModel
    from flagbot_lab.twin.engine.truth import TruthWriter

    loop = asyncio.get_running_loop()
    info = ServeInfo(
        server_info=lambda thr: {
            "max_running_requests": None,
            "internal_states": [{"last_gen_throughput": thr}],
        },
        model_info={"model_path": "/m"},
        served_model_name="/m",
        context_len=100,
        max_total_num_tokens=1000,
        enable_metrics=True,
    )
    sched = Scheduler(ThroughputModel(single_stream_tok_s=1000.0, prefill_tok_s=1e6), max_running=4)
    truth = TruthWriter(str(tmp_path / "truth.jsonl"))
    api = Api(info, Pacer(sched, loop), truth, lambda line: None, seed=1, wall_offset=0.0)
    server = HttpServer(api.handle)
    await server.start("127.0.0.1", 0)
    try:
        yield api, f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()
        truth.close()


async def test_health_follows_the_lifecycle(api_base: tuple[Any, str]) -> None:
    api, base = api_base
    async with httpx.AsyncClient(base_url=base) as client:
        starting = await client.get("/health")
        assert starting.status_code == 503 and starting.content == b""
        assert (await client.get("/v1/models")).status_code == 200  # works during warmup
        api.status = "up"
        assert (await client.get("/health_generate")).status_code == 200
        api.status = "shutdown"
        assert (await client.get("/health")).status_code == 503


async def test_metrics_exposition_and_counters(api_base: tuple[Any, str]) -> None:
    api, base = api_base
    api.status = "up"
    async with httpx.AsyncClient(base_url=base) as client:
        body = {"prompt": "a b c", "max_tokens": 5, "ignore_eos": True}
        assert (await client.post("/v1/completions", json=body)).status_code == 200
        r = await client.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = r.text.splitlines()
    labels = '{engine_type="unified",model_name="/m",moe_ep_rank="0",pp_rank="0",tp_rank="0"}'
    assert "# TYPE sglang:num_running_reqs gauge" in lines
    assert f"sglang:num_running_reqs{labels} 0.0" in lines
    assert f"sglang:max_total_num_tokens{labels} 1000.0" in lines
    assert 'sglang:generation_tokens_total{model_name="/m"} 5.0' in lines
    assert 'sglang:prompt_tokens_total{model_name="/m"} 3.0' in lines
    assert 'sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="/m"} 1.0' in lines


def test_go_style_floats_match_prometheus_client() -> None:
    from flagbot_lab.twin.engine.metrics import go_float

    assert go_float(1234567) == "1.234567e+06"
    assert go_float(3) == "3.0"
    assert go_float(0.12) == "0.12"
    assert go_float(float("inf")) == "+Inf"


async def test_request_errors_use_sglang_wording(api_base: tuple[Any, str]) -> None:
    _, base = api_base
    async with httpx.AsyncClient(base_url=base) as client:
        empty = await client.post("/v1/chat/completions", json={"messages": []})
        too_long = await client.post("/v1/completions", json={"prompt": [1] * 90, "max_tokens": 20})
        generate = await client.post("/generate", json={"sampling_params": {}})
        unknown = await client.get("/v1/models/other")
        wrong_method = await client.get("/v1/completions")
    assert empty.status_code == 400 and empty.json()["message"] == "Messages cannot be empty."
    assert too_long.status_code == 400
    assert too_long.json()["message"].startswith(
        "Requested token count exceeds the model's maximum context length of 100 tokens. "
        "You requested a total of 110 tokens: 90 tokens from the input messages and 20 tokens"
    )
    assert generate.json() == {"error": {"message": "Either text or input_ids should be provided."}}
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    assert wrong_method.status_code == 405 and wrong_method.json() == {"detail": "Method Not Allowed"}


def test_prompt_token_estimate_is_documented_rule() -> None:
    from flagbot_lab.twin.engine.tokens import count_chat_tokens, count_text_tokens

    assert count_text_tokens("a b c d") == 4  # words win for short words
    assert count_text_tokens("internationalization") == 5  # ceil(20 chars / 4)
    assert count_chat_tokens([{"role": "user", "content": "a b"}]) == 3 + 4 + 2
