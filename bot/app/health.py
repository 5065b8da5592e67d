"""Each replica's health endpoint: `GET /health` answers JSON on `replicas.health_host:health_port`.

Why a tiny HTTP server of its own on asyncio streams and not the Slack app's web server: Socket
Mode runs no web server at all, and HTTP mode's listens where Slack reaches it (often public);
health belongs on loopback (or the pod's address) and must answer even while Slack is away,
which is one of the things it reports. It reads nothing from the request but its first line.

The answer: `{"ok", "database", "slack", "role", "leader", "since", "reason", "replica",
"schema"}`; status 200 when the database answers and Slack is connected, else 503. The role
(leader, standby, stood-down) does not change the status: a standing-by replica is healthy.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["HealthReport", "HealthServer", "serve_health"]

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0
MAX_REQUEST_LINE = 2048


@dataclass(frozen=True)
class HealthReport:
    database: bool
    slack: bool
    role: str
    since: str | None
    reason: str | None
    replica: str
    schema: str | None

    @property
    def ok(self) -> bool:
        return self.database and self.slack

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "database": self.database,
            "slack": self.slack,
            "role": self.role,
            "leader": self.role == "leader",
            "since": self.since,
            "reason": self.reason,
            "replica": self.replica,
            "schema": self.schema,
        }


def _response(status: int, body: dict[str, object]) -> bytes:
    payload = json.dumps(body, sort_keys=True).encode()
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + payload


@dataclass
class HealthServer:
    """The listening server and the port it got (the configured one, or a free one for 0)."""

    server: asyncio.Server
    port: int

    async def close(self) -> None:
        self.server.close()
        await self.server.wait_closed()


async def serve_health(host: str, port: int, report: Callable[[], Awaitable[HealthReport]]) -> HealthServer:
    """Listen on `host:port` and answer `GET /health` with `report()`; anything else is 404/405."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            words = line[:MAX_REQUEST_LINE].decode("latin-1").split()
            if len(words) < 2 or words[0] != "GET":
                writer.write(_response(405, {"error": "only GET /health"}))
            elif words[1].split("?", 1)[0] != "/health":
                writer.write(_response(404, {"error": "only GET /health"}))
            else:
                found = await report()
                writer.write(_response(200 if found.ok else 503, found.to_json()))
            await writer.drain()
        except (TimeoutError, ConnectionError) as exc:
            log.debug("health request dropped: %s", exc)
        finally:
            writer.close()

    server = await asyncio.start_server(answer, host, port)
    bound = int(server.sockets[0].getsockname()[1])
    return HealthServer(server, bound)
