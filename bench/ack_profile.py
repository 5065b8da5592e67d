"""What one slash command's acknowledgement costs the bot, in CPU and in Python calls (issue 16, item 9).

`bench/ack_latency.py` times acks on a loaded testbed, and its figures spread from 40 to 260 ms
between runs of the same commit: the acks queue behind whatever the benchmark in flight is doing.
This script removes the testbed and the benchmark, so two commits can be compared on a machine
that is not quiet: it runs the real Slack app (real Bolt, HTTP mode, signed requests) in this
process against the local Slack stand-in, holds the target's lease in the store (so `try` is
refused as busy without touching a node), fires `--bursts` bursts of `--commands` slash commands
at once (`help`, `log`, a refused `try`), and prints per ack:

- the process's CPU time (user + system, every thread: the store runs in worker threads), the
  median over the bursts;
- the number of Python function calls on the event loop's thread (cProfile, one burst): a count,
  not a time, so another process's load does not move it;
- the functions of flagbot with the most calls, to see where the calls go;
- the store's round trips (through `AsyncStore.run`, by function) and SQL statements per ack, in
  the same burst: the work off the event loop's thread, which the call count does not see.

Runs on the commit checked out next to it (it imports `bot` from there), so the same file can be
copied into an older checkout: it finds the stand-in in `flagbot_lab.standin` or, before the lab
moved out, in `bot.slack.standin`. Prints figures; not a test. No root, no testbed.

    .venv/bin/python bench/ack_profile.py [--commands 50] [--bursts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import importlib
import pstats
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SECRET = "ack-profile-secret"

ROUND_TRIPS: collections.Counter[str] = collections.Counter()
"""The profiled burst's store round trips by the function sent to the store's thread."""
STATEMENTS: collections.Counter[str] = collections.Counter()
"""The profiled burst's SQL statements by their first word."""
TOKEN = "xoxb-ack-profile"
MIX = ("help", "log", "try add --enable-metrics")
"""Answers from the grammar, from the store, and a mutating command refused because the target is busy."""
CONFIG = """
default_target = "lab"

[targets.lab]
unit = "sglang.service"
base_url = "http://127.0.0.1:9"
nodes = [{ host = "127.0.0.1", port = 9 }]
sglang_version = "0.5.10"

[targets.lab.ssh]
connect_timeout = 1

[slack.rbac]
operators = ["U0OPER"]
viewers = ["*"]

[database]
sqlite_path = "DB"
"""


def standin_module() -> str:
    for name in ("flagbot_lab.standin", "bot.slack.standin"):
        try:
            importlib.import_module(name + ".outbound")
        except ImportError:
            continue
        return name
    raise SystemExit("no Slack stand-in importable (install the lab: pip install -e ./lab)")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _wait_port(port: int) -> None:
    delay = 0.02
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(delay)  # a readiness poll with backoff, not a fixed wait
            delay = min(delay * 1.5, 0.3)
            continue
        writer.close()
        return
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")


