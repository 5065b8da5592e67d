"""One TLS context for every HTTP client flagbot opens towards a target.

httpx builds a fresh `ssl.SSLContext` (loading the whole CA bundle) for each client it creates:
~60-130 ms of CPU every time. flagbot opens short-lived clients for readiness, observe, status
and drain on every experiment, so the context is made once per process and shared; the
verification it does is the same as httpx's default (certifi's bundle, hostnames checked).
"""

from __future__ import annotations

import contextlib
import importlib
import ssl
from collections.abc import Mapping
from functools import cache
from typing import TypedDict, Unpack

import httpx


class Options(TypedDict, total=False):
    """The httpx options flagbot's callers give (`httpx.AsyncClient(...)`, `httpx.get(...)`)."""

    timeout: float | httpx.Timeout | None
    headers: Mapping[str, str]
    trust_env: bool


@cache
def tls_context() -> ssl.SSLContext:
    """httpx's verifying context (certifi's CA bundle; `SSL_CERT_FILE` and the like are not read,
    as the clients ignore the environment), built once: an SSLContext is safe to share."""
    return httpx.create_ssl_context(trust_env=False)


def warm() -> None:
    """Pay now, while a long-running process starts, what its first client would pay on the
    event loop in the middle of a run: the TLS context; httpx's transport, whose first build
    imports httpcore (and through it trio, when trio is installed: ~0.1-0.3 s); and what the
    first request loads (anyio's asyncio backend and its events, the IDNA codec for host names).
    Measured in `flagbot serve`: that import held a burst of Slack acks behind it."""
    tls_context()
    httpx.AsyncHTTPTransport(verify=tls_context(), trust_env=False)
    for module in ("anyio._core._synchronization", "anyio._backends._asyncio", "encodings.idna"):
        with contextlib.suppress(ImportError):  # anyio's own layout, which may change
            importlib.import_module(module)


def async_client(**options: Unpack[Options]) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` with the shared TLS context and no proxy from the environment."""
    options.setdefault("trust_env", False)
    return httpx.AsyncClient(verify=tls_context(), **options)


def get(url: str, **options: Unpack[Options]) -> httpx.Response:
    """A one-off synchronous GET with the shared TLS context and no proxy from the environment."""
    options.setdefault("trust_env", False)
    return httpx.get(url, verify=tls_context(), **options)
