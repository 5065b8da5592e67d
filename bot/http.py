"""One TLS context for every HTTP client flagbot opens towards a target.

httpx builds a fresh `ssl.SSLContext` (loading the whole CA bundle) for each client it creates:
~60-130 ms of CPU every time. flagbot opens short-lived clients for readiness, observe, status
and drain on every experiment, so the context is made once per process and shared; the
verification it does is the same as httpx's default (certifi's bundle, hostnames checked).
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any

import httpx


@cache
def tls_context() -> ssl.SSLContext:
    """httpx's verifying context (certifi's CA bundle; `SSL_CERT_FILE` and the like are not read,
    as the clients ignore the environment), built once: an SSLContext is safe to share."""
    return httpx.create_ssl_context(trust_env=False)


def async_client(**options: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` with the shared TLS context and no proxy from the environment."""
    options.setdefault("trust_env", False)
    return httpx.AsyncClient(verify=tls_context(), **options)


def get(url: str, **options: Any) -> httpx.Response:
    """A one-off synchronous GET with the shared TLS context and no proxy from the environment."""
    options.setdefault("trust_env", False)
    return httpx.get(url, verify=tls_context(), **options)
