"""Drain before a restart, on the two-node testbed (issue 20 item 3): a request streaming when a
`try` restarts the server completes, and the router's worker is taken out before and put back
after.

The router is a stand-in on loopback (the bot host's side), called by the `stop_hook` and
`resume_hook` of `[targets.twin.drain]`. Whatever the machine's load, a request is in flight when
the drain begins: the stand-in starts it itself, as a router would have sent it a moment before
the worker left, and answers the stop hook once its first token has arrived. The twin runs
without `--enable-metrics`, so the drain reads the journal's batch lines (the harder signal).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, write_config
from tests.integration.loop.test_story import blocks
from tests.integration.target.support_control import on_baseline  # noqa: F401

pytestmark = pytest.mark.asyncio(loop_scope="session")
TOKENS = 400  # ~3.5 s at the twin's 121 tok/s for a lone stream


@dataclass
class Stream:
    tokens: int = 0
    finish_reason: str | None = None
    ended_at: float | None = None


@dataclass
class Router:
    """SGLang's router as far as the hooks see it: `remove_worker` sends one last long request to
    the worker and answers once it streams; `add_worker` records when the worker came back."""

    base_url: str
    calls: list[tuple[str, float]] = field(default_factory=list)
    stream: Stream = field(default_factory=Stream)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        path = head.split()[1].split("?")[0]
        self.calls.append((path, time.monotonic()))
        if path == "/remove_worker":
            first = asyncio.get_running_loop().create_future()
            self.tasks.append(asyncio.create_task(self._last_request(first)))
            await asyncio.wait_for(first, 60)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def _last_request(self, first: asyncio.Future[None]) -> None:
        body = {
            "model": "default",
            "prompt": "drain me",
            "max_tokens": TOKENS,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "ignore_eos": True,
        }
        async with (
            httpx.AsyncClient(timeout=httpx.Timeout(120.0)) as client,
            client.stream("POST", f"{self.base_url}/v1/completions", json=body) as response,
        ):
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or {}
                if usage.get("completion_tokens") is not None:  # tokens, not chunks: a speculative
                    self.stream.tokens = int(usage["completion_tokens"])  # decode step sends several
                for choice in chunk.get("choices") or []:
                    self.stream.finish_reason = choice.get("finish_reason") or self.stream.finish_reason
                if not first.done():
                    first.set_result(None)
        self.stream.ended_at = time.monotonic()


@pytest_asyncio.fixture(loop_scope="session")
async def router(testbed: Testbed) -> AsyncIterator[Router]:
    stand_in = Router(testbed.base_url)
    server = await asyncio.start_server(stand_in.serve, "127.0.0.1", 0)
    stand_in.port = server.sockets[0].getsockname()[1]
    try:
        yield stand_in
    finally:
        server.close()
        await server.wait_closed()
        for task in stand_in.tasks:
            task.cancel()
        await asyncio.gather(*stand_in.tasks, return_exceptions=True)


@pytest.mark.usefixtures("on_baseline")
async def test_a_request_streaming_when_a_try_restarts_completes(
    testbed: Testbed, router: Router, tmp_path: Path
) -> None:
    config = write_config(testbed, tmp_path)
    hooks = f"http://127.0.0.1:{router.port}"
    config.write_text(
        config.read_text()
        + '\n[targets.twin.drain]\ngrace = "3m"\n'
        + f'stop_hook = {{ url = "{hooks}/remove_worker?url={testbed.base_url}" }}\n'
        + f'resume_hook = {{ url = "{hooks}/add_worker?url={testbed.base_url}" }}\n'
    )
    assert (await flagbot(config, "db", "upgrade"))[0] == 0
    code, tried, err = await flagbot_json(config, "try", "--enable-metrics", "keep=always", "because=drain")
    assert code == 0, (tried, err)
    assert router.stream.finish_reason == "length" and router.stream.tokens == TOKENS, router.stream
    assert [path for path, _ in router.calls] == ["/remove_worker", "/add_worker"]
    assert router.stream.ended_at is not None and router.stream.ended_at < router.calls[1][1]
    text = "\n".join(str(block) for block in blocks(config, tried["experiment_id"]))
    assert "drain: 1 request(s) in flight finished after" in text, text
    assert f"POST http://127.0.0.1:{router.port}/remove_worker -> 200" in text
    assert f"resume: POST http://127.0.0.1:{router.port}/add_worker -> 200" in text
    assert "?url=" not in text  # the hook's query string is not evidence
