"""Readiness per (how the main process ended, Restart=): what systemd shows after a dead server
(systemd.service(5)'s Restart= table) is a failed start at once, naming the end and the policy."""

from __future__ import annotations

import signal

import httpx
import pytest

from bot.target.main_exit import MainExit, explain
from bot.target.nodestate import NodeState
from bot.target.readiness import unit_failure, wait_ready
from tests.unit.target.scripted_node import ScriptedNode, show_text

OLD, NEW = "a" * 32, "b" * 32
EXITED, KILLED, DUMPED = 1, 2, 3
KILL, TERM, ABRT = int(signal.SIGKILL), int(signal.SIGTERM), int(signal.SIGABRT)


@pytest.mark.parametrize(
    ("kind", "status", "restart", "restarted"),
    [
        # SGLang's failed start (its SIGQUIT handler SIGKILLs itself) and the OOM killer
        ("killed", KILL, "on-failure", True),
        ("killed", KILL, "on-abnormal", True),
        ("killed", KILL, "no", False),
        # an error in the main process's own startup (exit 1), argparse (exit 2)
        ("exited", 1, "on-failure", True),
        ("exited", 1, "on-abnormal", False),
        ("exited", 2, "always", True),
        # SIGTERM while loading: a clean signal for systemd
        ("killed", TERM, "on-failure", False),
        ("killed", TERM, "on-abnormal", False),
        ("killed", TERM, "always", True),
        ("exited", 0, "on-failure", False),
        ("exited", 0, "on-success", True),
        ("dumped", ABRT, "on-abnormal", True),
        ("dumped", ABRT, "on-abort", True),
    ],
)
def test_restart_policy_table(kind: str, status: int, restart: str, restarted: bool) -> None:
    code = {"exited": "1", "killed": "2", "dumped": "3"}[kind]
    ended = MainExit.from_show(code, str(status))
    assert ended is not None and ended.kind == kind
    assert ended.restarted_by(restart) is restarted


def test_the_end_is_worded_as_systemctl_status_words_it() -> None:
    assert MainExit.from_show("2", "9") == MainExit("killed", 9)
    assert MainExit("killed", KILL).describe() == "code=killed, status=9/KILL"
    assert MainExit("exited", 1).describe() == "code=exited, status=1"
    assert MainExit.from_show("0", "0") is None  # still running
    assert explain(MainExit("exited", 1), "on-abnormal") == (
        "main process code=exited, status=1; Restart=on-abnormal does not restart it"
    )


def _state(**fields: object) -> NodeState:
    return NodeState.parse(show_text(invocation=NEW, **fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "reason", "ended"),
    [
        # Restart=on-failure: both ends loop
        (
            {
                "active": "activating",
                "sub": "auto-restart",
                "result": "signal",
                "code": KILLED,
                "status": KILL,
            },
            "crash-loop",
            "code=killed, status=9/KILL; Restart=on-failure restarts it",
        ),
        (
            {
                "active": "activating",
                "sub": "auto-restart",
                "result": "exit-code",
                "code": EXITED,
                "status": 1,
            },
            "crash-loop",
            "code=exited, status=1; Restart=on-failure restarts it",
        ),
        # Restart=on-abnormal: the signal loops, the exit status leaves the unit failed
        (
            {
                "active": "activating",
                "sub": "auto-restart",
                "result": "signal",
                "code": KILLED,
                "status": KILL,
                "restart": "on-abnormal",
            },
            "crash-loop",
            "code=killed, status=9/KILL; Restart=on-abnormal restarts it",
        ),
        (
            {
                "active": "failed",
                "sub": "failed",
                "result": "exit-code",
                "code": EXITED,
                "status": 1,
                "restart": "on-abnormal",
            },
            "unit-failed",
            "code=exited, status=1; Restart=on-abnormal does not restart it",
        ),
        # systemd 254+ names the queued restart apart
        (
            {
                "active": "activating",
                "sub": "auto-restart-queued",
                "result": "signal",
                "code": KILLED,
                "status": KILL,
            },
            "crash-loop",
            "code=killed, status=9/KILL",
        ),
        # clearing the cgroup after the main process died, before the loop or the failed state
        (
            {
                "active": "deactivating",
                "sub": "stop-sigterm",
                "result": "signal",
                "code": KILLED,
                "status": KILL,
                "restart": "on-abnormal",
            },
            "crash-loop",
            "code=killed, status=9/KILL",
        ),
        (
            {
                "active": "deactivating",
                "sub": "stop-sigterm",
                "result": "exit-code",
                "code": EXITED,
                "status": 1,
                "restart": "on-abnormal",
            },
            "unit-failed",
            "code=exited, status=1",
        ),
        # SIGTERM (clean): no restart under either policy, the unit is just inactive
        (
            {"active": "inactive", "sub": "dead", "result": "success", "code": KILLED, "status": TERM},
            "stopped",
            "code=killed, status=15/TERM; Restart=on-failure does not restart it",
        ),
        (
            {
                "active": "failed",
                "sub": "failed",
                "result": "signal",
                "code": KILLED,
                "status": KILL,
                "restart": "no",
            },
            "unit-failed",
            "Restart=no does not restart it",
        ),
    ],
)
def test_a_dead_server_is_a_failed_start_per_exit_and_policy(
    fields: dict[str, object], reason: str, ended: str
) -> None:
    found = unit_failure(_state(**fields), 0, 1, ready=False)
    assert found is not None
    assert found[0] == reason
    assert ended in found[1]


def test_a_running_server_is_no_failure() -> None:
    assert unit_failure(_state(), 0, 1, ready=False) is None
    assert unit_failure(_state(active="activating", sub="start"), 0, 1, ready=False) is None


def test_a_restart_missed_between_polls_is_still_a_loop() -> None:
    """RestartSec shorter than the poll: only the risen NRestarts of the next start shows it."""
    found = unit_failure(_state(n_restarts=1), 1, 1, ready=False)
    assert found is not None and found[0] == "crash-loop" and "NRestarts +1" in found[1]


async def test_wait_ready_reports_the_loop_with_the_end_and_the_policy() -> None:
    node0 = ScriptedNode(
        "n0",
        0,
        states=[
            (0, show_text(invocation=NEW)),
            (
                0.1,
                show_text(
                    invocation=NEW,
                    active="activating",
                    sub="auto-restart",
                    result="signal",
                    code=KILLED,
                    status=KILL,
                    restart="on-abnormal",
                ),
            ),
        ],
    )
    node1 = ScriptedNode("n1", 1, states=[(0, show_text(invocation="d" * 32))])

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refused)) as client:
        result = await wait_ready(
            [node0, node1],
            base_url="http://node0:30000",
            timeout=30,
            previous={"n0": OLD, "n1": "e" * 32},
            client=client,
        )
    assert result.outcome == "failed" and result.failure is not None
    assert result.failure.reason == "crash-loop" and result.failure.node == "n0"
    assert (result.failure.main_exit, result.failure.restart) == ("code=killed, status=9/KILL", "on-abnormal")
    assert result.failure.exit_status == KILL
