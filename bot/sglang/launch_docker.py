"""`docker run` side of the launch-line parser: find the image so that only the arguments after
it are taken as SGLang flags, and collect the container environment from `-e/--env`.

Telling an option's value from the image needs to know which options take a value, so the
tables below list `docker run`'s options (docker 24-27); an option not in them is refused rather
than guessed, because a wrong guess would edit the wrong arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.sglang.launch_shell import LaunchParseError, basename

# fmt: off
DOCKER_VALUE_LONG = frozenset({
    "--add-host", "--annotation", "--attach", "--blkio-weight", "--blkio-weight-device", "--cap-add",
    "--cap-drop", "--cgroup-parent", "--cgroupns", "--cidfile", "--cpu-count", "--cpu-percent",
    "--cpu-period", "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime", "--cpu-shares", "--cpus",
    "--cpuset-cpus", "--cpuset-mems", "--detach-keys", "--device", "--device-cgroup-rule",
    "--device-read-bps", "--device-read-iops", "--device-write-bps", "--device-write-iops", "--dns",
    "--dns-opt", "--dns-option", "--dns-search", "--domainname", "--entrypoint", "--env", "--env-file",
    "--expose", "--gpus", "--group-add", "--health-cmd", "--health-interval", "--health-retries",
    "--health-start-interval", "--health-start-period", "--health-timeout", "--hostname",
    "--io-maxbandwidth", "--io-maxiops", "--ip", "--ip6", "--ipc", "--isolation", "--kernel-memory",
    "--label", "--label-file", "--link", "--link-local-ip", "--log-driver", "--log-opt", "--mac-address",
    "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount", "--name",
    "--net", "--net-alias", "--network", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit",
    "--platform", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size",
    "--stop-signal", "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "--ulimit", "--user",
    "--userns", "--uts", "--volume", "--volume-driver", "--volumes-from", "--workdir",
})
"""`docker run` options that take a value."""
DOCKER_BOOL_LONG = frozenset({
    "--detach", "--disable-content-trust", "--help", "--init", "--interactive", "--no-healthcheck",
    "--oom-kill-disable", "--privileged", "--publish-all", "--quiet", "--read-only", "--rm",
    "--sig-proxy", "--tty", "--use-api-socket",
})
# fmt: on

DOCKER_VALUE_SHORT = frozenset("acehlmpuvw")
DOCKER_BOOL_SHORT = frozenset("dtiPq")
DOCKER_PROGRAMS = frozenset({"docker", "podman", "nerdctl"})


@dataclass
class DockerRun:
    program: str
    image_index: int
    env: dict[str, str]
    gpus: str | None = None
    """`--gpus` as the command gives it (the dry run passes the same, so post-init sees the GPUs)."""
    program_word: str = ""
    """The runtime as written (`/usr/bin/docker`): the one flagbot runs for the flag list and dry run."""


def find_docker_run(words: list[str]) -> int | None:
    """Index of the `run` word of `docker run` / `docker container run`, if this command is one."""
    for index, word in enumerate(words[:-1]):
        if basename(word) in DOCKER_PROGRAMS:
            rest = words[index + 1 : index + 3]
            if rest[:1] == ["run"]:
                return index + 1
            if rest == ["container", "run"]:
                return index + 2
            return None
    return None


def parse_docker_run(words: list[str], run_index: int, line: int) -> DockerRun:
    """Walk the `docker run` options to the image name, collecting `-e/--env` on the way."""
    env: dict[str, str] = {}
    gpus: str | None = None

    def take_env(value: str) -> None:
        name, eq, rest = value.partition("=")
        env[name] = rest if eq else f"${name}"  # `-e NAME` passes the host's value through

    index = run_index + 1
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if name in DOCKER_VALUE_LONG:
                if not eq:
                    index += 1
                    if index >= len(words):
                        raise LaunchParseError(f"line {line}: docker option {name} lacks its value")
                    value = words[index]
                if name == "--env":
                    take_env(value)
                elif name == "--gpus":
                    gpus = value
            elif name not in DOCKER_BOOL_LONG:
                raise LaunchParseError(
                    f"line {line}: unknown docker run option {name}: cannot tell where the image name is"
                )
        elif word.startswith("-") and len(word) > 1:
            for offset, letter in enumerate(word[1:], start=1):
                if letter in DOCKER_BOOL_SHORT:
                    continue
                if letter not in DOCKER_VALUE_SHORT:
                    raise LaunchParseError(
                        f"line {line}: unknown docker run option -{letter}: cannot tell where the image name is"
                    )
                value = word[offset + 1 :]
                if not value:
                    index += 1
                    if index >= len(words):
                        raise LaunchParseError(f"line {line}: docker option -{letter} lacks its value")
                    value = words[index]
                if letter == "e":
                    take_env(value)
                break
        else:
            break
        index += 1
    if index >= len(words):
        raise LaunchParseError(f"line {line}: docker run has no image name")
    program = (
        run_index - 2 if words[run_index - 1] == "container" else run_index - 1
    )  # `docker container run`
    return DockerRun(
        program=basename(words[program]), image_index=index, env=env, gpus=gpus, program_word=words[program]
    )


ENV_OPTIONS = ("-e", "--env")


def with_container_env(words: list[str], env: dict[str, str]) -> list[str]:
    """`words` (a `docker run ... IMAGE ...` command) with its `-e/--env` options replaced by `env`.

    Why edit the argument list: a container does not inherit the unit's `Environment=`, so an
    `env set` on a container launcher is an `-e NAME=VALUE` of `docker run`. The new options go
    right after `run`, one `-e` per variable in order; every other option and the image's
    arguments stay exactly as they were. A value written `$NAME` (how `-e NAME`, passing the
    host's value through, reads back) is written as `-e NAME` again. A cluster of short options
    holding `e` (`-ite X`) is refused: rewriting it would also rewrite the options around it.
    """
    run_index = find_docker_run(words)
    if run_index is None:
        raise LaunchParseError("the command does not run docker, podman or nerdctl")
    run = parse_docker_run(words, run_index, 0)
    kept: list[str] = []
    index = run_index + 1
    while index < run.image_index:
        word = words[index]
        name = word.partition("=")[0] if word.startswith("--") else word
        if word in ENV_OPTIONS:
            index += 2
            continue
        if name == "--env" or (word.startswith("-e") and not word.startswith("--")):
            index += 1
            continue
        if word.startswith("-") and not word.startswith("--") and "e" in word[1:]:
            letters = word[1:]
            first_value = next((i for i, c in enumerate(letters) if c in DOCKER_VALUE_SHORT), len(letters))
            if "e" in letters[: first_value + 1]:
                raise LaunchParseError(
                    f"docker option {word}: -e inside a cluster of short options; write it as its own -e"
                )
        kept.append(word)
        if (word.startswith("--") and "=" not in word and word in DOCKER_VALUE_LONG) or (
            word.startswith("-")
            and not word.startswith("--")
            and len(word) == 2
            and word[1] in DOCKER_VALUE_SHORT
        ):
            kept.append(words[index + 1])
            index += 1
        index += 1
    options: list[str] = []
    for name, value in env.items():
        options += ["-e", name if value == f"${name}" else f"{name}={value}"]
    return [*words[: run_index + 1], *options, *kept, *words[run.image_index :]]
