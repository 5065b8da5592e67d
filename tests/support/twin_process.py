"""Real twin processes for tests: started as a node starts them, killed by process group.

Each process runs as a node runs it, `/usr/bin/python3 -m sglang.launch_server <flags>`, from a
node layout made by the twin's own installer (`flagbot_lab.twin.install.install_into`), with the
scenario, truth and run dirs pointed at temp paths, in its own process group, which
`TwinFactory.close` kills whatever the test did. Readiness is polled with a deadline.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from flagbot_lab.twin.schema import compile_scenario

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else shutil.which("python3") or "python3"
MODEL = "/models/Qwen3-0.6B"
TEST_TIMINGS = {"warmup_s": 0.4, "rendezvous_timeout_s": 1.5}
"""The shipped tiny-cpu scenario, with a warmup long enough to observe the 503 phase by polling
and a short rendezvous timeout."""


def tiny(**faults: Any) -> dict[str, Any]:
    """The compiled tiny-cpu scenario with the test timings (and any faults)."""
    document = copy.deepcopy(_TINY)
    document["timings"].update(TEST_TIMINGS)
    document["faults"].update(faults)
    return document


_TINY = compile_scenario("tiny-cpu")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Twin:
    proc: subprocess.Popen[bytes]
    port: int
    dir: Path
    argv: list[str]
    started: float = field(default_factory=time.monotonic)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def truth_file(self) -> Path:
        return self.dir / "truth" / "truth.jsonl"

    @property
    def state_file(self) -> Path:
        return self.dir / "run" / "state.json"

    def stderr(self) -> str:
        return (self.dir / "stderr.txt").read_text(errors="replace")

    def stdout(self) -> str:
        return (self.dir / "stdout.txt").read_text(errors="replace")

    def truth(self) -> list[dict[str, Any]]:
        if not self.truth_file.exists():
            return []
        return [json.loads(line) for line in self.truth_file.read_text().splitlines() if line]

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None and not predicate():
                raise AssertionError(
                    f"twin exited ({self.proc.returncode}) before {what}:\n{self.stderr()[-3000:]}"
                )
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}:\n{self.stderr()[-3000:]}")

    def health(self) -> int | None:
        try:
            return httpx.get(self.base + "/health", timeout=2).status_code
        except httpx.TransportError:
            return None

    def wait_ready(self, timeout: float = 30.0) -> None:
        self.wait_for(lambda: self.health() == 200, timeout, "/health 200")


class TwinFactory:
    def __init__(self, layout: Path, tmp: Path) -> None:
        self.layout = layout
        self.tmp = tmp
        self.twins: list[Twin] = []

    def start(
        self,
        *flags: str,
        port: int | None = None,
        scenario: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> Twin:
        port = port or free_port()
        workdir = self.tmp / f"twin{len(self.twins)}"
        workdir.mkdir()
        scenario_file = workdir / "scenario.json"
        scenario_file.write_text(json.dumps(scenario or tiny()))
        argv = ["--model-path", MODEL, "--host", "127.0.0.1", "--port", str(port), *flags]
        environment = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(self.layout),
            "PYTHONUNBUFFERED": "1",
            "SGLANG_TWIN_SCENARIO": str(scenario_file),
            "SGLANG_TWIN_TRUTH_DIR": str(workdir / "truth"),
            "SGLANG_TWIN_RUN_DIR": str(workdir / "run"),
            "SGLANG_TWIN_START_SEED": "1234",
            **(env or {}),
        }
        with open(workdir / "stdout.txt", "wb") as out, open(workdir / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                [PYTHON, "-m", "sglang.launch_server", *argv],
                stdout=out,
                stderr=err,
                env=environment,
                cwd=workdir,
                start_new_session=True,
            )
        twin = Twin(proc, port, workdir, argv)
        self.twins.append(twin)
        return twin

    def close(self) -> None:
        for twin in self.twins:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(twin.proc.pid, signal.SIGKILL)  # the group: nothing it started survives
            twin.proc.wait(10)
