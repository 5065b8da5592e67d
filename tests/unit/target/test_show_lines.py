"""One line is one line: no value of `systemctl show` can forge another property (issue 17, item 8).

Every property flagbot asks `systemctl show` for (unit.SHOW_PROPERTIES, nodestate.SHOW) is forged
in turn, through a carrier value an operator can influence (`Environment=`, a flag in
`ExecStart=`) that holds every line break `str.splitlines()` splits at (except `\\n`, which
systemd never prints inside a value and which the input side refuses), each followed by
`PROP=forged`. The parsed value must be the real one, also through an SSH read of a node.
"""

from __future__ import annotations

import pytest

from bot.target.lines import LINE_BREAKS, lines_with_ends, split_lines
from bot.target.nodestate import SHOW as STATE_PROPERTIES
from bot.target.nodestate import NodeState, node_state
from bot.target.unit import SHOW_PROPERTIES, UnitReadError, parse_show, parse_state, read_state
from tests.support.fake_node import FakeSystemd
from tests.unit.target.conftest import FakeTarget

BREAKS = tuple(b for b in LINE_BREAKS if "\n" not in b)
"""U+0085, U+2028, U+2029, \\r, \\v, \\f, \\x1c, \\x1d, \\x1e."""
PROPERTIES = sorted({*SHOW_PROPERTIES, *STATE_PROPERTIES})
EXEC = (
    "{{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server --served-model-name {name} "
    "; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=4242 ; code=(null) ; status=0/0 }}"
)
REAL = {
    "ActiveState": "active",
    "SubState": "running",
    "Result": "success",
    "InvocationID": "e310efb0f88147d8a7d7e76f2d0e200f",
    "NRestarts": "3",
    "ExecMainStatus": "0",
    "ExecMainCode": "0",
    "Restart": "on-failure",
    "ExecMainStartTimestamp": "Sun 2026-11-29 20:14:49.559217 UTC",
    "NeedDaemonReload": "no",
    "DropInPaths": "/etc/systemd/system/sglang-qwen.service.d/50-flagbot.conf",
    "FragmentPath": "/etc/systemd/system/sglang-qwen.service",
    "ExecStart": EXEC.format(name="qwen"),
    "Environment": "PYTHONUNBUFFERED=1",
}
FORGED = {
    "ActiveState": "failed",
    "SubState": "dead",
    "Result": "exit-code",
    "InvocationID": "0" * 32,
    "NRestarts": "99",
    "ExecMainStatus": "1",
    "ExecMainCode": "1",
    "Restart": "always",
    "ExecMainStartTimestamp": "Mon 2026-11-30 00:00:00.000000 UTC",
    "NeedDaemonReload": "yes",
    "DropInPaths": "/tmp/evil.conf",
    "FragmentPath": "/tmp/evil.service",
    "ExecStart": EXEC.format(name="forged"),
    "Environment": "LD_PRELOAD=/tmp/x.so",
}


def forging(prop: str, *, after: str = "") -> str:
    """`after` followed by every line break, each followed by `PROP=forged-value`."""
    return after + "".join(f"{brk}{prop}={FORGED[prop]}" for brk in BREAKS)


def show_output(carrier: str, prop: str) -> tuple[str, dict[str, str]]:
    """`systemctl show` output (real properties first, the carrier last) and the carrier's real value."""
    values = dict(REAL)
    if carrier == "Environment":
        values["Environment"] = "PYTHONUNBUFFERED=1 " + forging(prop, after="NOTE=x")
    else:  # a flag value inside the ExecStart argv
        values["ExecStart"] = EXEC.format(name=forging(prop, after="qwen"))
    order = [name for name in PROPERTIES if name != carrier] + [carrier]
    return "".join(f"{name}={values[name]}\n" for name in order), values


def test_every_line_break_is_one_that_splitlines_splits_at() -> None:
    """The test's breaks are the real thing: each would split a line for `str.splitlines()`."""
    assert len(BREAKS) == 9
    for brk in BREAKS:
        assert len(f"a{brk}b".splitlines()) == 2
        assert split_lines(f"a{brk}b\n") == [f"a{brk}b"]


@pytest.mark.parametrize(
    ("carrier", "prop"),
    [(carrier, prop) for carrier in ("Environment", "ExecStart") for prop in PROPERTIES if prop != carrier],
)
def test_no_value_forges_a_property_of_systemctl_show(carrier: str, prop: str) -> None:
    text, values = show_output(carrier, prop)
    assert len(text.splitlines()) > len(PROPERTIES)  # splitlines would have been fooled
    raw = parse_show(text)
    assert raw[prop] == REAL[prop] != FORGED[prop]
    assert raw[carrier] == values[carrier]  # the carrier keeps every break inside its value
    assert set(raw) == set(PROPERTIES)
    state = parse_state(text)
    assert (state.active_state, state.sub_state, state.result) == ("active", "running", "success")
    assert state.need_daemon_reload is False
    assert state.invocation_id == REAL["InvocationID"] and state.n_restarts == 3
    assert state.fragment_path == REAL["FragmentPath"] and state.dropin_paths == [REAL["DropInPaths"]]
    assert [entry.pid for entry in state.exec_start] == [4242]
    node = NodeState.parse(text)
    assert (node.active, node.sub, node.result, node.invocation) == (
        "active",
        "running",
        "success",
        REAL["InvocationID"],
    )
    assert (node.n_restarts, node.exit_status) == (3, 0)


def test_a_property_printed_twice_is_refused_not_guessed() -> None:
    with pytest.raises(UnitReadError, match="ActiveState= twice"):
        parse_show("ActiveState=active\nSubState=running\nActiveState=failed\n")


def test_lines_with_ends_keeps_other_breaks_inside_a_line() -> None:
    text = "a\u2028b\nc\x85d\n\ne"
    assert lines_with_ends(text) == ["a\u2028b\n", "c\x85d\n", "\n", "e"]
    assert "".join(lines_with_ends(text)) == text


async def test_a_forged_environment_value_read_over_ssh_leaves_the_state_real(
    fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through a node: `systemctl show` answers with an Environment= value that tries
    to forge ActiveState and NeedDaemonReload; both readers of the state see the real ones."""
    real_show = FakeSystemd.show

    def show(self: FakeSystemd, properties: list[str]) -> str:
        text = real_show(self, [p for p in properties if p != "Environment"])
        value = forging("ActiveState", after="A=1") + forging("NeedDaemonReload")
        return text + (f"Environment={value}\n" if "Environment" in properties else "")

    monkeypatch.setattr(FakeSystemd, "show", show)
    fake_target.nodes[0].systemd.active = "inactive"
    async with fake_target.open() as ts:
        state = await read_state(ts.node0)
        assert (state.active_state, state.need_daemon_reload) == ("inactive", False)
        assert state.raw["Environment"].count("ActiveState=failed") == len(BREAKS)
        assert (await node_state(ts.node0)).active == "inactive"
