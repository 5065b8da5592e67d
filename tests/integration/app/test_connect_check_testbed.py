"""`flagbot config check --connect` (bot/app/connect_check.py) against the two real nodes: real
sshd with host-key verification, real sudo listing the installed sudoers file, real systemd
(issue 20 item 5). The happy path passes every check; a node whose sudoers file lacks one line
and a target naming a unit the nodes do not have each fail with one line naming the cause."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.connect_check import ConnectCheck, connect_checks, failed
from bot.config import Settings, load_settings
from bot.target.sudoers import needed_commands
from flagbot_lab.testbed import Testbed

pytestmark = pytest.mark.asyncio(loop_scope="session")
SUDOERS = "etc/sudoers.d/flagbot"
"""The installed sudoers file, under a node's root (`tests/integration/target/test_sudo_scope.py`)."""


def _settings(bed: Testbed, *, wrong_unit: str | None = None) -> Settings:
    """The testbed's own config; with `wrong_unit`, one more target like `twin` naming that unit."""
    settings = load_settings(bed.config_path, required=True)
    if wrong_unit is None:
        return settings
    twin = settings.targets["twin"]
    targets = {**settings.targets, "elsewhere": twin.model_copy(update={"unit": wrong_unit})}
    return settings.model_copy(update={"targets": targets})


def _by(checks: list[ConnectCheck], target: str) -> dict[tuple[str, str], ConnectCheck]:
    return {(check.check, check.node): check for check in checks if check.target == target}


def _node_of(checks: list[ConnectCheck], k: int) -> str:
    """The node column of node k (the checks name nodes in config order)."""
    return [check.node for check in checks if check.check == "login" and check.target == "twin"][k]


@pytest.fixture
def node1_without_stop(testbed: Testbed) -> Iterator[str]:
    """Node 1's sudoers file without the `systemctl stop` line (put back afterwards): the line."""
    path = testbed.layout.root(1) / SUDOERS
    installed = path.read_text()
    kept = [line for line in installed.splitlines(keepends=True) if " stop " not in line]
    assert len(kept) == len(installed.splitlines()) - 1, installed
    path.write_text("".join(kept))
    try:
        yield next(line for line in needed_commands("sglang-qwen.service") if " stop " in line)
    finally:
        path.write_text(installed)


async def test_the_testbed_passes_every_check(testbed: Testbed, tmp_path: Path) -> None:
    checks = await connect_checks(_settings(testbed), cache_dir=tmp_path / "cache")
    assert [check.render() for check in checks if check.status != "ok"] == []
    assert not failed(checks)
    seen = [(check.check, check.node) for check in checks]
    nodes = [node for check, node in seen if check == "login"]
    assert len(nodes) == 2
    for node in nodes:
        for check in ("sudoers", "unit"):
            assert (check, node) in seen
    found = _by(checks, "twin")
    assert "host key verified" in found["login", nodes[0]].text
    assert "ExecStart launches SGLang" in found["unit", nodes[1]].text
    assert "flag list from node 0's --help" in found["sglang", "-"].text
    assert found["server_info", "-"].text.endswith("/server_info answered 200")


async def test_a_missing_sudoers_line_is_one_line_naming_it(
    testbed: Testbed, tmp_path: Path, node1_without_stop: str
) -> None:
    checks = await connect_checks(_settings(testbed), cache_dir=tmp_path / "cache")
    failures = [check for check in checks if check.status == "fail"]
    assert len(failures) == 1, [check.render() for check in checks]
    assert failures[0].check == "sudoers" and failures[0].node == _node_of(checks, 1)
    assert failures[0].text.startswith(f"1 sudoers line(s) missing: {node1_without_stop}; ")


async def test_a_unit_name_the_nodes_do_not_have_is_named_per_node(testbed: Testbed, tmp_path: Path) -> None:
    checks = await connect_checks(_settings(testbed, wrong_unit="sglang-nope.service"), cache_dir=tmp_path)
    assert not any(check.status == "fail" for check in checks if check.target == "twin")
    wrong = _by(checks, "elsewhere")
    nodes = [node for check, node in wrong if check == "login"]
    assert len(nodes) == 2
    for node in nodes:
        assert wrong["login", node].status == "ok"
        assert wrong["unit", node].text == (
            "sglang-nope.service does not exist on this node (systemd: LoadState=not-found)"
        )
        sudoers = wrong["sudoers", node]  # the installed file grants the other unit's commands only
        assert sudoers.status == "fail" and "sudoers line(s) missing" in sudoers.text
        assert "flagbot sudoers target=elsewhere" in sudoers.text
    assert wrong["sglang", "-"].status == "warn" and "packaged list" in wrong["sglang", "-"].text
