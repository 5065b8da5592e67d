"""The README's testbed commands, as a newcomer types them: twin up, status, a dry-run try, twin down.

On an instance of its own (216), from a fresh working directory (where `state/` is created),
so it neither touches the session's nodes (201) nor a running demo (1). The README shows the
default instance; `--instance 216` is the only difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from flagbot_lab.testbed import leftovers, unavailable_reason
from tests.support.processes import communicate

pytestmark = pytest.mark.asyncio(loop_scope="session")
INSTANCE = "216"
FLAGBOT = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"


async def _flagbot(cwd: Path, *args: str, timeout: float = 300) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL")}
    process = await asyncio.create_subprocess_exec(
        FLAGBOT, *args, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await communicate(process, timeout)
    return process.returncode or 0, out.decode(), err.decode()


async def test_the_readme_twin_commands_work_from_a_fresh_directory(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"testbed unavailable: {reason}")
    code, out, err = await _flagbot(
        tmp_path, "twin", "up", "--scenario", "seed-gb10", "--nodes", "2", "--instance", INSTANCE
    )
    try:
        assert code == 0, err
        assert "/health is 200" in out
        config = f"state/twin-{INSTANCE}.toml"
        assert (tmp_path / config).is_file()
        code, out, err = await _flagbot(tmp_path, "--config", config, "db", "upgrade")
        assert code == 0, err
        code, out, err = await _flagbot(tmp_path, "--config", config, "status", "--json")
        assert code == 0, err
        assert json.loads(out)["health"] == 200
        code, out, err = await _flagbot(
            tmp_path, "--config", config, "try", "--enable-fused-moe-sum-all-reduce", "--dry-run", "--json"
        )
        assert code == 0, err
        assert json.loads(out)["verdict"] == "dry-run"
    finally:
        code, out, err = await _flagbot(tmp_path, "twin", "down", "--instance", INSTANCE)
        assert code == 0, err
        assert "nothing left behind" in out
        assert leftovers(int(INSTANCE)) == []
