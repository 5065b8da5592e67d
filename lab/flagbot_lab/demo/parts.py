"""The demo's parts and their lifecycle: the twin's nodes, the Slack stand-in, the bot.

Why the stand-in runs in this process and the bot in its own: the demo reads everything the
bot posts (cards, threads, ephemeral refusals) straight from the stand-in's recorded state,
while the bot is the real `flagbot serve --http`, reached only through signed requests, as
Slack reaches it. `close()` undoes whatever `start()` got to, in order: the bot, the stand-in,
then the testbed instance, checked for leftovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

import httpx

from bot.target.nodestate import Backoff
from flagbot_lab.demo.setup import DemoSetupError, fresh_database, state_dir, write_demo_config
from flagbot_lab.demo.story import CHANNEL
from flagbot_lab.demo.thread import Typed
from flagbot_lab.standin import Standin
from flagbot_lab.testbed import DEFAULT_INSTANCE, UNIT, Testbed, TestbedError, leftovers, unavailable_reason
from flagbot_lab.testbed.layout import STATE_DIR

DEFAULT_PORT = 8780
"""The stand-in's page in interactive mode (headless runs take any free port)."""
SCENARIO = "seed-gb10"
NODES = 2
BOT_STOP_GRACE_S = 10.0
"""`flagbot serve` waits for runs in flight on SIGTERM; the demo stops waiting after this."""
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class DemoOptions:
    headless: bool = False
    instance: int = DEFAULT_INSTANCE
    keep: bool = False
    """Leave the testbed nodes running at exit (the bot and the stand-in stop)."""
    port: int = DEFAULT_PORT
    base: Path = STATE_DIR
    health_timeout_s: float = 300.0
    screenshot: Path | None = None
    """Write the try thread's picture here at the end of the story (`flagbot_lab.demo.screenshot`)."""


def free_port() -> int:
    """A loopback port nobody listens on now (the bot binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _prctl() -> Any:
    """libc's prctl, looked up in the parent: the child only calls it (no dlopen after fork)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return None


