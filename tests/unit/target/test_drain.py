"""Drain before a restart (`[targets.X.drain]`): the idle signals, the hooks around the restart, and
what happens when a hook fails, the grace runs out, or the apply fails after the drain."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
import pytest_asyncio

from bot.config.drain import CommandHook, DrainPolicy
from bot.config.schema import Target
from bot.sglang.flagset import FlagItem, FlagSet
from bot.target.drain import (
    DrainHookError,
    DrainSettings,
    DrainTimeoutError,
    drain,
    load_from_journal,
    load_from_metrics,
    resume_traffic,
)
from bot.target.restart import RestartError, apply_and_restart, flags_for_nodes, restart_target
from bot.target.unit import read_unit
from tests.unit.target.conftest import FakeTarget

EXTRA = FlagItem("--enable-torch-compile")


@dataclass
class Router:
    """A stand-in for SGLang's router (or a load balancer) and node 0's `/metrics`, on loopback:
    `in_flight` is what `/metrics` reports next (then 0), `calls` every hook request received."""

    port: int = 0
    in_flight: list[tuple[int, int]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        method, path = head.split()[:2]
        length = next(
            (int(line.split(":")[1]) for line in head.lower().splitlines() if "content-length" in line), 0
        )
        body = (await reader.readexactly(length)).decode() if length else ""
        if path == "/metrics":
            running, queued = self.in_flight.pop(0) if self.in_flight else (0, 0)
            text = f'sglang:num_running_reqs{{dp_rank="0"}} {running}.0\nsglang:num_queue_reqs {queued}.0\n'
            code = 200
        else:
            self.calls.append(f"{method} {path} {body}".strip())
            text, code = "ok", self.status.get(path.split("?")[0], 200)
        payload = text.encode()
        writer.write(
            b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
            % (code, len(payload), payload)
        )
        await writer.drain()
        writer.close()


@pytest_asyncio.fixture
async def router() -> AsyncIterator[Router]:
    stand_in = Router()
    server = await asyncio.start_server(stand_in.serve, "127.0.0.1", 0)
    stand_in.port = server.sockets[0].getsockname()[1]
    try:
        yield stand_in
    finally:
        server.close()
        await server.wait_closed()


def drained_target(fake: FakeTarget, router: Router, **policy: object) -> Target:
    """The fake target with node 0's HTTP on the router stand-in and `[targets.X.drain]` set."""
    settings = DrainPolicy.model_validate(
        {
            "grace": "2s",
            "stop_hook": {"url": router.url("/remove_worker?url=http://node0:30000&token=s3cret")},
            "resume_hook": {"url": router.url("/add_worker?url=http://node0:30000"), "body": '{"w": 1}'},
            **policy,
        }
    )
    return fake.target.model_copy(update={"base_url": router.url(""), "drain": settings})


async def _new_flags(fake: FakeTarget) -> list[FlagSet]:
    async with fake.open() as ts:
        view = await read_unit(ts.node0)
    return flags_for_nodes(FlagSet((*view.flags.items, EXTRA)), 2)


def _writes(fake: FakeTarget) -> list[str]:
    return [text for text in fake.received if "tee" in text or "systemctl stop" in text]


def test_idle_signals_count_running_and_queued_requests() -> None:
    metrics = (
        'sglang:num_running_reqs{dp_rank="0"} 3.0\nsglang:num_running_reqs{dp_rank="1"} 2.0\n'
        'sglang:num_queue_reqs{dp_rank="0"} 4.0\nsglang:num_running_reqs_total 9\n'
    )
    assert load_from_metrics(metrics) == (5, 4)
    assert load_from_metrics("sglang:num_queue_reqs 3\n") is None  # no running gauge: not SGLang's
    journal = (
        "Prefill batch, #new-seq: 1, #running-req: 4, #queue-req: 2, \n"
        "Decode batch, #running-req: 1, #token: 10, token usage: 0.00, cuda graph: True, gen throughput "
        "(token/s): 3.0, #queue-req: 6\n"
    )
    assert load_from_journal(journal) == (1, 6)  # the newest line, whichever order it prints them in
    lone = "Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, #running-req: 0, #queue-req: 0, \n"
    assert load_from_journal(lone) == (1, 0)  # the request being admitted is in flight
    assert load_from_journal("Decode batch, #running-req: 7, #token: 1\n") == (7, 0)
    assert load_from_journal("") == (0, 0)


