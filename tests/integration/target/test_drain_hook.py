"""Drain hooks that are commands on a node (issue 20 item 3), on the two-node testbed.

`[targets.X.drain] stop_hook = { command = [...], node = 1 }` runs on node 1 as the login, with its
words as given (spaces and shell metacharacters included, each one argv word), never through sudo;
the resume hook runs once the server serves again. A hook that fails refuses the drain with its
exit status and last line, its arguments unshown.
"""

from __future__ import annotations

import pytest

from bot.config.drain import CommandHook, DrainPolicy
from bot.target.drain import DrainHookError, DrainSettings, drain, resume_traffic
from bot.target.session import TargetSession
from flagbot_lab.testbed import OPS_USER, Testbed
from tests.integration.conftest import NodeShells
from tests.integration.target.support_control import session_for, target_for

pytestmark = pytest.mark.asyncio(loop_scope="session")
LOG = "flagbot-hooks.log"
RECORD = 'printf "%s|%s\\n" "$(id -un)" "$*" >> "$HOME/flagbot-hooks.log"'
"""The hook program: appends who ran it and its arguments to a file in the login's home."""


def _hook(*words: str, node: int = 1) -> CommandHook:
    return CommandHook(command=["/bin/sh", "-c", RECORD, "hook", *words], node=node)


async def test_command_hooks_run_on_their_node_as_the_login_with_their_words(
    testbed: Testbed, ssh_ops: NodeShells
) -> None:
    await ssh_ops.run(1, f"rm -f ~/{LOG}")
    policy = DrainPolicy(
        grace="0s",  # the hooks are the subject: one look at the load, no wait
        stop_hook=_hook("stop", "worker a; rm -rf /", "$HOME"),
        resume_hook=_hook("resume", "worker a"),
    )
    target = target_for(testbed).model_copy(update={"drain": policy})
    try:
        async with TargetSession.open("twin", target) as ts:
            await ts.ledger.mark_traffic_stopped()  # as restart does before it calls the stop hook
            report = await drain(ts, DrainSettings.of(policy))
            resumed = await resume_traffic(ts)
            still_marked = await ts.ledger.traffic_stopped_at()
        logged = await ssh_ops.run(1, f"cat ~/{LOG}")
        on_node0 = await ssh_ops.run(0, f"test -e ~/{LOG}")
    finally:
        await ssh_ops.run(1, f"rm -f ~/{LOG}")
    assert report.stop_hook == "node 1: /bin/sh (+6 argument(s)) -> exit 0"
    assert "rm -rf" not in report.describe()  # the arguments stay off the thread
    assert resumed == "resume: node 1: /bin/sh (+5 argument(s)) -> exit 0"
    assert still_marked is None
    assert logged.stdout.splitlines() == [
        f"{OPS_USER}|stop worker a; rm -rf / $HOME",
        f"{OPS_USER}|resume worker a",
    ]
    assert on_node0.exit_status != 0  # node 1's hooks ran on node 1 only


async def test_a_failing_command_hook_refuses_the_drain_with_its_last_line(testbed: Testbed) -> None:
    failing = CommandHook(
        command=["/bin/sh", "-c", 'echo "lb: no such worker" >&2; exit 3', "hook", "--token=s3cret"], node=0
    )
    async with session_for(testbed) as ts:
        with pytest.raises(DrainHookError) as raised:
            await drain(ts, DrainSettings(stop_hook=failing, limit_s=5.0))
    message = str(raised.value)
    assert message.startswith("node 0: /bin/sh (+4 argument(s)) exited 3: ")
    assert message.endswith("'lb: no such worker'")
    assert "--token=s3cret" not in message
