"""Two small servers' worth of behaviour the runtime needs besides the API.

* `dummy_health_handler`: what a node of rank >= 1 serves once its schedulers are ready
  (SGLang's `launch_dummy_health_check_server`, reference §4.2): `/ping`, `/health` and
  `/health_generate` always 200, `/metrics` when enabled, everything else FastAPI's 404. Only
  node 0's `/health` says anything about the deployment, which is the trap it models.
* `self_request`: the warmup's HTTP call to the twin's own port (SGLang's warmup thread uses
  `requests` against its own URL), so the warmup shows up in the access log and goes through
  the same code path as any client's request.
"""

from __future__ import annotations

import asyncio

from .httpd import Handler, Request, Responder, Response

__all__ = ["WARMUP_HEADER", "dummy_health_handler", "self_request"]

WARMUP_HEADER = "x-sglang-twin-warmup"
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def dummy_health_handler(metrics: bool) -> Handler:
    async def handle(req: Request, resp: Responder) -> Response:
        if req.path in ("/ping", "/health", "/health_generate") and req.method == "GET":
            return Response(200)
        if metrics and req.path == "/metrics" and req.method == "GET":
            return Response.text("", content_type=METRICS_TYPE)
        return Response.json({"detail": "Not Found"}, 404)

    return handle


async def self_request(host: str, port: int, method: str, path: str, body: bytes) -> None:
    """One request to ourselves with a minimal client (Connection: close, read to EOF); the
    header marks it as the warmup in the ground truth, and nothing else sees it."""
    reader, writer = await asyncio.open_connection(host, port)
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: python-requests/2.32.3\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        f"{WARMUP_HEADER}: 1\r\n\r\n"
    )
    writer.write(head.encode() + body)
    await reader.read()
    writer.close()
