"""Where the host's SGLang can be asked for its flag list, version and dry run: the unit's own
interpreter, or, for a container launcher, the unit's runtime and image.

Why the same runtime and image: the flags that matter are those of the SGLang the unit starts.
With `docker run ... IMAGE python3 -m sglang.launch_server ...` that SGLang lives in the image,
not on the host (a DGX Spark host usually has no SGLang at all), so `--help`, the version and the
dry run run as `RUNTIME run --rm --pull never --network none --entrypoint PYTHON IMAGE ...`
(table entries `container-sglang-*`, `bot/target/privileged.py`). They run as the login, through
its own container access, never through sudo: the sudoers file grants no runtime, and
docker-group access is root-equivalent (docs/security.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bot.sglang.launch import LaunchKind
from bot.sglang.launch_docker import find_docker_run, parse_docker_run
from bot.sglang.launch_shell import LaunchParseError, basename
from bot.target.params import PARAMS, ParamError

_PYTHON_WORD = re.compile(r"^/\S*/python[0-9.]*$")
_PYTHON_NAME = re.compile(r"^python[0-9.]*$")
IMAGE_PYTHON = "python3"
"""The interpreter assumed inside an image whose command does not name one (the image's own
entrypoint runs SGLang, or the command is `sglang serve`): the official images have it."""


@dataclass(frozen=True)
class SglangInvoker:
    """How to run the unit's SGLang for a question: `python` on the host, or `python` inside
    `image` through `runtime` (with the unit's `--gpus`, so post-init sees the same GPUs)."""

    python: str
    runtime: str | None = None
    image: str | None = None
    gpus: str | None = None

    @property
    def in_container(self) -> bool:
        return self.runtime is not None

    def command(self, name: str) -> tuple[str, dict[str, Any]]:
        """(table entry, parameters) of `sglang-help`, `sglang-version` or `sglang-dry-run`
        (`Any`: spread into `NodeSession.run`'s keyword parameters, as bot/bench/remote.py does)."""
        if self.runtime is None:
            return name, {"python": self.python}
        params: dict[str, Any] = {
            "runtime": self.runtime,
            "image": self.image,
            "container_python": self.python,
        }
        if name == "sglang-dry-run" and self.gpus is not None:
            params["container_gpus"] = self.gpus
        return f"container-{name}", params

    def __str__(self) -> str:
        if self.runtime is None:
            return self.python
        return f"{self.python} in {self.image} ({basename(self.runtime)} run)"


_SGLANG_SCRIPT = re.compile(r"^(/\S*/)sglang$")


def host_invoker(prefix: list[str]) -> SglangInvoker | None:
    """The host interpreter of a launch prefix: `/usr/bin/python3 -m sglang.launch_server` names
    it; `/opt/venv/bin/sglang serve` is pip's console script of a venv or conda env, whose own
    `python3` sits beside it in the same `bin/` (a venv and a conda env both have one)."""
    python: str | None = None
    if prefix and _PYTHON_WORD.match(prefix[0]):
        python = prefix[0]
    elif prefix and (script := _SGLANG_SCRIPT.match(prefix[0])) is not None and prefix[1:2] == ["serve"]:
        python = f"{script[1]}python3"
    if python is None:
        return None
    try:
        return SglangInvoker(PARAMS["python"](python))
    except ParamError:  # a path the table would refuse: nothing is guessed
        return None


def container_invoker(prefix: list[str]) -> SglangInvoker | None:
    """The runtime, image and in-image interpreter of a `docker run ... IMAGE [python3 -m ...]`
    prefix; None when a word would not pass the table's validators (nothing is guessed)."""
    run_index = find_docker_run(prefix)
    if run_index is None:
        return None
    try:
        run = parse_docker_run(prefix, run_index, 0)
    except LaunchParseError:
        return None
    command = prefix[run.image_index + 1 :]
    python = command[0] if command and _PYTHON_NAME.match(basename(command[0])) else IMAGE_PYTHON
    invoker = SglangInvoker(
        python=python, runtime=run.program_word, image=prefix[run.image_index], gpus=run.gpus
    )
    try:
        PARAMS["runtime"](invoker.runtime)
        PARAMS["image"](invoker.image)
        PARAMS["container_python"](invoker.python)
        if invoker.gpus is not None:
            PARAMS["container_gpus"](invoker.gpus)
    except ParamError:
        return None
    return invoker


def sglang_invoker(prefix: list[str], kind: LaunchKind) -> SglangInvoker | None:
    """How to ask the SGLang a unit starts (None: flagbot cannot tell; the packaged list is used)."""
    if kind == "docker":
        return container_invoker(prefix)
    return host_invoker(prefix)
