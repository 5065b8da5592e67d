"""Reading real units: the twin's flags and state, and the docker and script launch forms."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio

from bot.sglang.launch import LaunchInScriptError
from bot.target.restart import check_lockstep
from bot.target.ssh import NodeSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from flagbot_lab.twin.install import node_flags
from flagbot_lab.twin.schema import compile_scenario
from tests.integration.target.support_control import session_for, units_on_node

pytestmark = pytest.mark.asyncio(loop_scope="session")

EXTRA_UNITS = {
    "sglang-docker.service": (
        "[Service]\n"
        "ExecStart=/usr/bin/docker run --rm --gpus all --ipc=host -e HF_HOME=/hf -p 30000:30000 \\\n"
        "    lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server \\\n"
        '    --model-path /models/qwen --tp 2 --served-model-name "q w"\n'
    ),
    "sglang-script.service": "[Service]\nEnvironment=PORT=30000\nExecStart=/opt/sglang/start.sh --port 30000\n",
}


async def test_both_nodes_flags_and_state(testbed: Testbed) -> None:
    async with session_for(testbed) as ts:
        views = [await read_unit(node) for node in ts.nodes]
    document = compile_scenario(testbed.scenario)
    for k, view in enumerate(views):
        expected = node_flags(
            document, node_rank=k, dist_init_addr=f"{testbed.addresses[0]}:50000", host="0.0.0.0", port=30000
        )
        assert view.flags.argv() == expected
        assert view.prefix == ["/usr/bin/python3", "-m", "sglang.launch_server"]
        assert view.launch.kind == "unit"
        assert view.env.get("PYTHONUNBUFFERED") == "1"
        assert view.state.active_state == "active" and view.state.sub_state == "running"
        assert re.fullmatch(r"[0-9a-f]{32}", view.state.invocation_id or "")
        assert view.state.exec_main_start is not None
        assert datetime.now(UTC) - view.state.exec_main_start < timedelta(hours=2)
        assert not view.state.need_daemon_reload
        assert view.state.fragment_path == "/etc/systemd/system/sglang-qwen.service"
        assert view.files[0].path == view.state.fragment_path and "ExecStart=" in view.files[0].text
        assert view.exec_count == 1 and view.argv_with(view.flags) == view.exec_argv
    check_lockstep([view.flags for view in views])  # same flags but --node-rank
    assert views[0].flags != views[1].flags


@pytest_asyncio.fixture(loop_scope="session")
async def extra_units(testbed: Testbed) -> AsyncIterator[NodeSession]:
    """Units in other launch forms on node 1 (loaded, never started), removed afterwards."""
    async with units_on_node(testbed, 1, EXTRA_UNITS) as node:
        yield node


async def test_docker_wrapper_edits_the_arguments_after_the_image(extra_units: NodeSession) -> None:
    extra_units.unit = "sglang-docker.service"
    try:
        view = await read_unit(extra_units)
    finally:
        extra_units.unit = "sglang-qwen.service"
    assert view.launch.kind == "docker"
    assert view.prefix[0] == "/usr/bin/docker" and view.prefix[-4:] == [
        "lmsysorg/sglang:v0.5.10",
        "python3",
        "-m",
        "sglang.launch_server",
    ]
    assert view.flags.argv() == ["--model-path", "/models/qwen", "--tp", "2", "--served-model-name", "q w"]
    assert view.env == {"HF_HOME": "/hf"}
    assert view.state.active_state == "inactive"


async def test_a_launch_script_is_refused_with_what_to_change(extra_units: NodeSession) -> None:
    extra_units.unit = "sglang-script.service"
    try:
        with pytest.raises(LaunchInScriptError) as caught:
            await read_unit(extra_units)
    finally:
        extra_units.unit = "sglang-qwen.service"
    message = str(caught.value)
    assert "/opt/sglang/start.sh" in message
    assert "python -m sglang.launch_server" in message or "sglang serve" in message
    assert "change the unit on the host" in message
