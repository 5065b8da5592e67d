"""SIGUSR1 makes a stuck flagbot print its stacks, and the test helper turns a hang into that dump."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from tests.support.processes import CommandTimeoutError, communicate

STUCK_PROGRAM = textwrap.dedent(
    """
    import asyncio
    from bot.diagnostics import install_dump_on_signal

    async def wait_for_a_node_that_never_answers(event):
        await event.wait()

    async def main():
        install_dump_on_signal()
        event = asyncio.Event()
        task = asyncio.create_task(wait_for_a_node_that_never_answers(event), name="rollback-wait")
        print("started", flush=True)
        await task

    asyncio.run(main())
    """
)


async def test_a_hung_command_is_killed_and_its_task_stacks_are_in_the_failure() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        STUCK_PROGRAM,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 60) == b"started\n"  # handler installed
    with pytest.raises(CommandTimeoutError) as failure:
        await communicate(process, timeout=1)
    text = str(failure.value)
    assert "killed" in text
    assert "thread stacks" in text and "asyncio task(s)" in text
    assert "rollback-wait" in text and "wait_for_a_node_that_never_answers" in text
    assert process.returncode is not None  # nothing left running


async def test_a_command_that_answers_in_time_gives_its_output() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "print('ok')", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await communicate(process, timeout=30)
    assert out.decode().strip() == "ok" and process.returncode == 0
