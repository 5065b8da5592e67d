"""Editing each launcher form through the drop-in, on two fake nodes.

A container launcher's flags and `-e` options are edited inside `docker run`'s argument list (the
unit's `Environment=` is the runtime's, not the container's); `--node-rank ${NODE_RANK}` from an
`EnvironmentFile=` is read (expanded for validation and display, secrets masked) and written back
as written on every node.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.redaction import MASK, redact
from bot.sglang.flagset import FlagItem, FlagSet
from bot.sglang.launch_docker import with_container_env
from bot.sglang.launch_shell import LaunchParseError
from bot.sglang.launch_unit import parse_environment_file
from bot.target.restart import apply_and_restart, flags_for_nodes
from bot.target.unit import read_unit
from tests.support.fake_node import FakeNode, FakeSystemd
from tests.unit.target.conftest import FakeTarget, serving

UNIT = "sglang-qwen.service"
DOCKER = (
    "[Service]\nEnvironment=DOCKER_HOST=unix:///run/docker.sock\n"
    "ExecStart=/usr/bin/docker run --rm --gpus all --network host -v /models:/models "
    "-e HF_HOME=/hf --env=NCCL_DEBUG=WARN -e HF_TOKEN lmsysorg/sglang:v0.5.10 "
    "python3 -m sglang.launch_server --model-path /models/q --tp 2 --nnodes 2 --node-rank {rank}\n"
)
RANK_FROM_FILE = (
    "[Service]\nEnvironmentFile=/etc/sglang/node.env\nEnvironmentFile=-/etc/sglang/secrets.env\n"
    "ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /models/q --tp 2 "
    "--nnodes 2 --node-rank ${{NODE_RANK}} --api-key ${{SGLANG_API_KEY}} --served-model-name ${{SERVED}}\n"
)
NODE_ENV = (
    "# this node\nNODE_RANK={rank}\nSERVED='qwen on node {rank}'\nSGLANG_API_KEY=sk-nodeFileSecret4321\n"
)


def _nodes(text: str, files: dict[str, str | None] | None = None) -> list[FakeNode]:
    nodes = []
    for k in range(2):
        node_files = {
            path: None if body is None else body.format(rank=k) for path, body in (files or {}).items()
        }
        systemd = FakeSystemd(rank=k, files={f"/etc/systemd/system/{UNIT}": text.format(rank=k)})
        systemd.environment_files = node_files
        nodes.append(FakeNode(systemd))
    return nodes


def _dropin(fake: FakeTarget, k: int) -> str:
    systemd = fake.nodes[k].systemd
    return systemd.files[systemd.dropin]


# --- docker run -e, edited in the argument list --------------------------------------------------


@pytest.mark.parametrize(
    ("words", "env", "expected"),
    [
        (
            "docker run --rm -e A=1 --env B=2 --env=C=3 -eD=4 -v /x:/y img:1 python3 -m sglang.launch_server",
            {"A": "9", "E": "5"},
            "docker run -e A=9 -e E=5 --rm -v /x:/y img:1 python3 -m sglang.launch_server",
        ),
        (
            "/usr/bin/podman run -it --name s -e HF_TOKEN img:1",
            {"HF_TOKEN": "$HF_TOKEN"},
            "/usr/bin/podman run -e HF_TOKEN -it --name s img:1",
        ),
        (
            "docker container run --workdir -e -e X=1 img:1 --tp 2",
            {},
            "docker container run --workdir -e img:1 --tp 2",
        ),
    ],
)
def test_container_env_options_are_replaced_and_nothing_else_moves(
    words: str, env: dict[str, str], expected: str
) -> None:
    assert with_container_env(words.split(), env) == expected.split()


@pytest.mark.parametrize(
    ("words", "error"),
    [
        ("docker run -de X=1 img:1", "cluster of short options"),
        ("python3 -m sglang.launch_server", "does not run docker"),
    ],
)
def test_container_env_that_cannot_be_rewritten_in_place_is_refused(words: str, error: str) -> None:
    with pytest.raises(LaunchParseError, match=error):
        with_container_env(words.split(), {"A": "1"})


async def test_an_env_set_on_a_docker_launcher_rewrites_the_e_options_and_keeps_environment(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, _nodes(DOCKER)) as fake:
        async with fake.open() as ts:
            view = await read_unit(ts.node0)
            assert view.env == {"HF_HOME": "/hf", "NCCL_DEBUG": "WARN", "HF_TOKEN": "$HF_TOKEN"}
            flags = flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--enable-metrics"))), 2)
            report = await apply_and_restart(ts, flags, {**view.env, "NCCL_DEBUG": "INFO"})
            after = [await read_unit(node) for node in ts.nodes]
        assert report.ok
        for k in range(2):
            text = _dropin(fake, k)
            assert (
                "ExecStart=/usr/bin/docker run -e HF_HOME=/hf -e NCCL_DEBUG=INFO -e HF_TOKEN --rm --gpus all "
                "--network host -v /models:/models lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server "
                f"--model-path /models/q --tp 2 --nnodes 2 --node-rank {k} --enable-metrics\n"
            ) in text
            assert "Environment=" not in text  # the runtime's own environment is left as it is
            assert after[k].env["NCCL_DEBUG"] == "INFO" and after[k].environment == {
                "DOCKER_HOST": "unix:///run/docker.sock"
            }


async def test_an_env_set_keeps_what_each_node_sets_on_its_own(tmp_path: Path) -> None:
    own_nic = DOCKER.replace("-e HF_HOME=/hf", "-e HF_HOME=/hf -e NCCL_SOCKET_IFNAME=eth{rank}")
    plain = (
        "[Service]\nEnvironment=GLOO_SOCKET_IFNAME=eth{rank} NCCL_DEBUG=WARN\n"
        "ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /models/q --tp 2 "
        "--nnodes 2 --node-rank {rank}\n"
    )
    for text, nic in ((own_nic, "NCCL_SOCKET_IFNAME"), (plain, "GLOO_SOCKET_IFNAME")):
        async with serving(tmp_path, _nodes(text)) as fake:
            async with fake.open() as ts:
                view = await read_unit(ts.node0)
                assert view.env[nic] == "eth0"
                wanted = {name: value for name, value in view.env.items() if name != "NCCL_DEBUG"}
                flags = flags_for_nodes(view.flags, 2)
                assert (await apply_and_restart(ts, flags, {**wanted, "HF_HUB_OFFLINE": "1"})).ok
                after = [await read_unit(node) for node in ts.nodes]
            for k in range(2):  # the change on every node; each node's own NIC as it was
                assert after[k].env[nic] == f"eth{k}", (text, after[k].env)
                assert after[k].env["HF_HUB_OFFLINE"] == "1" and "NCCL_DEBUG" not in after[k].env


async def test_a_flag_change_on_a_docker_launcher_leaves_the_e_options_as_written(tmp_path: Path) -> None:
    async with serving(tmp_path, _nodes(DOCKER)) as fake:
        async with fake.open() as ts:
            view = await read_unit(ts.node0)
            flags = flags_for_nodes(FlagSet((*view.flags.items, FlagItem("--enable-metrics"))), 2)
            assert (await apply_and_restart(ts, flags, dict(view.env))).ok
        assert "-e HF_HOME=/hf --env=NCCL_DEBUG=WARN -e HF_TOKEN lmsysorg/sglang" in _dropin(fake, 0)


# --- EnvironmentFile= and ${VAR} ----------------------------------------------------------------


def test_an_environment_file_reads_as_systemd_reads_it() -> None:
    text = '# c\n; c\nA=1\n  B = two words  \nC="q \\" \\$x"\nD=\'lit $x\'\nnot an assignment\n1X=bad\nA=2\n'
    assert parse_environment_file(text) == {"A": "2", "B": "two words", "C": 'q " $x', "D": "lit $x"}


async def test_references_from_an_environment_file_are_expanded_for_display_and_kept_in_the_dropin(
    tmp_path: Path,
) -> None:
    files: dict[str, str | None] = {"/etc/sglang/node.env": NODE_ENV, "/etc/sglang/secrets.env": None}
    async with serving(tmp_path, _nodes(RANK_FROM_FILE, files)) as fake:
        async with fake.open() as ts:
            views = [await read_unit(node) for node in ts.nodes]
            for k, view in enumerate(views):
                assert ("--node-rank", "${NODE_RANK}") in [(i.flag, i.value) for i in view.flags.items]
                assert view.file_env["NODE_RANK"] == str(k)
                assert view.file_env_unread == (
                    "/etc/sglang/secrets.env: cat: /etc/sglang/secrets.env: Permission denied",
                )
                expanded = view.expanded_flags(view.flags).argv()
                assert expanded[expanded.index("--node-rank") + 1] == str(k)
                assert expanded[-1] == f"qwen on node {k}"
                assert view.shown_references(view.flags) == {
                    "${NODE_RANK}": str(k),
                    "${SGLANG_API_KEY}": MASK,
                    "${SERVED}": f"qwen on node {k}",
                }
            assert "sk-nodeFileSecret4321" not in redact(
                "echoed: sk-nodeFileSecret4321"
            )  # masked wherever it shows
            new = flags_for_nodes(FlagSet((*views[0].flags.items, FlagItem("--enable-metrics"))), 2)
            assert [dict((i.flag, i.value) for i in flags.items)["--node-rank"] for flags in new] == [
                "${NODE_RANK}"
            ] * 2
            report = await apply_and_restart(ts, new)
        assert report.ok  # the round trip held: systemd loaded the references as written
        for k in range(2):
            text = _dropin(fake, k)
            assert (
                "--node-rank ${NODE_RANK} --api-key ${SGLANG_API_KEY} --served-model-name ${SERVED}" in text
            )
            assert "sk-nodeFileSecret4321" not in text and f"--node-rank {k}" not in text


async def test_a_reference_no_readable_file_sets_says_why_it_is_not_known(tmp_path: Path) -> None:
    nodes = _nodes(RANK_FROM_FILE, {"/etc/sglang/node.env": None})
    async with serving(tmp_path, nodes) as fake, fake.open() as ts:
        view = await read_unit(ts.node0)
    shown = view.shown_references(view.flags)
    assert (
        shown["${NODE_RANK}"]
        == "not known (/etc/sglang/node.env: cat: /etc/sglang/node.env: Permission denied)"
    )
    assert view.expanded_flags(view.flags) == view.flags  # nothing to expand: the reference stays


def test_a_literal_node_rank_is_still_set_per_node() -> None:
    flags = FlagSet((FlagItem("--tp", "2"), FlagItem("--node-rank", "0")))
    assert [f.argv()[-1] for f in flags_for_nodes(flags, 3)] == ["0", "1", "2"]
