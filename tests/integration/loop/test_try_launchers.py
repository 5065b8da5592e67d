"""A `try` on the other launchers: the twin run by `docker run` (the node's stand-in runtime) and
`--node-rank ${NODE_RANK}` from an `EnvironmentFile=`.

Each test rewrites `sglang-qwen.service` on both nodes, restarts both ranks on it, runs the
`try` as a user would and puts the twin's own unit back (and the baseline) afterwards.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from bot.target.dropin import read_dropin
from bot.target.dryrun import dry_run
from bot.target.flaglist import host_version
from bot.target.launcher import sglang_invoker
from bot.target.restart import restart_target
from bot.target.unit import read_unit
from flagbot_lab.testbed import Testbed
from tests.integration.loop.support import flagbot, flagbot_json, write_config
from tests.integration.target.support_control import restore_baseline, session_for

pytestmark = pytest.mark.asyncio(loop_scope="session")

UNIT = Path("etc/systemd/system/sglang-qwen.service")
HOST_LAUNCH = "ExecStart=/usr/bin/python3 -m sglang.launch_server"
IMAGE = "lmsysorg/sglang:v0.5.10-twin"
DOCKER_LAUNCH = (
    "ExecStart=/usr/local/bin/docker run --rm --gpus all --network host --ipc host "
    f"-v /var/lib/sglang-twin:/var/lib/sglang-twin -e PYTHONUNBUFFERED=1 -e SGLANG_TWIN_MARK=container {IMAGE} "
    "python3 -m sglang.launch_server"
)
ENV_FILE = Path("etc/sglang-twin/node.env")


@asynccontextmanager
async def units_rewritten(
    bed: Testbed, rewrite: Callable[[int, str], str], files: Callable[[int], dict[Path, str]] | None = None
) -> AsyncIterator[None]:
    """Both nodes run the rewritten unit (restarted together, healthy); the twin's unit and the
    baseline are back afterwards, whatever the test did."""
    paths = [bed.layout.root(k) / UNIT for k in range(len(bed.addresses))]
    originals = [path.read_text() for path in paths]
    written: list[Path] = []
    try:
        for k, path in enumerate(paths):
            for relative, text in (files(k) if files else {}).items():
                target = bed.layout.root(k) / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
                target.chmod(0o644)
                written.append(target)
            path.write_text(rewrite(k, originals[k]))
        async with session_for(bed) as ts:
            for node in ts.nodes:
                await node.run("daemon-reload")
            await restart_target(ts)
        await bed.wait_healthy_async(timeout=180)
        yield
    finally:
        for path, text in zip(paths, originals, strict=True):
            path.write_text(text)
        for target in written:
            target.unlink(missing_ok=True)
        async with session_for(bed) as ts:
            for node in ts.nodes:
                await node.run("daemon-reload")
        await restore_baseline(bed)


async def _served_names(bed: Testbed) -> list[str]:
    async with httpx.AsyncClient() as client:
        models = (await client.get(f"{bed.base_url}/v1/models")).json()
    return [model["id"] for model in models["data"]]


def _in_docker(k: int, text: str) -> str:
    assert HOST_LAUNCH in text
    return text.replace(HOST_LAUNCH, DOCKER_LAUNCH)


async def test_a_try_on_a_docker_launcher_edits_the_container_arguments(
    testbed: Testbed, tmp_path: Path
) -> None:
    async with units_rewritten(testbed, _in_docker):
        async with session_for(testbed) as ts:
            view = await read_unit(ts.node0)
            assert view.launch.kind == "docker" and view.prefix[-3:] == [
                "python3",
                "-m",
                "sglang.launch_server",
            ]
            assert view.env == {"PYTHONUNBUFFERED": "1", "SGLANG_TWIN_MARK": "container"}
            invoker = sglang_invoker(view.prefix, view.launch.kind)
            assert (
                invoker is not None and invoker.image == IMAGE and invoker.runtime == "/usr/local/bin/docker"
            )
            assert await host_version(ts.node0, invoker) == "0.5.10"  # asked inside the "image"
            resolved = await dry_run(ts.node0, python=invoker, argv=view.flags.argv())
            assert resolved.ok, resolved
            assert resolved.command.startswith(
                f"env /usr/local/bin/docker run --rm --pull never --network none --gpus all --entrypoint python3 {IMAGE} -c "
            )
        config = write_config(testbed, tmp_path)
        assert (await flagbot(config, "db", "upgrade"))[0] == 0
        _, tried, err = await flagbot_json(
            config,
            "try",
            "set",
            "--served-model-name=qwen-in-docker",
            "env",
            "set",
            "SGLANG_TWIN_MARK=tried",
            "keep=always",
        )
        assert tried["ok"] and tried["verdict"] != "failed-to-start", json.dumps(
            {"tried": tried, "stderr": err}, indent=1
        )
        async with session_for(testbed) as ts:
            dropins = [await read_dropin(node) or "" for node in ts.nodes]
            views = [await read_unit(node) for node in ts.nodes]
        for k, text in enumerate(dropins):
            exec_lines = [line for line in text.splitlines() if line.startswith("ExecStart=/")]
            assert len(exec_lines) == 1, json.dumps({"dropin": text, "tried": tried, "stderr": err}, indent=1)
            exec_line = exec_lines[0]
            assert exec_line.startswith(
                "ExecStart=/usr/local/bin/docker run -e PYTHONUNBUFFERED=1 -e SGLANG_TWIN_MARK=tried --rm --gpus all"
            ), exec_line
            assert f"{IMAGE} python3 -m sglang.launch_server " in exec_line
            assert " --served-model-name qwen-in-docker " in f"{exec_line} ", exec_line
            assert "\nEnvironment=" not in text  # the container's environment is its -e options
            assert views[k].launch.kind == "docker" and views[k].env["SGLANG_TWIN_MARK"] == "tried"
        assert await _served_names(testbed) == ["qwen-in-docker"]  # restarted with the edited argument list


def _rank_from_file(k: int, text: str) -> str:
    assert re.search(r"--node-rank [0-9]+", text)
    text = re.sub(r"--node-rank [0-9]+", "--node-rank ${NODE_RANK}", text)
    return text.replace("[Service]\n", "[Service]\nEnvironmentFile=/etc/sglang-twin/node.env\n", 1)


def _node_env(k: int) -> dict[Path, str]:
    return {ENV_FILE: f"# written by the test\nNODE_RANK={k}\nHF_TOKEN=hf_testbed_secret_value\n"}


async def test_a_try_keeps_node_rank_from_an_environment_file_as_written(
    testbed: Testbed, tmp_path: Path
) -> None:
    async with units_rewritten(testbed, _rank_from_file, _node_env):
        config = write_config(testbed, tmp_path)
        assert (await flagbot(config, "db", "upgrade"))[0] == 0
        _, status, _ = await flagbot_json(config, "status")
        assert status["references"] == {"${NODE_RANK}": "0"}
        assert {"flag": "--node-rank", "value": "${NODE_RANK}"} in status["flags"]
        _, tried, err = await flagbot_json(
            config, "try", "set", "--served-model-name=qwen-env-file", "keep=always"
        )
        assert tried["ok"] and tried["verdict"] != "failed-to-start", json.dumps(
            {"tried": tried, "stderr": err}, indent=1
        )
        async with session_for(testbed) as ts:
            dropins = [await read_dropin(node) or "" for node in ts.nodes]
            views = [await read_unit(node) for node in ts.nodes]
        for k, (text, view) in enumerate(zip(dropins, views, strict=True)):
            assert "--node-rank ${NODE_RANK}" in text and f"--node-rank {k}" not in text, text
            assert view.file_env["NODE_RANK"] == str(k)
            assert view.shown_references(view.flags) == {"${NODE_RANK}": str(k)}
        assert await _served_names(testbed) == [
            "qwen-env-file"
        ]  # both ranks rendezvoused with their own rank
        assert "hf_testbed_secret_value" not in str(tried) + err