async def measure(base: Path, commands: int, bursts: int) -> tuple[list[float], list[float], pstats.Stats]:
    import aiohttp
    from sqlalchemy import event

    from bot.config.loader import load_settings
    from bot.slack.app import build_app, serve_http, web_client
    from bot.slack.services import SlackServices
    from bot.store import AsyncStore, Store
    from bot.store.leases import acquire

    standin = standin_module()
    outbound = importlib.import_module(standin + ".outbound")
    model = importlib.import_module(standin + ".model")
    user = model.User("U0OPER", "bob", "Bob Operator")
    room = model.Channel("C0FLAGBOT", "flagbot-ops")

    database = base / "flagbot.db"
    config = base / "flagbot.toml"
    config.write_text(CONFIG.replace("DB", str(database)))
    store = Store.open(f"sqlite:///{database}")
    store.upgrade()
    acquire(store, "lab", holder="bench", host="bench", pid=1, purpose="verify", ttl_s=3600)
    counting = [False]

    @event.listens_for(store.engine, "before_cursor_execute")
    def _statement(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if counting[0]:
            STATEMENTS[(statement.split() or ["?"])[0].upper()] += 1

    store_run = AsyncStore.run

    async def counted_round_trip(self: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        if counting[0]:
            ROUND_TRIPS[getattr(func, "__name__", type(func).__name__)] += 1
        return await store_run(self, func, *args, **kwargs)

    AsyncStore.run = counted_round_trip  # type: ignore[method-assign]

    port = free_port()
    slack = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        standin,
        "--signing-secret",
        SECRET,
        "--bot-token",
        TOKEN,
        "--bot-url",
        f"http://127.0.0.1:{port}",
        stdout=asyncio.subprocess.PIPE,
    )
    runner: Any = None
    try:
        assert slack.stdout is not None
        api = (await slack.stdout.readline()).decode().split()[1] + "/api/"
        services = SlackServices(load_settings(config), AsyncStore(store), lease_ttl_s=60.0)
        app = build_app(services, token=TOKEN, signing_secret=SECRET, client=web_client(TOKEN, base_url=api))
        runner = await serve_http(app, "127.0.0.1", port)
        await _wait_port(port)
        url = f"http://127.0.0.1:{port}"

        async def one(http: Any, text: str) -> float:
            body = outbound.slash_form(
                command="/flagbot", text=text, user=user, channel=room, response_url=url + "/x"
            )
            request = outbound.signed(
                url + "/slack/events", body, "application/x-www-form-urlencoded", SECRET
            )
            started = time.perf_counter()
            async with http.post(request.url, data=request.body, headers=request.headers()) as answer:
                await answer.read()
                if answer.status != 200:
                    raise RuntimeError(f"{text!r}: HTTP {answer.status}")
            return (time.perf_counter() - started) * 1000

        async def burst(http: Any) -> list[float]:
            return list(await asyncio.gather(*(one(http, MIX[k % len(MIX)]) for k in range(commands))))

        async def settle() -> None:
            while services.tasks:  # the work the listeners handed to tasks (answers, posts)
                await asyncio.gather(*list(services.tasks), return_exceptions=True)

        cpu_per_ack: list[float] = []
        latencies: list[float] = []
        async with aiohttp.ClientSession() as http:
            await burst(http)  # warm: first imports, first queries, connection pools
            await settle()
            for _ in range(bursts):
                cpu = time.process_time()
                latencies += await burst(http)
                await settle()
                cpu_per_ack.append((time.process_time() - cpu) * 1000 / commands)
            profile = cProfile.Profile()
            counting[0] = True
            profile.enable()
            await burst(http)
            await settle()
            profile.disable()
            counting[0] = False
        return cpu_per_ack, latencies, pstats.Stats(profile)
    finally:
        if runner is not None:
            await runner.cleanup()
        if slack.returncode is None:
            slack.send_signal(signal.SIGTERM)
            await slack.wait()
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flagbot-ack-profile-") as tmp:
        cpu, latencies, stats = asyncio.run(measure(Path(tmp), args.commands, args.bursts))
    calls = stats.total_calls  # type: ignore[attr-defined]
    print(f"{args.bursts} bursts of {args.commands} slash commands ({', '.join(MIX)}), no benchmark running")
    print(
        f"CPU per ack ms: median {statistics.median(cpu):.2f}  (bursts: {' '.join(f'{c:.2f}' for c in cpu)})"
    )
    print(f"Python calls per ack on the event loop's thread: {calls / args.commands:,.0f}")
    print(f"ack latency ms (not comparable across machines or loads): p50 {statistics.median(latencies):.1f}")
    ours = [
        (count, f"{Path(file).name}:{line} {name}")
        for (file, line, name), (_, count, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
        if "/bot/" in file
    ]
    print(f"flagbot's functions with the most calls per ack (top {args.top}):")
    for count, where in sorted(ours, reverse=True)[: args.top]:
        print(f"  {count / args.commands:8.1f}  {where}")
    trips, statements = sum(ROUND_TRIPS.values()), sum(STATEMENTS.values())
    print(
        f"store round trips per ack: {trips / args.commands:.2f}; SQL statements per ack: "
        f"{statements / args.commands:.2f} ("
        + ", ".join(f"{kind} {n / args.commands:.2f}" for kind, n in STATEMENTS.most_common())
        + ")"
    )
    for name, count in ROUND_TRIPS.most_common():
        print(f"  {count / args.commands:8.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
