"""Each launcher form: where flagbot asks the unit's SGLang, and the commands it renders for it.

`python -m sglang.launch_server` (system, venv, conda), `sglang serve`, `docker run` and
`podman run` with a command or with the image's entrypoint. The container forms run through the
unit's own runtime and image, as the login: nothing in the sudoers file grants a runtime.
"""

from __future__ import annotations

import pytest

from bot.sglang.launch import parse_launch_text
from bot.sglang.launch_docker import find_docker_run
from bot.target.launcher import IMAGE_PYTHON, SglangInvoker, sglang_invoker
from bot.target.privileged import COMMANDS, render_params
from bot.target.sudoers import needed_commands, sudoers_text

UNIT = "sglang-qwen.service"


def _invoker(exec_start: str) -> SglangInvoker | None:
    line = parse_launch_text(f"[Service]\nExecStart={exec_start} --tp 2 --port 30000\n")
    assert line.kind == "unit"
    return sglang_invoker(exec_start.split(), line.kind)  # the prefix: the words before the flags


@pytest.mark.parametrize(
    ("exec_start", "python"),
    [
        ("/usr/bin/python3 -m sglang.launch_server", "/usr/bin/python3"),
        ("/opt/sglang/.venv/bin/python -m sglang.launch_server", "/opt/sglang/.venv/bin/python"),
        (
            "/opt/conda/envs/sglang/bin/python3.11 -u -m sglang.launch_server",
            "/opt/conda/envs/sglang/bin/python3.11",
        ),
        ("/opt/sglang/.venv/bin/sglang serve", "/opt/sglang/.venv/bin/python3"),
        ("/opt/conda/envs/sglang/bin/sglang serve", "/opt/conda/envs/sglang/bin/python3"),
    ],
)
def test_a_host_launcher_is_asked_through_its_own_interpreter(exec_start: str, python: str) -> None:
    invoker = _invoker(exec_start)
    assert invoker == SglangInvoker(python) and not invoker.in_container
    assert str(invoker) == python
    name, params = invoker.command("sglang-help")
    assert (name, params) == ("sglang-help", {"python": python})
    assert render_params(name, params, sudo=False).argv[:2] == ["env", python]


@pytest.mark.parametrize(
    ("exec_start", "runtime", "image", "python", "gpus"),
    [
        (
            "/usr/bin/docker run --rm --gpus all --network host -v /models:/models -e HF_HOME=/hf "
            "lmsysorg/sglang:v0.5.10 python3 -m sglang.launch_server",
            "/usr/bin/docker",
            "lmsysorg/sglang:v0.5.10",
            "python3",
            "all",
        ),
        (
            "/usr/bin/podman run --rm --device nvidia.com/gpu=all --network host "
            "docker.io/lmsysorg/sglang@sha256:0123abcd /usr/bin/python3 -m sglang.launch_server",
            "/usr/bin/podman",
            "docker.io/lmsysorg/sglang@sha256:0123abcd",
            "/usr/bin/python3",
            None,
        ),
        (
            "/usr/bin/docker container run --rm --gpus=device=0,1 my/sglang:dev",
            "/usr/bin/docker",
            "my/sglang:dev",
            IMAGE_PYTHON,
            "device=0,1",
        ),
        (
            "/usr/bin/docker run --rm my/sglang:dev sglang serve",
            "/usr/bin/docker",
            "my/sglang:dev",
            IMAGE_PYTHON,
            None,
        ),
    ],
)
def test_a_container_launcher_is_asked_through_the_same_runtime_and_image(
    exec_start: str, runtime: str, image: str, python: str, gpus: str | None
) -> None:
    line = parse_launch_text(f"[Service]\nExecStart={exec_start} --tp 2\n")
    assert find_docker_run(line.wrapper) is not None  # read_unit's test for a container launcher
    prefix = exec_start.split()  # the words before the flags, as read_unit splits them
    invoker = sglang_invoker(prefix, "docker")
    assert invoker == SglangInvoker(python, runtime=runtime, image=image, gpus=gpus)
    name, params = invoker.command("sglang-dry-run")
    argv = render_params(name, {**params, "argv": ["--tp", "2"]}, sudo=True).argv
    assert argv[:8] == ["env", runtime, "run", "--rm", "--pull", "never", "--network", "none"]
    assert "sudo" not in argv and argv[argv.index("--entrypoint") + 1 : argv.index("--entrypoint") + 3] == [
        python,
        image,
    ]
    assert ("--gpus" in argv) == (gpus is not None) and argv[-2:] == ["--tp", "2"]
    help_name, help_params = invoker.command("sglang-help")
    assert render_params(help_name, help_params).argv[-3:] == ["-m", "sglang.launch_server", "--help"]
    assert str(invoker) == f"{python} in {image} ({runtime.rsplit('/', 1)[-1]} run)"


@pytest.mark.parametrize(
    "prefix",
    [
        ["/usr/bin/docker", "run", "--rm", "--", "-bad-image", "python3", "-m", "sglang.launch_server"],
        ["/usr/bin/docker", "run", "--rm", "img:1;rm -rf /", "python3", "-m", "sglang.launch_server"],
        ["/usr/bin/docker", "run", "--gpus", "all;id", "img:1", "python3", "-m", "sglang.launch_server"],
        ["/opt/x/../docker", "run", "img:1", "python3", "-m", "sglang.launch_server"],
        ["/usr/bin/docker", "run", "--unknown-option", "img:1", "python3", "-m", "sglang.launch_server"],
    ],
)
def test_a_container_word_the_validators_refuse_gives_no_invoker(prefix: list[str]) -> None:
    assert sglang_invoker(prefix, "docker") is None


@pytest.mark.parametrize(
    "prefix",
    [["/opt/x/../bin/python3", "-m", "sglang.launch_server"], ["/usr/bin/sglang-wrapper", "serve"], []],
)
def test_a_host_word_the_validators_refuse_gives_no_invoker(prefix: list[str]) -> None:
    assert sglang_invoker(prefix, "unit") is None


def test_the_sudoers_file_grants_no_container_runtime() -> None:
    text = sudoers_text("ops", UNIT)
    assert not any(word in text for word in ("docker", "podman", "nerdctl"))
    assert not any(COMMANDS[name].privileged for name in COMMANDS if name.startswith("container-"))
    assert all("docker" not in grant and "podman" not in grant for grant in needed_commands(UNIT))
