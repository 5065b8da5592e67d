"""`bot.target.http_route`: node 0's HTTP server reached directly, or through an SSH forward.

The fake node's SSH server runs on this host, so "node 0's loopback" is this host's 127.0.0.1.
A server bound to 127.0.0.1 only does not answer on 127.0.0.2 (the rest of 127/8 is loopback
too, but a socket bound to one address refuses the others): a base URL naming 127.0.0.2 plays
the bot host's view of a node whose SGLang listens on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from bot.target.errors import HostKeyError
from bot.target.http_route import WAY_WORDS, HttpForwardError, HttpRoute
from bot.target.session import TargetSession
from tests.support.connect_lab import answer_ok
from tests.unit.target.conftest import FakeTarget, make_target

pytestmark = pytest.mark.unit


@pytest_asyncio.fixture
async def loopback_server() -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 only (as SGLang without `--host`); its port."""
    server = await asyncio.start_server(answer_ok, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _target(fake: FakeTarget, base_url: str, http_via: str = "auto", **ssh: object) -> TargetSession:
    target = make_target(fake.keys, [n.port for n in fake.nodes], **ssh)
    configured = target.model_copy(update={"base_url": base_url, "http_via": http_via})
    return TargetSession.build("fake", configured)


async def _route_once(fake: FakeTarget, base_url: str, http_via: str = "auto") -> HttpRoute:
    """The route a session resolves, the session closed again."""
    ts = _target(fake, base_url, http_via)
    try:
        return await ts.http_route()
    finally:
        await ts.close()


async def _health(url: str) -> int:
    async with httpx.AsyncClient(timeout=5.0) as client:
        return (await client.get(url + "/health")).status_code


async def test_a_server_that_answers_directly_is_used_directly_without_a_login(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    route = await _route_once(fake_target, f"http://127.0.0.1:{loopback_server}")
    assert (route.way, route.base_url) == ("direct", f"http://127.0.0.1:{loopback_server}")
    assert route.described == "direct"
    assert fake_target.nodes[0].logins == 0 and fake_target.nodes[0].forwards == []


async def test_a_loopback_only_server_is_reached_through_a_forward_to_node_0s_loopback(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    ts = _target(fake_target, f"http://127.0.0.2:{loopback_server}/v")
    try:
        route = await ts.http_route()
        assert route.way == "ssh"
        assert route.described.startswith(WAY_WORDS["ssh"])
        assert "does not answer from the bot host" in route.described
        assert route.base_url.startswith("http://127.0.0.1:") and route.base_url.endswith("/v")
        assert route.on_node == f"http://127.0.0.1:{loopback_server}/v"
        local = route.base_url.removesuffix("/v")
        assert await _health(local) == 200
        assert await ts.http_route() == route  # once per session: the same forward again
    finally:
        await ts.close()
    assert set(fake_target.nodes[0].forwards) == {("127.0.0.1", loopback_server)}
    assert fake_target.nodes[1].forwards == []
    assert fake_target.nodes[0].logins == 1
    with pytest.raises(httpx.ConnectError):  # the listener closed with the session
        await _health(local)


async def test_direct_is_taken_as_configured_without_probing(fake_target: FakeTarget) -> None:
    route = await _route_once(fake_target, "http://127.0.0.2:9", "direct")
    assert (route.way, route.base_url, route.on_node) == (
        "direct",
        "http://127.0.0.2:9",
        "http://127.0.0.2:9",
    )
    assert fake_target.nodes[0].logins == 0


async def test_ssh_forwards_even_when_the_port_answers_directly(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    ts = _target(fake_target, f"http://127.0.0.1:{loopback_server}", "ssh")
    try:
        route = await ts.http_route()
        assert route.way == "ssh" and route.base_url != f"http://127.0.0.1:{loopback_server}"
        assert await _health(route.base_url) == 200
    finally:
        await ts.close()
    assert set(fake_target.nodes[0].forwards) == {("127.0.0.1", loopback_server)}  # probe and forward


async def test_a_forward_the_node_refuses_is_one_error_naming_node_0(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    fake_target.nodes[0].forwarding = False
    ts = _target(fake_target, f"http://127.0.0.2:{loopback_server}", "ssh")
    try:
        with pytest.raises(HttpForwardError) as caught:
            await ts.http_route()
    finally:
        await ts.close()
    said = str(caught.value)
    assert f"127.0.0.1:{fake_target.nodes[0].port}" in said  # node 0, as sessions name it
    assert f"no SSH forward to its 127.0.0.1:{loopback_server}" in said


async def test_auto_on_a_node_that_forbids_forwarding_stays_direct_and_says_why(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    fake_target.nodes[0].forwarding = False
    route = await _route_once(fake_target, f"http://127.0.0.2:{loopback_server}")
    assert route.way == "direct" and route.base_url == f"http://127.0.0.2:{loopback_server}"
    assert "refuses TCP forwarding" in route.described
    assert fake_target.nodes[0].forwards == [("127.0.0.1", loopback_server)]  # the probe only


async def test_auto_while_nothing_answers_forwards_and_asks_again(fake_target: FakeTarget) -> None:
    probe = await asyncio.start_server(answer_ok, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()  # a free port: the server is "still starting"
    ts = _target(fake_target, f"http://127.0.0.1:{port}")
    try:
        starting = await ts.http_route()
        assert starting.way == "ssh" and "nothing answers yet" in starting.described
        server = await asyncio.start_server(answer_ok, "127.0.0.1", port)
        try:
            up = await ts.http_route()
        finally:
            server.close()
            await server.wait_closed()
    finally:
        await ts.close()
    assert (up.way, up.base_url) == ("direct", f"http://127.0.0.1:{port}")


async def test_the_forward_needs_node_0s_verified_host_key(
    fake_target: FakeTarget, loopback_server: int, tmp_path: Path
) -> None:
    other = tmp_path / "other_known_hosts"  # node 0's entry names node 1's key
    fake_target.keys.known_hosts([fake_target.nodes[1].port, fake_target.nodes[0].port], path=other)
    ts = _target(fake_target, f"http://127.0.0.2:{loopback_server}", "ssh", known_hosts=other)
    try:
        with pytest.raises(HostKeyError):
            await ts.http_route()
    finally:
        await ts.close()
    assert fake_target.nodes[0].forwards == []


async def test_auto_without_a_login_on_node_0_stays_direct_and_says_why(
    fake_target: FakeTarget, loopback_server: int
) -> None:
    await fake_target.nodes[0].stop()  # node 0's sshd is gone; the HTTP read reports the server
    route = await _route_once(fake_target, f"http://127.0.0.2:{loopback_server}")
    assert (route.way, route.base_url) == ("direct", f"http://127.0.0.2:{loopback_server}")
    assert route.note.startswith("no SSH forward: ") and "unreachable" in route.note
