"""The loop's integration tests run `flagbot` as a user would, against the two-node testbed.

Each test gets its own database and a small benchmark profile (`probe`: two levels, two
repeats, short requests), so a whole story takes minutes, not hours. `on_baseline` (from the
target tests) puts both nodes back on the vendor line afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bot.store import Store
from bot.target.readiness import Backoff
from flagbot_lab.testbed import Testbed, leftovers
from tests.support.processes import communicate

FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"
PROFILE = """
[bench.probe]
concurrency = [8, 32]
repeats = 2
input_len = 256
output_len = 64
num_requests = 16
warmup_requests = 1
"""


def write_config(bed: Testbed, tmp_path: Path) -> Path:
    text = bed.config_path.read_text().replace(
        'sglang_version = "0.5.10"', 'sglang_version = "0.5.10"\nbenchmark_profile = "probe"', 1
    )
    path = tmp_path / "flagbot.toml"
    path.write_text(text + PROFILE + f'\n[database]\nsqlite_path = "{tmp_path / "flagbot.db"}"\n')
    return path


@contextmanager
def booted(bed: Testbed) -> Iterator[Testbed]:
    """`bed` up and healthy for the block (a crashed run's nodes of its instance replaced), then
    down with nothing of its instance left: for a test that needs nodes of another kind than the
    session's."""
    try:
        bed.up(replace=True)
        bed.wait_healthy(timeout=180)
        yield bed
    finally:
        bed.down()
        assert leftovers(bed.instance) == []


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    return base | extra


async def start(config: Path, *args: str, **extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        FLAGBOT,
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(**extra),
    )


async def flagbot(config: Path, *args: str, timeout: float = 600, **extra: str) -> tuple[int, str, str]:
    process = await start(config, *args, **extra)
    out, err = await communicate(process, timeout)
    return process.returncode or 0, out.decode(), err.decode()


async def flagbot_json(config: Path, *args: str, **extra: str) -> tuple[int, Any, str]:
    code, out, err = await flagbot(config, *args, "--json", **extra)
    assert "Traceback" not in err, err
    assert out.strip(), f"no output; stderr: {err}"
    return code, json.loads(out), err


def store_of(config: Path) -> Store:
    return Store.open(f"sqlite:///{config.parent / 'flagbot.db'}")


async def wait_for(condition: Any, *, timeout: float, what: str) -> Any:
    """Poll `condition()` with a short backoff until it returns something truthy."""
    backoff = Backoff(0.1, 1.5, 1.0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await backoff.sleep()
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
