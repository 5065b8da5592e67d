"""A server on 127.0.0.1 (issue 20 item 4), on the two-node testbed: `status`, `config check
--connect` and a tiny `bench` reach node 0's twin through an SSH forward and say so.

The testbed's units run the twin with `--host 0.0.0.0` (`flagbot_lab.testbed.node.prepare`);
this module's fixture rewrites both nodes' unit to `--host 127.0.0.1` (SGLang's own default),
restarts both ranks, and puts the units back afterwards. The bot host (this test) then cannot
reach node 0's port on the bridge: asserted first, so a pass means the forward carried it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.target.http_route import WAY_WORDS, answers_directly
from bot.target.readiness import wait_ready
from bot.target.restart import restore_vendor_and_restart
from bot.target.session import TargetSession
from flagbot_lab.testbed import UNIT, Testbed
from flagbot_lab.testbed.layout import HTTP_PORT
from tests.integration.target import support
from tests.support.processes import run_flagbot

pytestmark = pytest.mark.asyncio(loop_scope="session")
store, ts = support.store, support.ts  # fixtures used by this module

PUBLIC, LOOPBACK = "--host 0.0.0.0", "--host 127.0.0.1"
FORWARD = WAY_WORDS["ssh"]
TINY = """
[bench.tiny]
concurrency = [1]
num_requests = 2
rounds = 1
repeats = 1
input_len = 16
output_len = 4
warmup_requests = 0
"""


async def _restart_and_wait(session: TargetSession) -> None:
    """Reload the edited units and restart both ranks (forced: the units changed under flagbot)."""
    report = await restore_vendor_and_restart(session, force=True)
    previous = {node.node: node.old_invocation for node in report.nodes}
    result = await wait_ready(
        session.nodes, base_url=await session.http_base(), timeout=180, previous=previous
    )
    assert result.ready, result.to_json()


@pytest_asyncio.fixture(loop_scope="session")
async def loopback_only(testbed: Testbed, ts: TargetSession) -> AsyncIterator[None]:
    units = [testbed.layout.root(k) / "etc/systemd/system" / UNIT for k in range(len(testbed.addresses))]
    originals = [unit.read_text() for unit in units]
    assert all(PUBLIC in text for text in originals), originals[0]
    try:
        for unit, text in zip(units, originals, strict=True):
            unit.write_text(text.replace(PUBLIC, LOOPBACK))
        await _restart_and_wait(ts)
        yield
    finally:
        for unit, text in zip(units, originals, strict=True):
            unit.write_text(text)
        await ts.http.close()  # the route of the loopback-only server; the baseline answers directly
        await _restart_and_wait(ts)


@pytest.fixture
def config(testbed: Testbed, tmp_path: Path) -> Path:
    """The testbed's own config with a tiny benchmark profile and a database of this test's."""
    path = tmp_path / "flagbot.toml"
    path.write_text(
        testbed.config_path.read_text() + TINY + f'\n[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n'
    )
    return path


async def test_status_config_check_and_bench_go_through_the_forward(
    testbed: Testbed, config: Path, loopback_only: None
) -> None:
    assert not await answers_directly(testbed.addresses[0], HTTP_PORT)  # loopback only, truly
    assert (await run_flagbot(config, "db", "upgrade", timeout=120))[0] == 0

    code, out, err = await run_flagbot(config, "status", "--json", timeout=180)
    assert code == 0, err
    status = json.loads(out)
    assert status["health"] == 200
    assert status["http_way"].startswith(FORWARD), status["http_way"]
    code, out, err = await run_flagbot(config, "status", timeout=180)
    assert code == 0 and f"HTTP endpoint: {FORWARD}" in out, out + err

    code, out, err = await run_flagbot(config, "config", "check", "--connect", timeout=180)
    assert code == 0, out + err
    assert f"ok: twin http_via: {FORWARD}" in out, out
    assert f"ok: twin http: {testbed.layout.base_url}/health answered 200" in out, out

    code, out, err = await run_flagbot(config, "bench", "profile=tiny", timeout=300)
    assert code == 0, out + err
    assert f"HTTP endpoint: {FORWARD}" in out and "stored as measurement set #" in out, out
