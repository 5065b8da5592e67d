"""Shell scripts, pasted command lines and docker wrappers."""

from __future__ import annotations

import pytest

from bot.sglang.flagset import FlagItem
from bot.sglang.launch import LaunchInScriptError, LaunchParseError, parse_launch_text
from bot.sglang.launch_shell import split_commands

PY = "python3 -m sglang.launch_server"


def words(text: str) -> list[list[str]]:
    return [command.words for command in split_commands(text)]


def test_split_commands_on_operators_newlines_and_comments() -> None:
    text = "a b; c && d || e | f & g\n# comment\nh i # trailing\nj#k 'l # m'"
    assert words(text) == [["a", "b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h", "i"], ["j#k", "l # m"]]


def test_quoting_follows_posix_shell() -> None:
    text = r"""x 'a "b" \n' "c \"d\" \$e \q" f\ g "" '' "$(echo "in" $x)" ${A:-b c} `cmd arg`"""
    assert words(text) == [
        ["x", 'a "b" \\n', 'c "d" $e \\q', "f g", "", "", '$(echo "in" $x)', "${A:-b c}", "`cmd arg`"]
    ]


def test_continuations_and_redirections() -> None:
    text = "a \\\n  b \\\r\n  c > out 2>&1 <in &>all >>log\nd"
    assert words(text) == [["a", "b", "c"], ["d"]]
    assert [command.line for command in split_commands(text)] == [1, 4]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a 'b", "line 1: unterminated single quote"),
        ('a\nb "c', "line 2: unterminated double quote"),
        ("a $(b", r"line 1: unterminated \$\("),
        ("a `b", "line 1: unterminated backtick"),
    ],
)
def test_bad_quoting_is_a_launch_parse_error(text: str, message: str) -> None:
    with pytest.raises(LaunchParseError, match=message):
        split_commands(text)


@pytest.mark.parametrize(
    "prompt",
    [
        "((sglang-0.5.8.post1) ) [user@host ~]$ ",
        "(venv) user@gpu-01:~/sglang$ ",
        "[root@node1 sglang]# ",
        "$ ",
        "% ",
    ],
)
def test_leading_prompt_is_not_part_of_the_command(prompt: str) -> None:
    line = parse_launch_text(f"{prompt}A=1 {PY} --a")
    assert line.entrypoint == PY
    assert line.env == {"A": "1"}
    assert line.kind == "command"


def test_script_env_from_export_set_a_and_inline() -> None:
    script = (
        "#!/bin/bash\n"
        "set -euo pipefail\n"
        "export PATH=/cuda/bin:$PATH\n"
        "LOCAL=1\n"
        "SHARED=2\n"
        "export SHARED\n"
        "set -a\nAUTO=3\nset +a\n"
        "AFTER=4\n"
        "export GONE=5\nunset GONE\n"
        "source venv/bin/activate\n"
        f'CUDA_VISIBLE_DEVICES=0,1 exec {PY} --model-path "$MODEL" --tp 2 "$@"\n'
    )
    line = parse_launch_text(script)
    assert line.kind == "script"
    assert line.env == {"PATH": "/cuda/bin:$PATH", "SHARED": "2", "AUTO": "3", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert line.flags.items == (FlagItem("--model-path", "$MODEL"), FlagItem("--tp", "2"))
    assert line.line == 14


def test_exports_after_the_command_do_not_count() -> None:
    line = parse_launch_text(f"{PY} --a\nexport LATE=1\n")
    assert line.env == {}
    assert line.kind == "script"


def test_command_inside_if_and_background_with_log() -> None:
    script = f"if [ -d /m ]; then\n  nohup {PY} --a 1 > /var/log/s.log 2>&1 &\nfi\n"
    line = parse_launch_text(script)
    assert line.wrapper == ["nohup"]
    assert line.entrypoint == f"nohup {PY}"
    assert line.flags.items == (FlagItem("--a", "1"),)


def test_harness_echo_prefix_is_not_env() -> None:
    line = parse_launch_text(f"command={PY} --a")
    assert line.entrypoint == PY
    assert line.env == {}


def test_several_launch_commands_are_refused_with_their_lines() -> None:
    with pytest.raises(LaunchParseError, match=r"several SGLang launch commands \(lines 1, 3\)"):
        parse_launch_text(f"{PY} --a\necho\nsglang serve --b\n")


def test_docker_run_options_values_env_and_image() -> None:
    text = (
        "docker run -d --rm -it --name s --gpus all --ipc=host -p 30000:30000 -v /m:/m "
        '-e A=1 --env B="x y" --env=C=3 -eD=4 -e PASS lmsysorg/sglang:latest --model-path /m --tp 2'
    )
    line = parse_launch_text(text)
    assert line.kind == "docker"
    assert line.env == {"A": "1", "B": "x y", "C": "3", "D": "4", "PASS": "$PASS"}
    assert line.entrypoint == "docker run ... lmsysorg/sglang:latest (image entrypoint)"
    assert line.flags.items == (FlagItem("--model-path", "/m"), FlagItem("--tp", "2"))
    assert line.wrapper[-1] == "lmsysorg/sglang:latest"


@pytest.mark.parametrize(
    ("inside", "entry"),
    [
        (PY, f"docker run ... img:1 {PY}"),
        ("sglang serve", "docker run ... img:1 sglang serve"),
    ],
)
def test_docker_command_inside_the_image(inside: str, entry: str) -> None:
    line = parse_launch_text(f"sudo docker run --shm-size 32g img:1 {inside} --a -1")
    assert line.entrypoint == entry
    assert line.flags.items == (FlagItem("--a", "-1"),)


def test_docker_without_args_has_no_flags() -> None:
    line = parse_launch_text("podman run --rm img")
    assert line.entrypoint == "podman run ... img (image entrypoint)"
    assert line.flags.items == ()


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("docker run --made-up x img --a", LaunchParseError, "unknown docker run option --made-up"),
        ("docker run -Z img --a", LaunchParseError, "unknown docker run option -Z"),
        ("docker run --name", LaunchParseError, "docker option --name lacks its value"),
        ("docker run -d", LaunchParseError, "docker run has no image name"),
        ("docker run img /start.sh --a", LaunchInScriptError, "the container runs '/start.sh', not SGLang"),
    ],
)
def test_docker_refusals(text: str, error: type[LaunchParseError], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_launch_text(text)


def test_other_docker_commands_are_not_launches() -> None:
    line = parse_launch_text(f"docker stop s 2>/dev/null\ndocker logs s\n{PY} --a\n")
    assert line.kind == "script"


def test_only_an_expanding_trailing_passthrough_is_dropped() -> None:
    assert parse_launch_text(f'{PY} --a "$@"').flags.items == (FlagItem("--a"),)
    assert parse_launch_text(f"{PY} --a $@ ${{@}}").flags.items == (FlagItem("--a"),)
    assert parse_launch_text(f"{PY} --a '$@'").flags.items == (FlagItem("--a", "$@"),)
    with pytest.raises(LaunchParseError, match="no SGLang launch command"):
        parse_launch_text('"$@"')


def test_docker_entrypoint_option_with_module_after_the_image() -> None:
    line = parse_launch_text("docker run --entrypoint python3 img -m sglang.launch_server --a")
    assert line.entrypoint == "docker run ... img -m sglang.launch_server"
    assert line.flags.items == (FlagItem("--a"),)
