"""A fleet of fake targets: many two-node deployments, each node an in-process SSH server playing
systemd (`tests/support/fake_node.py`), and one HTTP server answering every target's `/health`,
`/server_info` and `/metrics` under its own path (`http://127.0.0.1:PORT/t/NAME`).

Why a fleet helper: the drift watch and the scheduled checks run per target, all at once when
they are due (`flagbot serve`'s scheduler starts each due job as a task); whether SSH connections
and channels stay bounded shows only with many targets. The fleet's drift test
(tests/unit/app/test_drift_fleet.py) and the fleet bench (bench/fleet_scale.py) both use it.

Each node's journal is an SGLang 0.5.10 start with `--tp 2` (tests/fixtures/sglang-releases/
0.5.10.log, written from the release's logging calls): node 0 prints everything (capacity line,
ready line), node 1 its `server_args` (`node_rank=1`) and its TP1 lines. `/server_info` agrees
with the capacity line (48 requests, 865630 tokens), so the observe step reads a healthy start.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.config import Settings
from bot.store import AsyncStore
from bot.store.checks import add_check
from bot.store.experiments import create_experiment
from bot.store.models import utcnow
from bot.store.schedule_models import VerificationCheck
from bot.store.snapshots import get_snapshot
from bot.target.observe import observe
from bot.target.session import TargetSession
from tests.support.fake_node import UNIT, FakeNode, FakeSystemd, Keys, SharedGauges
from tests.support.host_flags import host_help

START_LOG = Path(__file__).parents[1] / "fixtures" / "sglang-releases" / "0.5.10.log"
SGLANG_VERSION = "0.5.10"
SERVER_INFO = {
    "version": SGLANG_VERSION,
    "max_total_num_tokens": 865630,
    "internal_states": [{"effective_max_running_requests_per_dp": 48}],
}
METRICS = "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0\n"
NODES_PER_TARGET = 2
COMMAND_S = 0.02
"""How long each node takes to answer a command: a real `systemctl show` or `journalctl` takes
10-30 ms; answered at once in-process, no two commands would ever overlap and the channel peaks
would say nothing."""
NO_BENCHMARK = "capacity-only"
"""The checks' profile: not in `[bench]`, so a check observes and judges flags and effective
capacity and runs no load generator (`bot.app.checks.probe_target`: "not benchmarked")."""


def target_name(index: int) -> str:
    return f"t{index:02d}"


def node_journal(rank: int, invocation: str, started: float) -> list[str]:
    """journalctl's JSON entries of one node's start (see the module doc for what each node prints)."""
    lines = START_LOG.read_text().splitlines()
    if rank > 0:
        lines = [
            line.replace("node_rank=0", f"node_rank={rank}")
            for line in lines
            if "server_args=" in line or f" TP{rank}]" in line
        ]
    return [
        json.dumps(
            {
                "__REALTIME_TIMESTAMP": str(int((started + index) * 1e6)),
                "__CURSOR": f"c-{rank}-{index}",
                "_SYSTEMD_INVOCATION_ID": invocation,
                "MESSAGE": line,
                "_PID": "42",
            }
        )
        for index, line in enumerate(lines)
    ]


@dataclass
class Fleet:
    """The fake nodes per target (node 0 first), their keys, and the HTTP server's port."""

    nodes: dict[str, list[FakeNode]]
    keys: Keys
    known_hosts: Path
    http_port: int
    gauges: SharedGauges = field(default_factory=SharedGauges)

    def ports(self) -> dict[str, list[int]]:
        return {name: [node.port for node in nodes] for name, nodes in self.nodes.items()}

    def settings(self, state_dir: Path) -> Settings:
        """flagbot's settings for every target of this fleet (`fleet_settings`)."""
        return fleet_settings(
            self.ports(),
            key_path=self.keys.client_key,
            known_hosts=self.known_hosts,
            http_port=self.http_port,
            state_dir=state_dir,
        )

    def restart_counts(self) -> None:
        """Count connections and channels from here (the peaks: what is open now)."""
        self.gauges.connections.restart()
        self.gauges.channels.restart()
        for nodes in self.nodes.values():
            for node in nodes:
                node.logins, node.peak = 0, node.running

    def counts(self) -> dict[str, int]:
        """Connections and channels since `restart_counts`: totals, global peaks, the most on one node."""
        every = [node for nodes in self.nodes.values() for node in nodes]
        return {
            "connections_opened": self.gauges.connections.opened,
            "connections_peak": self.gauges.connections.peak,
            "connections_open": self.gauges.connections.now,
            "most_logins_per_node": max(node.logins for node in every),
            "channels_opened": self.gauges.channels.opened,
            "channels_peak": self.gauges.channels.peak,
            "channels_peak_per_node": max(node.peak for node in every),
        }


