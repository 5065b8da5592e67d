"""`bot.http.warm`: after it, a client's first request imports nothing of httpx's stack. Without
it, that first request (an observe in the middle of a run, in `flagbot serve`) imported httpcore,
trio and anyio on the event loop and held a burst of Slack acknowledgements behind it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

FIRST_REQUEST = textwrap.dedent(
    """
    import asyncio, concurrent.futures.thread, json, sys
    from bot.http import async_client, warm

    async def main(warmed: bool) -> None:
        if warmed:
            warm()

        async def answer(reader, writer):
            await reader.readuntil(b"\\r\\n\\r\\n")
            writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        before = set(sys.modules)
        async with async_client(timeout=10) as client:
            response = await client.get(f"http://localhost:{port}/health")
        server.close()
        await server.wait_closed()
        print(json.dumps([response.status_code, sorted(set(sys.modules) - before)]))

    asyncio.run(main(sys.argv[1] == "warm"))
    """
)


def _first_request(mode: str) -> tuple[int, list[str]]:
    """A fresh interpreter (this one has imported everything already): one request, and the
    modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_REQUEST, mode], capture_output=True, text=True, timeout=120, check=True
    )
    status, imported = json.loads(done.stdout.strip().splitlines()[-1])
    return int(status), list(imported)


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_the_first_request_after_warm_imports_nothing(mode: str) -> None:
    status, imported = _first_request(mode)
    assert status == 200
    stack = [
        name for name in imported if name.split(".")[0] in {"httpcore", "anyio", "h11", "sniffio", "certifi"}
    ]
    if mode == "warm":
        assert imported == []
    else:  # what warm() pays in advance: without it the request imports httpx's transport stack
        assert "httpcore" in stack and "anyio" in stack
