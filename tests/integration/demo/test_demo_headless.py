"""`flagbot demo` as CI runs it (issue 9, item 1), on testbed instance 215 only.

The headless demo plays the seeds' story through the stand-in against real systemd nodes and
prints the thread: the test reads that text as a newcomer would (the regression 48 -> 26 with
parsed vs effective, the gating warning, isolate's culprit, the revert, the verify) and checks
that nothing is left: no node, mount, namespace, veth or cgroup of the instance, no bot process.
A second test stops an interactive demo with Ctrl-C in the middle of the story.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from PIL import Image

from flagbot_lab.standin.browser import missing
from flagbot_lab.testbed import Testbed, leftovers, unavailable_reason
from flagbot_lab.testbed.system import pid_alive
from tests.support.processes import communicate

INSTANCE = 215
"""The demo tests' own instance: never the session testbed's (201) nor the demo's (1)."""
HEADLESS_TIMEOUT_S = 900.0


@pytest.fixture(autouse=True)
def instance_free(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"testbed unavailable: {reason}")
    if leftovers(INSTANCE):  # a crashed earlier run of this test: the instance is ours to reclaim
        Testbed(INSTANCE, tmp_path / "reclaim", 2).down()


def env() -> dict[str, str]:
    drop = ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL", "SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET")
    return {k: v for k, v in os.environ.items() if k not in drop} | {
        "FLAGBOT_TESTBED_INSTANCE": str(INSTANCE)
    }


async def start_demo(cwd: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "demo",
        "--instance",
        str(INSTANCE),
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env(),
    )


def left_after(cwd: Path) -> list[str]:
    """What the demo left; cleaned afterwards (a killed demo cannot tear down) so the next run starts clean."""
    left = leftovers(INSTANCE)
    if left:
        Testbed(INSTANCE, cwd / "state" / "testbed", 2).down()
    return left


def bot_pid(out: str) -> int:
    found = re.search(r"flagbot serve --http: pid (\d+)", out)
    assert found, out[-3000:]
    return int(found.group(1))


async def test_the_headless_demo_prints_the_story_and_leaves_nothing_behind(tmp_path: Path) -> None:
    started = time.monotonic()
    picture = tmp_path / "demo-thread.png"
    browser = missing()  # CI has Debian's chromium and chromium-driver (make deps): it takes the picture
    process = await start_demo(tmp_path, "--headless", *(() if browser else ("--screenshot", str(picture))))
    try:
        raw_out, raw_err = await communicate(process, HEADLESS_TIMEOUT_S)
    finally:
        left = left_after(tmp_path)
    out, err = raw_out.decode(), raw_err.decode()
    print(f"headless demo: {time.monotonic() - started:.0f} s")  # shown with -s / -rA: the measured runtime
    assert process.returncode == 0, f"{out[-6000:]}\n--- stderr ---\n{err[-3000:]}"
    assert left == []
    assert "Traceback" not in out + err

    thread = out[out.index("#flagbot-ops, as the Slack stand-in recorded it") :]
    # the regression, parsed vs effective side by side (stacked: the table is wider than a phone;
    # the printed thread puts each reply's continuation lines behind a "│")
    parsed = r"max_running_requests \(parsed, server_args\)[\s│]+before: 48 · after: 48 · change: \+0 · verdict: same"
    assert re.search(parsed, thread), thread
    assert re.search(
        r"max_running_requests \(effective\)[\s│]+before: 48 · after: 26 · change: -22 · verdict: changed",
        thread,
    )
    assert "REGRESSED* regressed: the capacity guard decided (max_running_requests: 48 -> 26" in thread
    # the hardware gating warning from preflight
    assert re.search(
        r"--enable-flashinfer-allreduce-fusion needs compute capability 9\.x or 10\.x.*this GPU is 12\.1: "
        r"probably a no-op here",
        thread,
    )
    # isolate's culprit, the revert, the verify
    assert "culprit(s): --enable-fused-moe-sum-all-reduce" in thread
    assert "bob typed: /flagbot revert flags=--enable-flashinfer-allreduce-fusion" in thread
    assert "effective max_running_requests 48 (baseline 48): pass" in thread
    assert re.search(
        r"✓\s+(?:metric: )?max_running_requests>=48 \(parsed 48\)[\s│]+(?:before: )?48\s+(?:· after: )?48",
        thread,
    )
    assert "1/1 expectations hold" in thread
    # the story's verdict and the teardown, as printed
    assert re.search(r"^\[6/6\] digest\s+ok", out, re.MULTILINE), out[-3000:]
    assert "Weekly post-mortem" in thread
    # the try thread's picture, taken in headless Chromium before the teardown (kept as an artefact)
    if browser is None:
        png = picture.read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000
        with Image.open(picture) as image:
            assert image.width >= 1000 and image.height >= 1000
            assert len(image.convert("RGB").getcolors(1 << 24) or []) > 50  # not a blank page
        artefacts = Path("state/artifacts")
        artefacts.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(picture, artefacts / "demo-thread.png")
    assert "demo OK: 6 steps reached their expected outcome" in out
    assert f"testbed instance {INSTANCE}; nothing left behind" in out
    assert not pid_alive(bot_pid(out))


async def test_ctrl_c_in_the_middle_of_the_story_tears_everything_down(tmp_path: Path) -> None:
    process = await start_demo(tmp_path, "--port", "0")
    assert process.stdout is not None
    seen: list[str] = []
    page = None
    try:
        async with asyncio.timeout(180):
            while page is None:
                line = (await process.stdout.readline()).decode()
                assert line, "".join(seen)  # the demo ended before its page was up
                seen.append(line)
                if line.startswith("Slack stand-in page: "):
                    page = line.split(": ", 1)[1].strip()
        async with httpx.AsyncClient(trust_env=False) as client:
            shown = await client.get(page)  # the printed URL is the stand-in's page
        assert shown.status_code == 200
        assert "flagbot stand-in" in shown.text
        process.send_signal(signal.SIGINT)  # while the baseline runs
        raw_out, _ = await communicate(process, 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        left = left_after(tmp_path)
    out = "".join(seen) + raw_out.decode()
    assert process.returncode == 130, out[-3000:]
    assert left == []
    assert "SIGINT: stopping, tearing everything down" in out
    assert "nothing left behind" in out
    assert not pid_alive(bot_pid(out))
