"""`status target=all`: one line per target, read concurrently under a bound; a target that
cannot be read is its own line and the table still comes; the checks are counted by target."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.app.context import AppContext
from bot.app.fleet import COLUMNS, count_checks, failed_read_kind, fleet_status, wants_fleet
from bot.app.status import TargetStatus
from bot.commands.grammar import parse_command
from bot.config import Settings
from bot.config.schema import Node
from bot.store import AsyncStore, Store
from bot.store.checks import list_checks, record_check_run
from bot.store.experiments import create_experiment, update_experiment
from bot.target.errors import ConnectFailedError, HostKeyError
from bot.target.evidence import TableBlock
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.support.schedule import T0, concluded_check
from tests.unit.target.conftest import serving


def _targets(*names: str) -> dict[str, object]:
    return {name: {"unit": "sglang.service", "nodes": [{"host": "127.0.0.1", "port": 9}]} for name in names}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[AsyncStore]:
    opened = Store.open(None, sqlite_path=tmp_path / "state" / "flagbot.db")
    opened.upgrade()
    wrapped = AsyncStore(opened)
    try:
        yield wrapped
    finally:
        await wrapped.aclose()


def _settings(tmp_path: Path, targets: dict[str, object], **more: object) -> Settings:
    return Settings.model_validate(
        {"targets": targets, "database": {"sqlite_path": str(tmp_path / "x.db")}, **more}
    )


def test_the_fleet_is_all_or_no_target_with_several(tmp_path: Path) -> None:
    one = _settings(tmp_path, _targets("a"), default_target="a")
    several = _settings(tmp_path, _targets("a", "b"), default_target="a")
    assert not wants_fleet(one, parse_command(["status"]))  # a fleet of one: its own status
    assert wants_fleet(one, parse_command(["status", "target=all"]))
    assert wants_fleet(several, parse_command(["status"]))
    assert not wants_fleet(several, parse_command(["status", "target=b"]))


async def test_one_target_down_is_its_line_and_the_table_still_comes(
    tmp_path: Path, store: AsyncStore
) -> None:
    async with serving(tmp_path, [FakeNode(FakeSystemd(rank=0))]) as fake:
        closed = fake.keys.known_hosts([9], path=tmp_path / "closed_known_hosts")  # known, not listening
        ssh = fake.target.ssh.model_copy(
            update={"known_hosts": closed, "connect_timeout": timedelta(seconds=1)}
        )
        closed_target = fake.target.model_copy(
            update={"nodes": [Node(host="127.0.0.1", port=9, user="ops")], "ssh": ssh}
        )
        targets: dict[str, object] = {"up": fake.target, "down": closed_target}
        ctx = AppContext(_settings(tmp_path, targets), store)
        row = await store.run(
            create_experiment, store.store, target="up", playbook="try", params={}, actor="t"
        )
        assert row.id is not None
        await store.run(update_experiment, store.store, row.id, status="succeeded", verdict="improved")
        fleet = await fleet_status(ctx)
    up, down = fleet.rows
    assert (up.target, up.reachable, up.running, up.known_good) == ("up", "yes", "1/1 running", "-")
    assert up.last_text() == f"#{row.id} try succeeded improved"
    assert (down.target, down.reachable) == ("down", "unreachable"), down.error
    assert fleet.unreachable == ["down"]
    [table] = fleet.blocks()
    assert isinstance(table, TableBlock) and table.columns == COLUMNS and len(table.rows) == 2
    assert table.rows[1][1].startswith("unreachable: ")
    assert fleet.to_json()["targets"][0]["last_experiment"]["verdict"] == "improved"


async def test_reads_run_concurrently_and_never_more_than_the_bound(
    tmp_path: Path, store: AsyncStore
) -> None:
    names = [f"t{k}" for k in range(6)]
    ctx = AppContext(_settings(tmp_path, _targets(*names)), store)
    bound = 2
    active, most = 0, 0
    full = asyncio.Event()

    async def read(_: AppContext, target: str) -> TargetStatus:
        nonlocal active, most
        active += 1
        most = max(most, active)
        if active >= bound:
            full.set()
        await full.wait()  # nobody finishes before `bound` reads are in flight together
        active -= 1
        if target == "t3":
            raise ConnectFailedError("127.0.0.1:9", "connection refused")
        if target == "t4":
            raise RuntimeError("a bug in one read")
        return TargetStatus(target, "sglang.service", 200, [], [], {}, None, None, None)

    fleet = await fleet_status(ctx, read=read, limit=bound)
    assert most == bound
    assert [row.target for row in fleet.rows] == names  # config order, whatever finished first
    assert [row.reachable for row in fleet.rows] == ["yes", "yes", "yes", "unreachable", "error", "yes"]
    assert fleet.rows[4].error == "a bug in one read"


def test_a_failed_read_says_whose_side_it_is_on() -> None:
    assert failed_read_kind(HostKeyError("127.0.0.1:22", None)) == "not connected"
    assert failed_read_kind(ConnectFailedError("127.0.0.1:9", "refused")) == "unreachable"
    assert failed_read_kind(TimeoutError()) == "unreachable"
    assert failed_read_kind(ValueError("x")) == "error"


def test_checks_are_counted_by_target_from_one_list(tmp_path: Path) -> None:
    store = Store.open(None, sqlite_path=tmp_path / "c.db")
    store.upgrade()
    try:
        failed = concluded_check(store, due_at=T0 - timedelta(hours=1))
        concluded_check(store, due_at=T0 - timedelta(minutes=5))  # due, not run yet
        concluded_check(store, due_at=T0 + timedelta(hours=2))
        assert failed.id is not None
        record_check_run(store, failed.id, result="fail", summary="capacity 40, expected 48", ran_at=T0)
        checks = list_checks(store)
    finally:
        store.close()
    counts = count_checks(checks, ["lab", "other"], T0)
    assert counts["other"].text() == "none due"
    lab = counts["lab"]
    assert (lab.scheduled, lab.overdue, lab.failed, lab.paused) == (2, 1, 1, 0)
    assert lab.next_due == T0 - timedelta(minutes=5)
    assert lab.text() == "2 scheduled, 1 overdue, 1 failed"
