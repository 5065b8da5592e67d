"""A failed start's headline in rollback's evidence, from what the twin really prints: the last
exception of a chained traceback (not the first one readiness stopped at), the whole chain under
it, and how systemd saw the main process end (SGLang's sigquit path: SIGKILL)."""

from __future__ import annotations

import signal
import time
from types import SimpleNamespace
from typing import Any

from bot.target.readiness_result import Failure, Readiness
from bot.target.rollback import failure_evidence
from flagbot_lab.twin.engine.scenario import scenario_from_dict
from flagbot_lab.twin.engine.startup import resolve
from flagbot_lab.twin.schema import compile_scenario
from tests.unit.target.scripted_node import failed_start_node, show_text

INV = "f" * 32


def _twin_failed_start() -> tuple[list[str], str, int | None]:
    """The twin's graph-capture OOM on h200-tp8: its lines, its fatal exception, its signal."""
    scenario = scenario_from_dict(compile_scenario("h200-tp8"))
    resolved = resolve([*scenario.launch, "--mem-fraction-static", "0.995"], scenario, start_seed=1)
    assert resolved.failure is not None
    now = time.time()
    lines = [step.render(now) for step in resolved.steps]
    return lines, resolved.failure, resolved.killed_by


async def test_the_headline_is_the_chains_last_exception_and_the_sigkill() -> None:
    lines, fatal_exception, killed_by = _twin_failed_start()
    assert killed_by == signal.SIGKILL
    first = next(line for line in lines if line.startswith("torch.OutOfMemoryError"))
    now = time.time()
    state = show_text(
        invocation=INV, active="activating", sub="auto-restart", result="signal", code=2, status=9
    )
    node = failed_start_node(INV, lines, state, started=now)
    readiness = Readiness("failed", "failed", INV, {"n0": INV}, now - 3)
    readiness.failure = Failure(
        "crash-loop",
        "n0",
        "n0: crash loop",
        first,
        INV,
        exit_status=int(signal.SIGKILL),
        n_restarts=1,
        main_exit="code=killed, status=9/KILL",
        restart="on-abnormal",
    )
    ts: Any = SimpleNamespace(nodes=[node], node0=node)
    blocks, fatal, summary = await failure_evidence(ts, readiness)
    assert fatal == fatal_exception and fatal.startswith("Exception: Capture cuda graph failed:")
    assert summary["first_fatal_line"] == first
    what = blocks[0].to_json()["text"]
    headline = what.splitlines()[0]
    assert "main process code=killed, status=9/KILL, Restart=on-abnormal" in headline
    assert "exit status 9" not in what
    assert f"fatal line: {fatal_exception}" in what
    assert "torch.OutOfMemoryError" in what and "during handling of it" in what
