"""A fake node to connect to and an HTTP endpoint next to it: what `config check --connect` tests
(unit and console) check against. The node is `tests/support/fake_node.py`'s (an in-process
SSH server; its SGLang says 0.5.23 and prints the twin's `--help`); the endpoint answers 200 to
every GET, as a healthy server's `/health` and `/server_info` do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.fake_node import FakeNode, FakeSystemd, Keys
from tests.support.host_flags import host_help


@dataclass
class ConnectLab:
    node: FakeNode
    keys: Keys
    http_port: int


async def answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()
    writer.close()


@asynccontextmanager
async def connect_lab(directory: Path) -> AsyncIterator[ConnectLab]:
    """The node (keys under `directory`, the client key mode 0600) and the endpoint, both stopped after."""
    keys = Keys.make(directory, 1)
    keys.client_key.chmod(0o600)
    node = FakeNode(FakeSystemd(), sglang_version="0.5.23", help_text=host_help())
    await node.start(keys.host_keys[0], keys.client_public)
    http = await asyncio.start_server(answer_ok, "127.0.0.1", 0)
    try:
        yield ConnectLab(node, keys, http.sockets[0].getsockname()[1])
    finally:
        http.close()
        await http.wait_closed()
        await node.stop()
