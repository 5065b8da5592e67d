"""Each launcher form on a real node: where flagbot asks the unit's SGLang, and that it answers.

Units in the other forms are loaded on node 1 (never started: the twin keeps running from
`sglang-qwen.service`): `podman run` (the node's stand-in runtime), `sglang serve` from a venv,
a conda env's `python3.11 -m sglang.launch_server`, and an `EnvironmentFile=` the login may not
read. For each, the version and the dry run come from the form's own interpreter or image, as
the login `ops`, with no sudo in the command. The `docker run` form and a readable
`EnvironmentFile=` are exercised by a whole `try` in tests/integration/loop/test_try_launchers.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.target.dryrun import dry_run
from bot.target.flaglist import host_version
from bot.target.launcher import SglangInvoker, sglang_invoker
from bot.target.ssh import NodeSession
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.target.support_control import units_on_node

pytestmark = pytest.mark.asyncio(loop_scope="session")

FLAGS = "--model-path /shared/models/Qwen3.5-122B-A10B --tp 2 --port 30001"
UNITS = {
    "sglang-podman.service": (
        "[Service]\nExecStart=/usr/local/bin/podman run --rm --device nvidia.com/gpu=all --network host "
        f"-e NCCL_DEBUG=WARN docker.io/lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server {FLAGS}\n"
    ),
    "sglang-venv.service": f"[Service]\nExecStart=/opt/sglang/.venv/bin/sglang serve {FLAGS}\n",
    "sglang-conda.service": (
        f"[Service]\nExecStart=/opt/conda/envs/sglang/bin/python3.11 -m sglang.launch_server {FLAGS}\n"
    ),
    "sglang-secret-file.service": (
        "[Service]\nEnvironmentFile=/etc/sglang-twin/secret.env\n"
        f"ExecStart=/usr/bin/python3 -m sglang.launch_server {FLAGS} --api-key ${{SGLANG_API_KEY}}\n"
    ),
}
EXPECTED = {
    "sglang-podman.service": SglangInvoker(
        "python3", runtime="/usr/local/bin/podman", image="docker.io/lmsysorg/sglang:v0.5.10"
    ),
    "sglang-venv.service": SglangInvoker("/opt/sglang/.venv/bin/python3"),
    "sglang-conda.service": SglangInvoker("/opt/conda/envs/sglang/bin/python3.11"),
}


@pytest_asyncio.fixture(loop_scope="session")
async def launcher_units(testbed: Testbed) -> AsyncIterator[NodeSession]:
    """The units above on node 1, with a venv and a conda env whose interpreters are the node's
    python (the twin's `sglang` is in its dist-packages) and a root-only secrets file."""
    root = testbed.layout.root(1)
    made: list[Path] = []
    for directory, name in (("opt/sglang/.venv/bin", "python3"), ("opt/conda/envs/sglang/bin", "python3.11")):
        (root / directory).mkdir(parents=True, exist_ok=True)
        (root / directory / name).symlink_to("/usr/bin/python3")
        made.append(root / directory / name)
    script = root / "opt/sglang/.venv/bin/sglang"
    script.write_text(
        "#!/opt/sglang/.venv/bin/python3\nimport runpy\nrunpy.run_module('sglang.launch_server')\n"
    )
    script.chmod(0o755)
    secret = root / "etc/sglang-twin/secret.env"
    secret.write_text("SGLANG_API_KEY=sk-rootOnlySecret9876\n")
    secret.chmod(0o600)
    made += [script, secret]
    async with units_on_node(testbed, 1, UNITS, made) as node:
        yield node


@pytest.mark.parametrize("unit", sorted(EXPECTED))
async def test_each_launcher_is_asked_through_its_own_interpreter_or_image(
    launcher_units: NodeSession, unit: str
) -> None:
    launcher_units.unit = unit
    try:
        view = await read_unit(launcher_units)
        invoker = sglang_invoker(view.prefix, view.launch.kind)
        assert invoker == EXPECTED[unit]
        assert view.flags.argv() == FLAGS.split()
        assert await host_version(launcher_units, invoker) == "0.5.10"
        resolved = await dry_run(launcher_units, python=invoker, argv=view.flags.argv())
    finally:
        launcher_units.unit = "sglang-qwen.service"
    assert resolved.ok, resolved
    assert (resolved.server_args or {})["tp_size"] == 2 and "sudo" not in resolved.command
    if invoker.in_container:
        assert view.env == {"NCCL_DEBUG": "WARN"}
        assert resolved.command.startswith("env /usr/local/bin/podman run --rm --pull never --network none ")


async def test_a_root_only_environment_file_stays_unread_and_its_reference_as_written(
    launcher_units: NodeSession,
) -> None:
    launcher_units.unit = "sglang-secret-file.service"
    try:
        view = await read_unit(launcher_units)
    finally:
        launcher_units.unit = "sglang-qwen.service"
    assert ("--api-key", "${SGLANG_API_KEY}") in [(item.flag, item.value) for item in view.flags.items]
    assert view.file_env == {}
    assert len(view.file_env_unread) == 1 and "Permission denied" in view.file_env_unread[0]
    assert view.shown_references(view.flags)["${SGLANG_API_KEY}"].startswith(
        "not known (/etc/sglang-twin/secret.env"
    )
