"""The dry run: the `sglang-dry-run` table entry (a list-of-words parameter) and reading its outcome."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from bot.sglang.catalog import FlagCatalog, UnknownFlagError
from bot.target.dryrun import dry_run, interpret
from bot.target.errors import CommandTimeout
from bot.target.privileged import (
    COMMANDS,
    DRY_RUN_PROGRAM,
    NodeCommand,
    ParamError,
    Rest,
    _check_table,
    render,
    render_params,
)
from bot.target.sudoers import sudoers_text
from bot.target.table_match import identify

UNIT = "sglang-qwen.service"
PY = "/opt/venv/bin/python3"
LINE = b"server_args=ServerArgs(model_path='/m', tp_size=2, max_running_requests=48, disable_overlap_schedule=True)\n"
WARNING = (
    b"Max running requests is reset to 48 for speculative decoding. "
    b"You can override this by explicitly setting --max-running-requests.\n"
)


# --- the table entry ------------------------------------------------------------------------


def test_each_word_is_one_argv_element_quoted_on_its_own() -> None:
    words = ["--model-path", "/m", "--chat-template", "a b'c", "--tp=2", "--lr", "-0.5", ""]
    rendered = render("sglang-dry-run", python=PY, argv=words)
    assert rendered.argv == ["env", PY, "-c", DRY_RUN_PROGRAM, *words]
    assert shlex.split(rendered.shell) == rendered.argv
    assert identify(rendered.shell, unit=UNIT) == ("sglang-dry-run", {"python": PY, "argv": words})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "non-empty list"),
        ("--model-path /m", "non-empty list"),
        (["--model-path", "/m\n--evil"], "control character"),
        (["--model-path", "/m\x00"], "control character"),
        (["--x", "\x1b[31m"], "control character"),
        (["-; reboot"], "neither a flag name nor a number"),
        (["--x", 3], "not a word"),
    ],
)
def test_bad_words_are_refused_before_rendering(argv: object, message: str) -> None:
    with pytest.raises(ParamError, match=message):
        render("sglang-dry-run", python=PY, argv=argv)


def test_a_word_the_table_refuses_is_not_identified() -> None:
    text = shlex.join(["env", PY, "-c", DRY_RUN_PROGRAM, "--x", "a\nb"])
    assert identify(text, unit=UNIT) is None
    other_program = shlex.join(["env", PY, "-c", "import os; os.system('id')", "--x"])
    assert identify(other_program, unit=UNIT) is None


def test_the_program_is_plain_text_and_not_privileged() -> None:
    command = COMMANDS["sglang-dry-run"]
    assert not command.privileged and "{" not in DRY_RUN_PROGRAM
    assert command.required == {"python", "argv"}
    rules = sudoers_text("ops", UNIT)
    assert "prepare_server_args" not in rules and "/usr/bin/env" not in rules


@pytest.fixture
def extra_command() -> Iterator[list[str]]:
    added: list[str] = []
    yield added
    for name in added:
        COMMANDS.pop(name, None)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            NodeCommand("bad-rest1", "env", ("x", Rest("argv")), True, "privileged rest"),
            "literals and the unit",
        ),
        (NodeCommand("bad-rest2", "env", (Rest("argv"), "x"), False, "rest not last"), "comes last"),
        (NodeCommand("bad-rest3", "env", ("x", Rest("python")), False, "string param as rest"), "validator"),
    ],
)
def test_a_rest_token_is_checked_by_the_table(
    extra_command: list[str], command: NodeCommand, message: str
) -> None:
    extra_command.append(command.name)
    COMMANDS[command.name] = command  # type: ignore[index]
    with pytest.raises(AssertionError, match=message):
        _check_table()


# --- outcomes -------------------------------------------------------------------------------


def test_resolved_arguments_and_bare_warnings() -> None:
    result = interpret("cmd", 0, b"torch noise\n" + LINE, WARNING, python=PY)
    assert result.ok and result.available
    assert result.server_args == {
        "model_path": "/m",
        "tp_size": 2,
        "max_running_requests": 48,
        "disable_overlap_schedule": True,
    }
    assert result.warnings == [WARNING.decode().strip()]


def test_argparse_refusal_is_an_answer_with_exit_2() -> None:
    stderr = b"usage: sglang serve [-h] ...\nsglang serve: error: unrecognized arguments: --bogus-flag\n"
    result = interpret("cmd", 2, b"", stderr, python=PY)
    assert result.available and not result.ok
    assert (result.exit_status, result.error) == (
        2,
        "sglang serve: error: unrecognized arguments: --bogus-flag",
    )


@pytest.mark.parametrize(
    ("status", "stderr", "reason"),
    [
        (1, b"Traceback ...\nModuleNotFoundError: No module named 'sglang'\n", "SGLang is not importable by"),
        (127, b"/usr/bin/env: '/opt/venv/bin/python3': No such file or directory\n", "cannot run"),
        (
            1,
            b"RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) is available.\n",
            "No accelerator",
        ),
        (2, b"python3: can't open file\n", "exit 2"),
        (0, b"", "no server_args= line"),
    ],
)
def test_a_host_that_cannot_answer_gives_a_reason_not_an_exception(
    status: int, stderr: bytes, reason: str
) -> None:
    result = interpret("cmd", status, b"", stderr, python=PY)
    assert not result.available and not result.ok
    assert result.reason is not None and reason in result.reason


def test_deprecation_warning_loses_its_terminal_colours() -> None:
    stderr = b"\x1b[1;33mThe command line argument '--enable-piecewise-cuda-graph' is deprecated.\x1b[0m\n"
    result = interpret("cmd", 0, LINE, stderr, python=PY)
    assert result.warnings == ["The command line argument '--enable-piecewise-cuda-graph' is deprecated."]


# --- against a node -------------------------------------------------------------------------


@dataclass
class Answer:
    exit_status: int
    stdout: bytes
    stderr: bytes
    argv_shell: str = ""


@dataclass
class DryNode:
    """Answers the dry run with a fixed outcome; renders every call through the real table."""

    answer: Answer | BaseException
    name: str = "node0"
    index: int = 0
    unit: str = UNIT
    sent: list[str] = field(default_factory=list)

    async def run(
        self, command: str, /, *, timeout: float | None = None, check: bool = True, **params: object
    ) -> Answer:
        self.sent.append(render_params(command, params, sudo=False).shell)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def stream(self, command: str, /, **params: object) -> Iterator[bytes]:
        raise NotImplementedError


async def test_dry_run_sends_the_table_command_and_reads_the_answer() -> None:
    node = DryNode(Answer(0, LINE, WARNING))
    result = await dry_run(node, python=PY, argv=["--model-path", "/m", "--tp", "2"])  # type: ignore[arg-type]
    assert result.ok and result.server_args is not None and result.server_args["tp_size"] == 2
    assert node.sent == [result.command]
    assert identify(node.sent[0], unit=UNIT) is not None


async def test_a_timeout_is_unavailable_with_the_reason() -> None:
    node = DryNode(CommandTimeout("node0", "env ...", 60))
    result = await dry_run(node, python=PY, argv=["--model-path", "/m"])  # type: ignore[arg-type]
    assert not result.available and result.reason is not None and "node0" in result.reason


async def test_an_unknown_flag_is_refused_before_anything_runs() -> None:
    node = DryNode(Answer(0, LINE, b""))
    catalog = FlagCatalog.load("0.5.10")
    with pytest.raises(UnknownFlagError, match="did you mean --enable-metrics"):
        await dry_run(node, python=PY, argv=["--model-path", "/m", "--enable-metrix"], catalog=catalog)  # type: ignore[arg-type]
    assert node.sent == []
    ok = await dry_run(node, python=PY, argv=["--model-path", "/m", "--tp=2", "--lr", "-1"], catalog=None)  # type: ignore[arg-type]
    assert ok.ok
