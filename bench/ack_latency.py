"""How fast does flagbot acknowledge slash commands while an experiment is benchmarking? (aim: p99 <= 100 ms)

Boots a two-node testbed running the twin (instance 215 by default, its own temporary base dir),
starts the local Slack stand-in and flagbot's Slack app in HTTP mode (real Bolt, signed
requests), starts `/flagbot verify output_throughput>=1` (a benchmark on the target, holding its
lease), and once that benchmark is running fires `--commands` slash commands at once (a mix of
`help`, `log`, `status` and a `try` refused because the target is busy). Prints p50 / p99 / max
of the time from sending each request to Slack's receiving the bot's answer (the ack). Needs root
and the testbed's Debian packages. Prints figures; not a test.

    .venv/bin/python bench/ack_latency.py [--commands 50] [--instance 215]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.store import Store
from bot.store.leases import current
from flagbot_lab.standin.model import Channel, User
from flagbot_lab.standin.outbound import signed, slash_form
from flagbot_lab.testbed import Testbed, TestbedError, unavailable_reason

SECRET = "ack-latency-secret"
TOKEN = "xoxb-ack-latency"
CHANNEL = "C0FLAGBOT"
PROFILE = """
[bench.probe]
concurrency = [8, 32]
repeats = 3
input_len = 256
output_len = 128
num_requests = 32
warmup_requests = 1

[slack.rbac]
operators = ["U0OPER"]
viewers = ["*"]
"""
USER = User("U0OPER", "bob", "Bob Operator")
ROOM = Channel("C0FLAGBOT", "flagbot-ops")
MIX = ("help", "log", "status", "try add --enable-metrics")
"""What the burst asks: answers from the store, an SSH read of the target, a try refused (busy)."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _wait_port(host: str, port: int, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    delay = 0.05
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            return
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(delay)  # a readiness poll with backoff, not a fixed wait
            delay = min(delay * 1.5, 0.5)


async def _slash(http: Any, url: str, text: str) -> float:
    """One signed slash command, as Slack sends it; the time until the bot's answer (ms)."""
    body = slash_form(command="/flagbot", text=text, user=USER, channel=ROOM, response_url=url + "/nowhere")
    request = signed(url + "/slack/events", body, "application/x-www-form-urlencoded", SECRET)
    started = time.perf_counter()
    async with http.post(request.url, data=request.body, headers=request.headers()) as answer:
        await answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{text!r}: HTTP {answer.status}")
    return (time.perf_counter() - started) * 1000


async def measure(bed: Testbed, base: Path, commands: int, mix: tuple[str, ...]) -> list[float]:
    """The bot (`flagbot serve --http`) and the stand-in (its Web API) each run in their own
    process, as Slack and the bot do; this process only sends the signed requests and times them."""
    import aiohttp

    config = base / "flagbot.toml"
    text = bed.config_path.read_text().replace(
        'sglang_version = "0.5.10"', 'sglang_version = "0.5.10"\nbenchmark_profile = "probe"', 1
    )
    config.write_text(text + PROFILE + f'\n[database]\nsqlite_path = "{base / "flagbot.db"}"\n')
    sync = Store.open(f"sqlite:///{base / 'flagbot.db'}")
    sync.upgrade()
    port = free_port()
    bot_url = f"http://127.0.0.1:{port}"
    slack = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "flagbot_lab.standin",
        "--signing-secret",
        SECRET,
        "--bot-token",
        TOKEN,
        "--bot-url",
        bot_url,
        stdout=asyncio.subprocess.PIPE,
    )
    bot: Any = None
    try:
        assert slack.stdout is not None
        api = (await slack.stdout.readline()).decode().split()[1] + "/api/"
        env = {**os.environ, "SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET}
        flagbot = shutil.which("flagbot", path=str(Path(sys.executable).parent)) or "flagbot"
        bot = await asyncio.create_subprocess_exec(
            flagbot,
            "--config",
            str(config),
            "serve",
            "--http",
            f"127.0.0.1:{port}",
            "--slack-api",
            api,
            env=env,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await _wait_port("127.0.0.1", port)
        async with aiohttp.ClientSession() as http:
            await _slash(http, bot_url, "verify output_throughput>=1")
            delay = 0.05
            while current(sync, "twin") is None:  # the benchmark holds the target's lease
                await asyncio.sleep(delay)
                delay = min(delay * 1.5, 0.5)
            return list(
                await asyncio.gather(*(_slash(http, bot_url, mix[k % len(mix)]) for k in range(commands)))
            )
    finally:
        for process in (bot, slack):
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        sync.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--instance", type=int, default=215)
    parser.add_argument("--only", help="send only this command text (e.g. help) instead of the mix")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="flagbot-ack-") as tmp:
        bed = Testbed(args.instance, Path(tmp), nodes=2, scenario="seed-gb10")
        try:
            bed.up(replace=True)
            bed.wait_healthy(timeout=180)
            mix = (args.only,) if args.only else MIX
            latencies = asyncio.run(measure(bed, Path(tmp), args.commands, mix))
        except TestbedError as exc:
            print(f"testbed: {exc}", file=sys.stderr)
            return 1
        finally:
            bed.down()
    print(f"{len(latencies)} slash commands at once while a benchmark ran on the target")
    print(
        f"ack latency ms: p50 {statistics.median(latencies):.1f}  p99 {percentile(latencies, 0.99):.1f}  "
        f"max {max(latencies):.1f}  (aim: p99 <= 100)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