_PRCTL = _prctl()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The bot gets SIGTERM if the demo dies without its teardown (SIGKILL, a crash)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Demo:
    """The demo's parts and their lifecycle; `close()` undoes whatever `start()` got to."""

    def __init__(self, options: DemoOptions, out: TextIO) -> None:
        self.options = options
        self.out = out
        self.dir = state_dir(options.base, options.instance, DEFAULT_INSTANCE).absolute()
        self.config = self.dir / "flagbot.toml"
        self.bot_log = self.dir / "bot.log"
        self.bed = Testbed(
            options.instance, options.base / "testbed", NODES, SCENARIO, config_path=self.dir / "twin.toml"
        )
        self.standin: Standin | None = None
        self.bot: asyncio.subprocess.Process | None = None
        self.typed: list[Typed] = []
        self._boot: asyncio.Future[Any] | None = None
        self._log: IO[bytes] | None = None
        self.stopped: list[str] = []
        """What `close()` stopped, for the last line (nothing when nothing had started)."""

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    # ---- start

    async def start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise DemoSetupError(f"{reason}; `make demo` as root installs the packages")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._boot = asyncio.ensure_future(asyncio.to_thread(self.bed.up))
        try:
            times = await asyncio.shield(self._boot)
        except TestbedError as exc:
            raise DemoSetupError(str(exc)) from None
        waited = await self._wait_healthy()
        self.say(
            f"testbed instance {self.options.instance}: {NODES} nodes up ({SCENARIO}), sshd after "
            f"{times.sshd:.1f} s, {self.bed.base_url}/health 200 after {waited:.1f} s more"
        )
        write_demo_config(self.config, self.bed.config_path.read_text(), self.dir / "flagbot.db")
        fresh_database(self.dir / "flagbot.db")
        await self._start_standin_and_bot()

    async def _wait_healthy(self) -> float:
        """Node 0's `/health` polled with a backoff until 200 (the twin loads its pretend model)."""
        started = time.monotonic()
        backoff = Backoff(0.2, 1.5, 2.0)
        last = "connection refused"
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while time.monotonic() - started < self.options.health_timeout_s:
                try:
                    code = (await client.get(f"{self.bed.base_url}/health")).status_code
                    if code == 200:
                        return time.monotonic() - started
                    last = f"HTTP {code}"
                except httpx.HTTPError:
                    last = "connection refused"
                await backoff.sleep()
        raise DemoSetupError(
            f"{self.bed.base_url}/health not 200 within {self.options.health_timeout_s:g} s (last: {last})"
        )

    async def _start_standin_and_bot(self) -> None:
        signing = secrets.token_hex(16)
        token = "xoxb-demo-" + secrets.token_hex(8)
        bot_port = free_port()
        self.standin = Standin(
            signing, f"http://127.0.0.1:{bot_port}", bot_token=token, port=self.options.port
        )
        try:
            await self.standin.start()
        except OSError as exc:
            self.standin = None
            raise DemoSetupError(
                f"the stand-in cannot listen on 127.0.0.1:{self.options.port} ({exc.strerror}); "
                "choose another port with --port (0: any free port)"
            ) from None
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("FLAGBOT_CONFIG", "FLAGBOT_DATABASE_URL", "SLACK_APP_TOKEN")
        }
        env |= {"SLACK_BOT_TOKEN": token, "SLACK_SIGNING_SECRET": signing, "PYTHONUNBUFFERED": "1"}
        self._log = self.bot_log.open("wb")
        self.bot = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "--config",
            str(self.config),
            "serve",
            "--http",
            f"127.0.0.1:{bot_port}",
            "--slack-api",
            self.standin.api_url,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the demo, which stops the bot in order
            preexec_fn=_die_with_parent,  # one libc call, resolved before the fork
        )
        await self._wait_bot(bot_port)
        self.say(f"flagbot serve --http: pid {self.bot.pid}, log {self.bot_log}")
        self.say(f"Slack stand-in page: {self.standin.base_url}/?channel={CHANNEL}")

    async def _wait_bot(self, port: int, timeout: float = 90.0) -> None:
        """Until the bot accepts connections (importing Bolt takes seconds on 2 cores)."""
        assert self.bot is not None
        started = time.monotonic()
        backoff = Backoff(0.1, 1.5, 1.0)
        while time.monotonic() - started < timeout:
            if self.bot.returncode is not None:
                raise DemoSetupError(
                    f"flagbot serve exited with {self.bot.returncode}:\n{tail(self.bot_log)}"
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                await writer.wait_closed()
                return
            await backoff.sleep()
        raise DemoSetupError(f"flagbot serve did not listen within {timeout:g} s:\n{tail(self.bot_log)}")

    async def diagnostics(self, lines: int = 25) -> str:
        """What to look at when a step fails, read before the teardown removes it: the unit's
        journal on every node (from the host, no SSH) and the bot's log."""
        parts = []
        for k in range(NODES):
            journal = self.bed.layout.root(k) / "var" / "log" / "journal"
            process = await asyncio.create_subprocess_exec(
                "journalctl",
                "-D",
                str(journal),
                "-u",
                UNIT,
                "-n",
                str(lines),
                "--no-pager",
                "-o",
                "short-precise",
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            out, _ = await process.communicate()
            parts.append(f"--- node {k}: journalctl -u {UNIT} -n {lines} ---\n{out.decode(errors='replace')}")
        parts.append(f"--- {self.bot_log} (last {lines} lines) ---\n{tail(self.bot_log, lines)}")
        return "\n".join(parts)

    # ---- teardown

    async def close(self) -> list[str]:
        """Stop the bot, the stand-in, then the nodes (unless --keep); what is left behind."""
        if self.bot is not None and self.bot.returncode is None:
            self.bot.terminate()
            try:
                await asyncio.wait_for(self.bot.wait(), BOT_STOP_GRACE_S)
            except TimeoutError:
                self.bot.kill()
                await self.bot.wait()
            self.stopped.append("bot")
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.standin is not None:
            await self.standin.stop()
            self.stopped.append("stand-in")
        if self._boot is None:
            return []
        await asyncio.wait({self._boot})  # a boot in progress finishes (or cleans itself) first
        booted = not self._boot.cancelled() and self._boot.exception() is None
        self._boot = None
        if not booted:
            return []
        if self.options.keep:
            down = "flagbot twin down" + (
                "" if self.options.instance == DEFAULT_INSTANCE else f" --instance {self.options.instance}"
            )
            self.say(f"--keep: the nodes stay up; `flagbot --config {self.config} status`; stop: `{down}`")
            return []
        try:
            await asyncio.to_thread(self.bed.down)
        except TestbedError as exc:
            return [f"teardown failed: {exc}"]
        self.stopped.append(f"testbed instance {self.options.instance}")
        return leftovers(self.options.instance)
