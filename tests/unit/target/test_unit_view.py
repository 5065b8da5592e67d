"""Reading a unit: systemctl's output formats, launch forms, and what `read_unit` makes of them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.sglang.launch import LaunchInScriptError
from bot.target.unit import (
    UnitReadError,
    parse_bus_exec,
    parse_exec_property,
    parse_state,
    read_unit,
    split_cat,
)
from tests.unit.target.conftest import FakeTarget

SHOW = """\
NRestarts=3
ExecMainStartTimestamp=Sun 2026-11-29 20:14:49.559217 UTC
ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --a x y ; ignore_errors=no ; start_time=[Sun 2026-11-29 20:14:49.559187 UTC] ; stop_time=[n/a] ; pid=34 ; code=(null) ; status=0/0 }
Environment=PYTHONUNBUFFERED=1 "A=1 2"
ActiveState=active
SubState=running
FragmentPath=/etc/systemd/system/sglang-qwen.service
DropInPaths=/etc/systemd/system/sglang-qwen.service.d/10-x.conf /etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf
NeedDaemonReload=no
InvocationID=e310efb0f88147d8a7d7e76f2d0e200f
"""


def test_parse_state_reads_systemctl_show() -> None:
    state = parse_state(SHOW)
    assert state.active_state == "active" and state.sub_state == "running"
    assert state.invocation_id == "e310efb0f88147d8a7d7e76f2d0e200f"
    assert state.exec_main_start == datetime(2026, 11, 29, 20, 14, 49, 559217, tzinfo=UTC)
    assert state.n_restarts == 3 and not state.need_daemon_reload
    assert state.dropin_paths[-1].endswith("50-flagbot.conf") and len(state.dropin_paths) == 2
    assert state.exec_start[0].path == "/usr/bin/python3"
    assert state.exec_start[0].argv_text == "/usr/bin/python3 -m sglang.launch_server --a x y"
    assert state.exec_start[0].pid == 34


def test_exec_property_with_several_commands_and_separators_inside() -> None:
    value = (
        "{ path=/bin/a ; argv[]=/bin/a ; x ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; "
        "pid=0 ; code=(null) ; status=0/0 } { path=/bin/b ; argv[]=/bin/b -v ; ignore_errors=yes ; "
        "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
    )
    entries = parse_exec_property(value)
    assert [e.argv_text for e in entries] == ["/bin/a ; x", "/bin/b -v"]
    with pytest.raises(UnitReadError):
        parse_exec_property("{ garbage }")
    assert parse_exec_property("") == []


def test_inactive_unit_has_no_invocation_or_start() -> None:
    state = parse_state("ActiveState=inactive\nInvocationID=\nExecMainStartTimestamp=n/a\nNRestarts=\n")
    assert state.invocation_id is None and state.exec_main_start is None and state.n_restarts == 0


def test_split_cat_uses_the_real_paths() -> None:
    text = (
        "# /etc/a.service\n[Service]\n# /not/a/header\nX=1\n\n# /etc/a.service.d/50-flagbot.conf\n[Service]\n"
    )
    files = split_cat(text, ["/etc/a.service", "/etc/a.service.d/50-flagbot.conf"])
    assert [f.path for f in files] == ["/etc/a.service", "/etc/a.service.d/50-flagbot.conf"]
    assert files[0].text == "[Service]\n# /not/a/header\nX=1\n"
    assert files[1].text == "[Service]\n"


def test_bus_exec_json() -> None:
    text = '{"type":"a(sasbttttuii)","data":[["/p",["/p","a b",""],false,0,0,0,0,0,0,0]]}'
    assert parse_bus_exec(text) == [["/p", "a b", ""]]


async def test_read_unit_of_a_direct_launch(fake_target: FakeTarget) -> None:
    async with fake_target.open() as ts:
        view = await read_unit(ts.nodes[1])
    assert view.launch.kind == "unit"
    assert view.prefix == ["/usr/bin/python3", "-m", "sglang.launch_server"]
    assert view.flags.argv() == [
        "--model-path",
        "/models/qwen",
        "--tp",
        "2",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--port",
        "30000",
    ]
    assert view.env == {"PYTHONUNBUFFERED": "1"}
    assert view.state.active_state == "active"
    assert view.flagbot_dropin is None and view.vendor is not None
    assert view.argv_with(view.flags) == view.exec_argv


async def test_dollar_references_resolve_from_environment(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    node.files[node.vendor] = (
        "[Service]\nEnvironment=MODEL=/models/q\n"
        "ExecStart=/usr/bin/python3 -m sglang.launch_server --model-path ${MODEL} --name a$$b\n"
    )
    node.reload()
    async with fake_target.open() as ts:
        view = await read_unit(ts.node0)
        assert view.flags.argv() == ["--model-path", "/models/q", "--name", "a$b"]
        node.files[node.vendor] = (
            "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --m $FROM_FILE\n"
        )
        node.reload()
        with pytest.raises(UnitReadError, match="FROM_FILE"):
            await read_unit(ts.node0)


async def test_docker_wrapper_edits_only_what_follows_the_image(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    node.files[node.vendor] = (
        "[Service]\nExecStart=/usr/bin/docker run --rm --gpus all -e HF_HOME=/hf lmsysorg/sglang:v0.5.10 "
        "python3 -m sglang.launch_server --model-path /m --tp 2\n"
    )
    node.reload()
    async with fake_target.open() as ts:
        view = await read_unit(ts.node0)
    assert view.launch.kind == "docker"
    assert view.prefix[-4:] == ["lmsysorg/sglang:v0.5.10", "python3", "-m", "sglang.launch_server"]
    assert view.flags.argv() == ["--model-path", "/m", "--tp", "2"]
    assert view.env == {"HF_HOME": "/hf"}


async def test_launch_script_is_refused_with_what_to_change(fake_target: FakeTarget) -> None:
    node = fake_target.nodes[0].systemd
    node.files[node.vendor] = "[Service]\nExecStart=/opt/sglang/start.sh --port 30000\n"
    node.reload()
    async with fake_target.open() as ts:
        with pytest.raises(LaunchInScriptError) as caught:
            await read_unit(ts.node0)
    message = str(caught.value)
    assert "/opt/sglang/start.sh" in message and "script" in message
    assert "change the unit on the host" in message and ts.node0.name in message
