"""Fixtures: two fake systemd nodes behind in-process SSH servers, and a target config for them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest_asyncio

from bot.config.schema import Node, SSHSettings, Target, TargetTimeouts
from bot.target.session import TargetSession
from tests.support.fake_node import FakeNode, FakeSystemd, Keys


@dataclass
class FakeTarget:
    nodes: list[FakeNode]
    keys: Keys
    target: Target
    audit: list[tuple[str, str]]

    def session(self) -> TargetSession:
        return TargetSession.build(
            "fake", self.target, audit=lambda node, text: self.audit.append((node, text))
        )

    def open(self) -> AbstractAsyncContextManager[TargetSession]:
        return TargetSession.open(
            "fake", self.target, audit=lambda node, text: self.audit.append((node, text))
        )

    @property
    def received(self) -> list[str]:
        return [text for node in self.nodes for text in node.received]


def make_target(keys: Keys, ports: list[int], **ssh: object) -> Target:
    settings = SSHSettings.model_validate(
        {
            "key_path": keys.client_key,
            "known_hosts": keys.known_hosts(ports),
            "sudo": True,
            "connect_timeout": 2,
            "command_timeout": 3,
            **ssh,
        }
    )
    nodes = [Node(host="127.0.0.1", port=port, user="ops") for port in ports]
    return Target(
        unit="sglang-qwen.service",
        nodes=nodes,
        ssh=settings,
        base_url="http://127.0.0.1:9",
        timeouts=TargetTimeouts.model_validate({"stop": 1}),
    )


@asynccontextmanager
async def serving(tmp_path: Path, nodes: list[FakeNode]) -> AsyncIterator[FakeTarget]:
    """`nodes` behind their SSH servers, and the target config naming them; stopped afterwards."""
    keys = Keys.make(tmp_path, len(nodes))
    for node, key in zip(nodes, keys.host_keys, strict=True):
        await node.start(key, keys.client_public)
    try:
        yield FakeTarget(nodes, keys, make_target(keys, [n.port for n in nodes]), [])
    finally:
        for node in nodes:
            await node.stop()


@pytest_asyncio.fixture
async def fake_target(tmp_path: Path) -> AsyncIterator[FakeTarget]:
    async with serving(tmp_path, [FakeNode(FakeSystemd(rank=k)) for k in range(2)]) as target:
        yield target