def _http_app() -> web.Application:
    async def health(request: web.Request) -> web.Response:
        return web.Response(text="")

    async def server_info(request: web.Request) -> web.Response:
        return web.json_response(SERVER_INFO)

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=METRICS)

    app = web.Application()
    app.router.add_get("/t/{target}/health", health)
    app.router.add_get("/t/{target}/server_info", server_info)
    app.router.add_get("/t/{target}/metrics", metrics)
    return app


@asynccontextmanager
async def running_fleet(
    directory: Path, targets: int, *, command_s: float = COMMAND_S
) -> AsyncIterator[Fleet]:
    """`targets` targets of two nodes and the HTTP server, keys and known_hosts under `directory`;
    all stopped when the block ends. Each command takes `command_s` on a node."""
    directory.mkdir(parents=True, exist_ok=True)
    keys = Keys.make(directory, targets * NODES_PER_TARGET)
    keys.client_key.chmod(0o600)
    help_text = host_help()
    gauges = SharedGauges()
    started = time.time() - 600
    nodes: dict[str, list[FakeNode]] = {}
    every: list[FakeNode] = []
    runner = web.AppRunner(_http_app(), access_log=None)
    await runner.setup()
    try:
        for index in range(targets):
            group = []
            for rank in range(NODES_PER_TARGET):
                systemd = FakeSystemd(rank=rank)
                systemd.journal = node_journal(rank, systemd.invocation, started)
                node = FakeNode(
                    systemd,
                    sglang_version=SGLANG_VERSION,
                    help_text=help_text,
                    shared=gauges,
                    delay_s=command_s,
                )
                await node.start(keys.host_keys[len(every)], keys.client_public)
                every.append(node)
                group.append(node)
            nodes[target_name(index)] = group
        known_hosts = keys.known_hosts([node.port for node in every])
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = int(runner.addresses[0][1])
        yield Fleet(nodes, keys, known_hosts, port, gauges)
    finally:
        await runner.cleanup()
        for node in every:
            await node.stop()


def fleet_settings(
    ports: Mapping[str, Sequence[int]], *, key_path: Path, known_hosts: Path, http_port: int, state_dir: Path
) -> Settings:
    """flagbot's settings for the fleet's targets (`ports`: each target's node ports, node 0 first)."""
    targets: dict[str, Any] = {
        name: {
            "unit": UNIT,
            "base_url": f"http://127.0.0.1:{http_port}/t/{name}",
            "nodes": [{"host": "127.0.0.1", "port": port, "user": "ops"} for port in node_ports],
            "ssh": {
                "key_path": str(key_path),
                "known_hosts": str(known_hosts),
                "connect_timeout": 30,
                "command_timeout": 60,
            },
        }
        for name, node_ports in ports.items()
    }
    return Settings.model_validate(
        {"targets": targets, "database": {"sqlite_path": str(state_dir / "flagbot.db")}}
    )


async def seed_known_good(settings: Settings, store: AsyncStore, target: str, cache_dir: Path) -> int:
    """What `flagbot observe` leaves: the running start stored and made known-good; its snapshot id."""
    async with TargetSession.open(target, settings.targets[target], store=store) as ts:
        obs = await observe(ts, cache_dir=cache_dir, promote=True)
    if not obs.healthy or obs.snapshot_id is None:
        raise RuntimeError(f"{target}: the fleet's start did not observe as healthy: {obs.health}")
    return obs.snapshot_id


async def seed_checks(
    store: AsyncStore, target: str, snapshot_id: int, delays: Sequence[timedelta]
) -> list[VerificationCheck]:
    """A kept try on `target` concluded on its known-good start, and one check per delay, all due
    now. The expectation is a capacity one (`max_running_requests>=48`) and the profile is
    `NO_BENCHMARK`: the checks observe, no load generator runs."""
    snapshot = await store.run(get_snapshot, store.store, snapshot_id)
    if snapshot is None:
        raise LookupError(f"no snapshot #{snapshot_id}")
    expected = {
        "snapshot_id": snapshot_id,
        "flags": snapshot.requested_flags,
        "max_running_requests": snapshot.effective.get("max_running_requests"),
        "summary": "kept: effective max_running_requests 48",
        "expect": ["max_running_requests>=48"],
    }
    experiment = await store.run(
        create_experiment, store.store, target=target, playbook="try", params={}, actor="bench:fleet"
    )
    now = utcnow()
    return [
        await store.run(
            add_check,
            store.store,
            target=target,
            experiment_id=experiment.id,
            after=delay,
            due_at=now,
            expected=expected,
            created_by="bench:fleet",
            profile=NO_BENCHMARK,
            channel="C0FLEET",
        )
        for delay in delays
    ]
