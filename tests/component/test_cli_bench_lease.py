"""`flagbot bench` takes the target's lease first: a held lease refuses it before any load, and
`wait=` waits for the holder to finish.

The real CLI in a subprocess (as tests/component/bench does), on SQLite in tmp_path. The target's
base_url is a local socket that listens but never accepts: any load generator connecting to it
would be seen in its backlog.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select

from bot.store import Store
from bot.store.experiments import create_experiment
from bot.store.leases import acquire, current, release
from bot.store.models import MeasurementSet
from tests.component.test_cli import FLAGBOT, flagbot

BOB = "slack:bob:9f8e7d6c"


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def configure(tmp_path: Path, port: int) -> tuple[dict[str, str], Store]:
    db = tmp_path / "state" / "flagbot.db"
    (tmp_path / "flagbot.toml").write_text(
        f"""default_target = "twin"
[database]
sqlite_path = "{db}"
[targets.twin]
unit = "sglang-qwen.service"
base_url = "http://127.0.0.1:{port}"
benchmark_profile = "small"
nodes = [{{ host = "127.0.0.1" }}]
[bench.small]
concurrency = [1]
input_len = 64
output_len = 8
num_requests = 1
repeats = 1
warmup_requests = 0
"""
    )
    env = {"FLAGBOT_CONFIG": str(tmp_path / "flagbot.toml")}
    upgraded = flagbot("db", "upgrade", cwd=tmp_path, env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    return env, Store.open(None, sqlite_path=db)


@pytest.fixture(autouse=True)
def _sqlite_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLAGBOT_DATABASE_URL", raising=False)


def sets(store: Store) -> list[MeasurementSet]:
    with Session(store.engine) as session:
        return list(session.exec(select(MeasurementSet)).all())


def test_a_held_lease_refuses_bench_before_any_load(tmp_path: Path, listener: socket.socket) -> None:
    env, store = configure(tmp_path, listener.getsockname()[1])
    try:
        exp = create_experiment(store, target="twin", playbook="try", params={}, actor="slack:bob")
        acquire(
            store, "twin", holder=BOB, host="bot-1", pid=4242, purpose="try", experiment_id=exp.id, ttl_s=3600
        )

        refused = flagbot("bench", cwd=tmp_path, env=env)

        assert refused.returncode == 1, refused.stderr
        first = refused.stderr.splitlines()[0]
        assert first.startswith(
            f"error: twin is busy: held by {BOB} on bot-1 (pid 4242) for experiment #{exp.id} (try) since "
        )
        assert "wait=DURATION" in first
        with pytest.raises(BlockingIOError):  # nobody connected to the target
            listener.accept()
        assert sets(store) == []  # no measurement set was even started
        lease = current(store, "twin")
        assert lease is not None and lease.holder == BOB
    finally:
        store.close()


def test_bench_waits_for_the_lease_then_runs_and_releases_it(tmp_path: Path) -> None:
    env, store = configure(tmp_path, closed_port())  # once it runs, the load fails at once
    try:
        acquire(store, "twin", holder=BOB, host="bot-1", pid=4242, purpose="try", ttl_s=3600)
        process = subprocess.Popen(
            [FLAGBOT, "bench", "wait=2m"],
            cwd=tmp_path,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()

        def read() -> None:
            for line in process.stderr or ():
                lines.put(line)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            waiting = lines.get(timeout=60)
            assert (
                waiting.startswith("waiting (up to ") and f"for the lease of twin: held by {BOB}" in waiting
            )
            assert process.poll() is None  # still waiting, not refused
            while_waiting = current(store, "twin")
            assert while_waiting is not None and while_waiting.holder == BOB
            assert release(store, "twin", holder=BOB)
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        reader.join(timeout=10)
        rest = "".join(lines.queue)
        assert process.returncode == 2, rest  # it got the lease and ran: the load failed on the closed port
        assert "benchmark failed" in rest and "busy" not in rest
        assert current(store, "twin") is None  # released although the run failed
    finally:
        store.close()