def test_a_command_hook_is_a_program_by_absolute_path_on_a_node_of_the_target(
    fake_target: FakeTarget,
) -> None:
    hook = CommandHook(command=["/usr/local/bin/lb", "drain", "--token=s3cret"], node=1)
    assert hook.shown() == "node 1: /usr/local/bin/lb (+2 argument(s))"
    for bad, rule in (
        (["lb", "drain"], "absolute path"),
        (["/usr/local/bin/../lb"], "absolute path"),
        (["/usr/local/bin/lb", "a\nb"], "control character"),
        ("/usr/local/bin/lb drain", "list of words"),
        ([], "list of words"),
    ):
        with pytest.raises(ValueError, match=rule):
            CommandHook.model_validate({"command": bad})
    with pytest.raises(ValueError, match="url"):  # one kind per hook: keys of both are refused
        DrainPolicy.model_validate({"stop_hook": {"command": ["/bin/true"], "url": "http://lb/x"}})
    raw = fake_target.target.model_dump(exclude_none=True)
    with pytest.raises(ValueError, match=r"drain.stop_hook runs on node 2, but the target has 2 node\(s\)"):
        Target.model_validate({**raw, "drain": {"stop_hook": {"command": ["/bin/true"], "node": 2}}})


async def test_command_hooks_run_on_their_node_around_a_restart(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    stop = CommandHook(command=["/usr/local/bin/lb", "out", "node 1; rm -rf /"], node=1)
    resume = CommandHook(command=["/usr/local/bin/lb", "in"], node=1)
    policy = DrainPolicy(grace=timedelta(seconds=2), stop_hook=stop, resume_hook=resume)
    async with fake_target.open() as ts:
        ts.target = fake_target.target.model_copy(update={"drain": policy})
        report = await apply_and_restart(ts, flags)
        assert report.ok and report.drain is not None
        assert report.drain.stop_hook == "node 1: /usr/local/bin/lb (+2 argument(s)) -> exit 0"
        assert fake_target.nodes[1].hooks == [["/usr/local/bin/lb", "out", "node 1; rm -rf /"]]
        assert fake_target.nodes[0].hooks == []
        hook_run = next(text for text in fake_target.nodes[1].received if "/usr/local/bin/lb" in text)
        assert hook_run == "env -- /usr/local/bin/lb out 'node 1; rm -rf /'"  # one word, quoted, no sudo
        assert (await resume_traffic(ts)) == "resume: node 1: /usr/local/bin/lb (+1 argument(s)) -> exit 0"
        assert fake_target.nodes[1].hooks[-1] == ["/usr/local/bin/lb", "in"]


async def test_a_failing_command_hook_changes_nothing(fake_target: FakeTarget) -> None:
    flags = await _new_flags(fake_target)
    fake_target.nodes[0].fail["hook-command"] = "lb: no such worker\n"
    policy = DrainPolicy(stop_hook=CommandHook(command=["/usr/local/bin/lb", "out", "--token=s3cret"]))
    async with fake_target.open() as ts:
        ts.target = fake_target.target.model_copy(update={"drain": policy})
        before = _writes(fake_target)
        with pytest.raises(DrainHookError) as raised:
            await apply_and_restart(ts, flags)
        assert (
            str(raised.value) == "node 0: /usr/local/bin/lb (+2 argument(s)) exited 1: 'lb: no such worker'"
        )
        assert _writes(fake_target) == before
        assert await ts.ledger.traffic_stopped_at() is None


async def test_drain_waits_for_running_and_queued_requests(fake_target: FakeTarget, router: Router) -> None:
    router.in_flight = [(2, 1), (1, 1), (1, 0)]
    async with fake_target.open() as ts:
        ts.target = drained_target(fake_target, router)
        report = await drain(ts, DrainSettings(limit_s=5, first_poll_s=0.01))
        assert report.drained and report.source == "metrics" and report.in_flight_at_start == 3
        assert report.describe().startswith("drain: 3 request(s) in flight finished after")
        router.in_flight = [(5, 2)] * 100
        stuck = await drain(ts, DrainSettings(limit_s=0.2, first_poll_s=0.05))
        assert not stuck.drained and stuck.last_running == 5 and stuck.last_queued == 2
        assert "7 of 7 request(s) still in flight" in stuck.describe()
    async with fake_target.open() as ts:  # nothing listens: a server that is down has nothing to drain
        assert (await drain(ts, DrainSettings(limit_s=1))).source == "down"


async def test_a_restart_stops_traffic_first_and_the_healthy_start_lets_it_back(
    fake_target: FakeTarget, router: Router
) -> None:
    flags = await _new_flags(fake_target)
    router.in_flight = [(1, 0), (0, 0)]
    async with fake_target.open() as ts:
        ts.target = drained_target(fake_target, router)
        report = await apply_and_restart(ts, flags)
        assert report.ok and report.drain is not None and report.drain.drained
        assert report.drain.stop_hook == f"POST http://127.0.0.1:{router.port}/remove_worker -> 200"
        assert (
            "s3cret" not in report.drain.describe()
            and "1 request(s) in flight finished" in report.drain.describe()
        )
        assert router.calls == ["POST /remove_worker?url=http://node0:30000&token=s3cret"]
        assert await ts.ledger.traffic_stopped_at() is not None  # out of service until healthy again
        assert (await resume_traffic(ts)) == f"resume: POST http://127.0.0.1:{router.port}/add_worker -> 200"
        assert router.calls[-1] == 'POST /add_worker?url=http://node0:30000 {"w": 1}'
        assert await ts.ledger.traffic_stopped_at() is None
        assert await resume_traffic(ts) is None  # once only
        # a restart while flagbot's hook already holds the server out (a rollback) calls no stop hook
        await ts.ledger.mark_traffic_stopped()
        again = await restart_target(ts)
        assert again.ok and again.drain is not None and again.drain.stop_hook is None
        assert len(router.calls) == 2


async def test_a_failing_stop_hook_changes_nothing(fake_target: FakeTarget, router: Router) -> None:
    flags = await _new_flags(fake_target)
    router.status["/remove_worker"] = 503
    async with fake_target.open() as ts:
        ts.target = drained_target(fake_target, router)
        with pytest.raises(DrainHookError, match="remove_worker answered 503"):
            await apply_and_restart(ts, flags)
        assert await ts.ledger.traffic_stopped_at() is None
    assert _writes(fake_target) == []


async def test_abort_after_the_grace_lets_traffic_back_and_changes_nothing(
    fake_target: FakeTarget, router: Router
) -> None:
    flags = await _new_flags(fake_target)
    router.in_flight = [(3, 1)] * 100
    async with fake_target.open() as ts:
        ts.target = drained_target(fake_target, router, grace="0.3s", on_timeout="abort")
        with pytest.raises(
            DrainTimeoutError, match=r'4 of 4 request.*on_timeout = "abort": nothing was changed'
        ):
            await apply_and_restart(ts, flags)
        assert await ts.ledger.traffic_stopped_at() is None
    assert [call.split("?")[0] for call in router.calls] == ["POST /remove_worker", "POST /add_worker"]
    assert _writes(fake_target) == []


async def test_a_reload_that_fails_after_the_drain_lets_traffic_back(
    fake_target: FakeTarget, router: Router
) -> None:
    flags = await _new_flags(fake_target)
    fake_target.nodes[1].fail_once["daemon-reload"] = "Failed to reload daemon: boom\n"
    async with fake_target.open() as ts:
        ts.target = drained_target(fake_target, router)
        with pytest.raises(RestartError, match="nothing restarted") as caught:
            await apply_and_restart(ts, flags)
        assert caught.value.report.resumed is not None and "add_worker -> 200" in caught.value.report.resumed
        assert await ts.ledger.traffic_stopped_at() is None
